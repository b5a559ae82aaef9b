"""What a newcomer meets in `curate check-config` and `curate audit` (issue 44's weak spots): the
plan in the order the stages run, the scoring backend named and a vLLM server asked, Hub ids
that cannot be looked up said to be unchecked (not wrong), a workspace made from other data
refused before anything runs, the MMLU example runnable from what is shipped, and a dry run of
Claude's rounds with no key and no network. Real data: HellaSwag and MMLU from ../shared/data,
the demo's rows; a real HTTP server on 127.0.0.1 stands for a vLLM server's model list."""
from __future__ import annotations

import copy
import json
import re
import subprocess
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from annotate_helpers import free_port
from conftest import HELLASWAG, ROOT, run_cli
from curate import demo
from curate.audit.config import DEFAULT_CONFIG, read_yaml

OFFLINE = {"HF_HUB_OFFLINE": "1"}


@pytest.fixture
def base(tmp_path):
    """The demo config with absolute inputs, its rules in tmp_path."""
    data = read_yaml(DEFAULT_CONFIG)
    data["benchmark"]["path"] = str(demo.benchmark_path())
    data["filter"]["rules"] = str(demo.rules_path())
    return data


def written(tmp_path, data, name="audit.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_plan_lists_the_stages_in_the_order_they_run(tmp_path, base):
    """The plan listed analyze before filter, while the audit runs the filter first (its report
    counts what the filter removes): one order now, the one the audit runs."""
    proc = run_cli("check-config", written(tmp_path, base), cwd=tmp_path, env=OFFLINE)
    steps = [line.split()[0] for line in proc.stdout.splitlines()[2:-1]]
    assert steps == ["workspace", "ingest", "annotate", "score", "filter", "analyze", "release"], proc.stdout
    assert proc.stdout.splitlines()[1] == f"paths      outputs under {tmp_path}, the folder curate runs in; inputs " \
                                          "beside the config file"


@contextmanager
def model_list(reply: bytes, content_type: str = "application/json"):
    """A server on 127.0.0.1 answering every GET with ``reply``: its address."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_check_config_names_the_backend_and_asks_the_vllm_server(tmp_path, base):
    """check-config named no backend and did not check that a vLLM `server` is up: it names the
    backend (and the server) in the plan, asks the server for its models with a short timeout,
    says "cannot check offline" when nothing answers, and refuses what is no model list."""
    line = run_cli("check-config", written(tmp_path, base), cwd=tmp_path, env=OFFLINE).stdout
    assert "score      smollm2-135m on full, zero, choice-only (float32, cpu; the engine backend)" in line
    data = copy.deepcopy(base)
    data["scoring"].update(backend="vllm", server=f"http://127.0.0.1:{free_port()}")  # nothing listens there
    down = run_cli("check-config", written(tmp_path, data), cwd=tmp_path, env=OFFLINE, check=False)
    assert down.returncode == 1 and "error:" not in down.stderr, down.stderr
    assert f"(float32, cpu; the vllm backend at {data['scoring']['server']})" in down.stdout
    assert f"cannot check offline: scoring.server {data['scoring']['server']}: no answer in 3 s" in down.stdout
    with model_list(json.dumps({"object": "list", "data": [{"id": "smollm2-135m"}]}).encode()) as url:
        data["scoring"]["server"] = url
        up = run_cli("check-config", written(tmp_path, data), cwd=tmp_path, env=OFFLINE)
    assert up.stdout.strip().splitlines()[-1].startswith("plan complete"), up.stdout
    with model_list(b"<html>a web page</html>", "text/html") as url:
        data["scoring"]["server"] = url
        page = run_cli("check-config", written(tmp_path, data), cwd=tmp_path, env=OFFLINE, check=False)
    assert page.returncode == 2 and f"field 'scoring.server': {url} answered GET /v1/models with no JSON: not a " \
                                   "vLLM server" in page.stderr, page.stderr


def test_a_hub_id_the_hub_cannot_be_asked_about_is_unchecked_not_wrong(tmp_path, base):
    """Offline (nothing answers at the Hub's address), a model's Hub id was an error ("cannot be
    found: the Hub cannot give it: ConnectError"); it is not known from here, so it is listed as
    not checked and the exit status is 1, as for a Hub dataset."""
    data = copy.deepcopy(base)
    data["scoring"]["models"] = ["someone/a-model-in-no-cache"]
    del data["filter"], data["release"]  # the demo rules read smollm2-135m's scores
    env = {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    proc = run_cli("check-config", written(tmp_path, data), cwd=tmp_path, env=env, check=False)
    assert proc.returncode == 1 and "error:" not in proc.stderr, proc.stderr
    assert "cannot check offline: scoring.models[0] 'someone/a-model-in-no-cache': the Hub cannot be reached: " \
           in proc.stdout, proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("plan not fully checked")


def test_check_config_refuses_a_workspace_made_from_other_data(tmp_path, base):
    """check-config said "plan complete" for a config whose data differs from the workspace's,
    which the audit then refused at its first stage: now both refuse it before anything runs."""
    data = copy.deepcopy(base)
    data["benchmark"]["limit"] = 3
    only_ingest = {key: data[key] for key in ("workspace", "benchmark")}
    run_cli("audit", written(tmp_path, only_ingest, "ingest.yaml"), cwd=tmp_path)
    data["benchmark"]["limit"] = 4
    path = written(tmp_path, data)
    for command in ("check-config", "audit"):
        proc = run_cli(command, path, cwd=tmp_path, env=OFFLINE, check=False)
        assert proc.returncode == 2 and "plan complete" not in proc.stdout, proc.stdout
        assert f"field 'benchmark': {tmp_path / 'demo-out' / 'workspace'}: was ingested from other data than " \
               f"{path} names (limit 3 in the workspace, 4 in the config)" in proc.stderr, proc.stderr
    assert sorted(p.name for p in (tmp_path / "demo-out").iterdir()) == ["workspace"]  # nothing else ran


def test_the_mmlu_example_runs_from_what_is_shipped(tmp_path):
    """examples/audit/mmlu-generic.yaml read data/mmlu_test.parquet, which nothing shipped or
    explained: it reads MMLU's test split beside the checkout (../shared/data), and says how to
    make its release repository, which is all check-config then asks for."""
    subprocess.run(["git", "init", "-q", str(tmp_path / "mmlu-releases")], check=True)
    (tmp_path / "run").mkdir()
    example = ROOT / "examples" / "audit" / "mmlu-generic.yaml"
    assert "git init ../mmlu-releases" in example.read_text()
    proc = run_cli("check-config", example, cwd=tmp_path / "run", env=OFFLINE)
    assert f"ingest     generic: {(ROOT.parent / 'shared' / 'data' / 'benchmarks' / 'mmlu' / 'test.jsonl.gz').resolve()}" \
           in proc.stdout, proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("plan complete"), proc.stdout


def test_a_dry_run_shows_claudes_requests_the_plan_and_the_cost_without_a_key_or_network(tmp_path):
    """No way to try the Claude steps without a key: `curate audit CONFIG --dry-run` shows the
    plan, each round's first request as it would be sent, and the most each round could cost,
    the same ceilings `curate annotate --dry-run` gives without a key; it asks no server (the Hub
    at a dead address is never reached), needs no key, and writes nothing."""
    config = written(tmp_path, {
        "workspace": "ws", "benchmark": {"adapter": "hellaswag", "path": str(HELLASWAG), "limit": 20},
        "annotators": [{"annotator": "anthropic:claude-haiku-4-5", "rounds": [1, 2], "batch": True, "max_cost": 5},
                       {"annotator": "local:smollm2-135m", "rounds": [1]}],
        "scoring": {"models": ["smollm2-135m"], "modes": ["full"]}})
    env = {"ANTHROPIC_API_KEY": "", "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}",
           "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{free_port()}"}
    proc = run_cli("audit", config, "--dry-run", cwd=tmp_path, env=env)
    out = proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.yaml"]  # nothing written
    assert "annotate   anthropic:claude-haiku-4-5 rounds 1, 2 (batch API, concurrency 4, max $5/round)" in out
    assert "the request for hellaswag/validation/0 (each item's is alike; tools: submit_labels, decline_item):" in out
    assert "| system: You are auditing items of a multiple-choice benchmark" in out
    assert "| D. starts pulling up roofing on a roof. (marked correct)" in out
    assert "annotate   local:smollm2-135m round 1: 20 items on this machine, nothing to pay" in out
    assert "note: a real run needs it (annotators[0].annotator): set ANTHROPIC_API_KEY" in proc.stderr
    ceilings = re.findall(r"round (\d): 20 requests through the Message Batches API, input at most (\d+) tokens, "
                          r"output at most (\d+); at most \$([\d.]+) if every first reply is usable, \$([\d.]+)", out)
    assert [c[0] for c in ceilings] == ["1", "2"], out
    ws = tmp_path / "ws"
    run_cli("init", ws, "--benchmark", "hellaswag", "--data", HELLASWAG, "--limit", "20")
    for round_, tokens, output, first, every in ceilings:
        alone = run_cli("annotate", ws, "--round", round_, "--annotator", "anthropic:claude-haiku-4-5", "--batch",
                        "--dry-run", env={"ANTHROPIC_API_KEY": ""}).stdout
        assert f"input tokens: {tokens}, an upper bound" in alone and f"output tokens: at most {output}" in alone
        assert f"cost: at most {first} USD if every first reply is usable; at most {every} USD" in alone, alone
