"""What annotation guarantees about money, secrets and concurrent runs, each case tested.

Servers: llm-katan (a real Anthropic-compatible server on 127.0.0.1; no count_tokens, no prompt
cache) wherever it can play the part, and tests/standin_anthropic.py only for what llm-katan
cannot do: count_tokens, the prompt cache's rules, Message Batches, a reply that must be re-asked,
an endpoint that echoes the key in replies, and a 200 that is HTML or broken JSON.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time

import anthropic
import pytest

from annotate import claude
from curate.anthropic_api import client as api, prices
from annotate.run import Annotate
from annotate.options import AnnotateOptions
from annotate.store import open_annotations, read_ledger
from annotate_helpers import KEY, MODEL, api_env, copy_ws, items_of, katan, records, small_workspace
from conftest import ROOT, one_line_error, run_cli
from curate.core.lock import lock_path, work_lock
from curate.core.secrets import REDACTED, redact
from standin_anthropic import StandIn, prompt_tokens

ANNOTATOR = f"anthropic:{MODEL}"
FAST = dict(backoff=0.01, quiet=True)
EVERY_ITEM = '"role"'  # text in every request's messages: StandIn(malformed=EVERY_ITEM) garbles every reply


@pytest.fixture(scope="module")
def base_ws(tmp_path_factory):
    return small_workspace(tmp_path_factory.mktemp("reliability") / "ws", 24)


def ledger(ws):
    with open_annotations(ws) as w:
        return read_ledger(w)


def everything_written(ws, *extra) -> str:
    """Every byte under the workspace (database, WAL, exports) and the extra texts, as one text."""
    blobs = [p.read_bytes().decode("latin-1") for p in ws.rglob("*") if p.is_file()]
    return "\n".join(blobs + [str(e) for e in extra])


# --- spend ------------------------------------------------------------------------------------

def test_max_cost_holds_when_every_reply_needs_all_re_asks(base_ws, tmp_path, monkeypatch):
    """Every reply is unreadable, so each item costs three requests, each longer than the last;
    the cap holds and the stop message gives the run's true spend from the ledger."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    cap = 0.05
    with StandIn(malformed=EVERY_ITEM) as s:
        proc = run_cli("annotate", ws, "--round", "1", "--annotator", ANNOTATOR, "--max-cost", cap, "--concurrency", "3",
                       "--backoff", "0.01", "--no-progress", check=False,
                       env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": s.url})
        bodies = list(s.requests)
    spent = ledger(ws)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert 0 < spent.usd.sum() <= cap
    assert f"this run spent {spent.usd.sum():.4f} USD" in proc.stderr and "--max-cost 0.05 USD reached" in proc.stderr
    per_item = spent.groupby("item_id").usd.agg(["sum", "count"])
    assert (per_item["count"] == 3).all() and len(per_item) >= 5
    # Each item's reservation is its worst case; it covers what the item really cost.
    worst = [claude.worst_case_usd(b, api.input_bound(b), attempts=3, batch=False)
             for b in bodies if len(b["messages"]) == 1]
    assert max(per_item["sum"]) < min(worst)
    print(f"\nworst case reserved per item {min(worst):.4f}-{max(worst):.4f} USD, spent per item "
          f"{per_item['sum'].min():.4f}-{per_item['sum'].max():.4f} USD; {len(per_item)} items, "
          f"{spent.usd.sum():.4f} of {cap} USD")


def test_input_bound_is_a_bound(base_ws):
    """The bound against two independent counts: the stand-in API's and a real byte-level BPE
    tokenizer's (SmolLM2) over the request's text, re-ask conversations included."""
    from scoring.models import tokenizer as load_tokenizer

    tok = load_tokenizer("smollm2-135m")
    items = items_of(base_ws)
    for round in (1, 2):
        for item in items:
            params = claude.request_params(MODEL, item, round)
            bound = api.input_bound(params)
            text = params["system"][0]["text"] + json.dumps(params["tools"]) + json.dumps(params["messages"])
            assert prompt_tokens(params)[0] <= bound
            assert len(tok(text, add_special_tokens=False)["input_ids"]) + prices.model_info(MODEL).tool_prompt <= bound
    answer = claude.Answer("unusable", problem="x" * 5000 + "é" * 3000, tool_use_id="toolu_1")
    note = claude.repair_turn(answer, 1)[0]["content"]
    assert len(note.encode("utf-8")) <= claude.REPAIR_BYTES


def test_batches_stay_under_max_cost_and_send_the_rest_when_it_fits(base_ws, tmp_path, monkeypatch):
    ws = copy_ws(base_ws, tmp_path / "ws")
    params = claude.request_params(MODEL, items_of(base_ws)[0], 2)
    one = claude.worst_case_usd(params, api.input_bound(params), attempts=1, batch=True)
    cap = one * 8.5  # the first batch can hold 8 items at their worst; the true cost is far lower
    with StandIn(polls_before_end=0) as s:
        api_env(monkeypatch, s.url)
        summary = Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, batch=True, max_cost=cap,
                                               poll_interval=0.01, **FAST)).run()
    sizes = [len(b["requests"]) for b in s.batches.values()]
    spent = ledger(ws).usd.sum()
    assert sizes[0] <= 8 and len(sizes) > 1 and sum(sizes) > 8
    assert spent <= cap and summary["valid"] == sum(sizes)
    assert summary["remaining"] == 0 or "--max-cost" in summary["stopped"]


def test_dry_run_counts_with_count_tokens_where_offered(base_ws, tmp_path):
    ws = copy_ws(base_ws, tmp_path / "ws")
    env_of = lambda url: {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url}  # noqa: E731
    args = ("annotate", ws, "--round", "2", "--annotator", ANNOTATOR, "--dry-run", "--limit", "10", "--no-progress")
    with StandIn() as s:
        counted = run_cli(*args, env=env_of(s.url)).stdout
        assert s.requests == [] and s.counted >= 10
    with StandIn(count_tokens=False) as s:
        bounded = run_cli(*args, env=env_of(s.url)).stdout
    no_key = run_cli(*args, env={"ANTHROPIC_API_KEY": ""}).stdout
    assert "counted by the endpoint's count_tokens" in counted
    assert "an upper bound" in bounded and "an upper bound" in no_key
    tokens = {name: int(out.split("input tokens: ")[1].split(",")[0]) for name, out in
              (("counted", counted), ("bounded", bounded), ("no key", no_key))}
    assert tokens["counted"] < tokens["bounded"] == tokens["no key"]
    assert "prompt cache: not used" in counted and "below the model's minimum cacheable length of 4096" in counted


def test_a_thinking_model_is_refused_and_a_retiring_one_is_named_before_anything_is_sent(base_ws, tmp_path):
    """A model that thinks by default (here the 5.5 Sonnet, which also refuses forced tool choice)
    is one error line, before any request and with nothing written; a model the anthropic SDK
    lists as retiring runs, with a note giving its date."""
    from anthropic.resources.messages.messages import DEPRECATED_MODELS

    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn() as s:
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": s.url}
        refused = run_cli("annotate", ws, "--round", "1", "--annotator", "anthropic:claude-sonnet-5-5", "--limit", "2",
                          "--no-progress", env=env, check=False)
        one_line_error(refused, "'claude-sonnet-5-5' is not supported: it thinks by default",
                       "forced tool choice", "use claude-sonnet-4-6")
        assert s.requests == [] and s.counted == 0
        retiring = run_cli("annotate", ws, "--round", "1", "--annotator", "anthropic:claude-sonnet-4-5", "--dry-run",
                           "--limit", "2", "--no-progress", env=env)
    assert records(ws).empty and ledger(ws).empty
    assert (f"note: claude-sonnet-4-5 reaches its end of life on {DEPRECATED_MODELS['claude-sonnet-4-5']}"
            in retiring.stderr) and "dry run: 2 of 2 items" in retiring.stdout


def test_bound_covers_what_llm_katan_bills(base_ws, tmp_path, monkeypatch):
    """llm-katan offers no count_tokens: the dry run falls back to the bound, and the real run's
    billed input tokens (llm-katan's own count) stay under it, request by request."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    with katan(tmp_path) as url:
        api_env(monkeypatch, url)
        dry = Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, dry_run=True, limit=8, key_header="x-api-key",
                                           **FAST)).run()
        done = Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, limit=8, key_header="x-api-key",
                                            **FAST)).run()
    assert dry["input_tokens_method"] == "bound" and done["valid"] == 8
    billed = ledger(ws)
    assert billed.input_tokens.sum() <= dry["input_tokens"]
    bounds = {it["item_id"]: api.input_bound(claude.request_params(MODEL, it, 2)) for it in items_of(ws)[:8]}
    assert all(row.input_tokens <= bounds[row.item_id] for row in billed.itertuples())
    assert done["cost"]["usd"] <= dry["usd_first_answers"]


# --- prompt cache -----------------------------------------------------------------------------

def test_standin_follows_the_cache_rules():
    """Below the model's minimum nothing is cached, marked or not; at or above it the first
    request writes the prefix and the next reads it; an unmarked prefix is never cached."""
    long_text, short_text = "Judge the item carefully. " * 400, "Judge the item."
    with StandIn() as s:
        client = anthropic.Anthropic(api_key=KEY, base_url=s.url, max_retries=0)

        def usage(model, text, mark=True):
            block = {"type": "text", "text": text, **({"cache_control": {"type": "ephemeral"}} if mark else {})}
            return client.messages.create(model=model, max_tokens=50, system=[block],
                                          messages=[{"role": "user", "content": "hello"}]).usage

        short = [usage("claude-sonnet-4-5", short_text) for _ in range(2)]
        assert all(u.cache_creation_input_tokens == u.cache_read_input_tokens == 0 for u in short)
        first, second = usage("claude-sonnet-4-5", long_text), usage("claude-sonnet-4-5", long_text)
        assert first.cache_creation_input_tokens >= 1024 and first.cache_read_input_tokens == 0
        assert second.cache_read_input_tokens == first.cache_creation_input_tokens and second.cache_creation_input_tokens == 0
        # 2600 tokens: enough for Sonnet 4.5 (1024), not for Haiku 4.5 (4096)
        assert usage("claude-haiku-4-5", long_text).cache_creation_input_tokens == 0
        assert usage("claude-sonnet-4-5", long_text + "x", mark=False).cache_creation_input_tokens == 0


def test_a_long_enough_prefix_is_marked_and_the_reads_are_the_apis(base_ws, tmp_path, monkeypatch):
    """Instructions made longer than Sonnet 4.5's minimum: the prefix is marked; the first reply
    writes it, every later one reads it, and the ledger holds exactly what the API reported."""
    from annotate import prompts

    real = prompts.load_prompt(1)  # HellaSwag items are continuations: the default kind
    long = prompts.Prompt(1, (real.instructions + "\n") * 3, real.item_template, real.version)
    monkeypatch.setattr(claude, "load_prompt", lambda round, kind=None: long)
    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn() as s:
        api_env(monkeypatch, s.url)
        summary = Annotate(ws, AnnotateOptions(round=1, annotator="anthropic:claude-sonnet-4-5", limit=6, concurrency=1,
                                               **FAST)).run()
        reported = [prompt_tokens(b) for b in s.requests]
    assert summary["cache"]["marked"] and summary["cache"]["method"] == "count_tokens"
    assert summary["cache"]["prefix_tokens"] >= 1024 == summary["cache"]["minimum"]
    rows = ledger(ws)
    prefix = reported[0][1]
    assert rows.cache_write_tokens.tolist() == [prefix] + [0] * 5
    assert rows.cache_read_tokens.tolist() == [0] + [prefix] * 5
    # cache tokens priced at their own rates
    assert rows.usd.sum() == pytest.approx(sum(prices.usd("claude-sonnet-4-5", input_tokens=r.input_tokens,
                                                          output_tokens=r.output_tokens, cache_write_tokens=r.cache_write_tokens,
                                                          cache_read_tokens=r.cache_read_tokens) for r in rows.itertuples()))


# --- secrets ----------------------------------------------------------------------------------

GATEWAY_TOKEN = "gw9f3KcQ27xLmP0aZt4Rb8"


@pytest.mark.parametrize("key, url_form", [(KEY, ""), ("sk-ant-tést-ünïcode-key-0123456789", ""), (KEY, "credentials"),
                                           (KEY, "gateway")],
                         ids=["ascii-key", "non-ascii-key", "url-credentials", "gateway-token-in-path"])
def test_an_echoed_secret_reaches_no_file_export_or_output(base_ws, tmp_path, key, url_form):
    """The endpoint puts the credentials it received into every reply's text and model name (a
    non-ASCII key comes back as its UTF-8 bytes read as Latin-1; user:password in
    ANTHROPIC_BASE_URL is sent, and echoed, as a Basic authorization header; a gateway's token in
    the URL's path is echoed with the request path). None of it is stored (records, raw replies,
    run record and its base_url, ledger), exported or printed."""
    import base64

    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn(echo_key=True) as s:
        url = {"": s.url, "credentials": s.url.replace("http://", "http://alice:pa55-w0rd-secret@"),
               "gateway": f"{s.url}/gw/{GATEWAY_TOKEN}/anthropic"}[url_form]
        env = {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": url}
        proc = run_cli("annotate", ws, "--round", "2", "--annotator", ANNOTATOR, "--limit", "4", env=env)
    outs = [run_cli("export", ws, "annotations", "--out", tmp_path / f"a.{ext}", env=env) for ext in ("jsonl", "csv")]
    assert "valid 4" in proc.stdout
    exports = [(tmp_path / f"a.{ext}").read_bytes().decode("latin-1") for ext in ("jsonl", "csv")]
    text = everything_written(ws, proc.stdout, proc.stderr, *(o.stdout + o.stderr for o in outs), *exports)
    secrets = {key, key.encode("utf-8").decode("latin-1"), json.dumps(key)[1:-1], "pa55-w0rd-secret",
               base64.b64encode(b"alice:pa55-w0rd-secret").decode(), GATEWAY_TOKEN}
    for secret in secrets:
        assert secret not in text
    raw = records(ws).raw.iloc[0]
    assert "request made with key" in raw and REDACTED in raw
    if url_form == "gateway":  # the request did go through the gateway's path, and is stored without its token
        assert f"/gw/{REDACTED}/anthropic/v1/messages" in raw


def test_non_ascii_key_echoed_in_an_auth_error_is_redacted(base_ws, tmp_path):
    key = "sk-ant-tést-ünïcode-0123456789"
    ws = copy_ws(base_ws, tmp_path / "ws")
    with katan(tmp_path, "--validate-keys", "--api-keys", "anthropic=the-right-key") as url:
        proc = run_cli("annotate", ws, "--round", "2", "--annotator", ANNOTATOR, "--limit", "2",
                       "--key-header", "x-api-key", check=False, env={"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": url})
    assert proc.returncode == 2 and "authentication failed" in proc.stderr and REDACTED in proc.stderr
    for form in (key, key.encode("utf-8").decode("latin-1"), "ünïcode", "Ã¼nÃ¯code"):
        assert form not in proc.stderr + proc.stdout


def test_redact_every_shape_of_every_secret(monkeypatch, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("hf_savedTOKENfromlogin123\n")
    monkeypatch.setenv("HF_TOKEN_PATH", str(token_file))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-clé-0123456789")
    monkeypatch.setenv("HF_TOKEN", "hf_environmentTOKEN456")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://bob:hunter2-long@proxy.example/v1")
    text = ("key sk-ant-clé-0123456789 / sk-ant-clÃ©-0123456789 / sk-ant-cl\\u00e9-0123456789 / "
            "sk-ant-cl\\xe9-0123456789 / sk-ant-cl%C3%A9-0123456789; hub hf_environmentTOKEN456 "
            "hf_savedTOKENfromlogin123; https://bob:hunter2-long@proxy.example/v1 and "
            "git+ssh://carol:other-pass@host/repo.git; password alone hunter2-long")
    clean = redact(text)
    for secret in ("clé", "clÃ©", "cl\\u00e9", "cl\\xe9", "cl%C3%A9", "hf_environmentTOKEN456", "hf_savedTOKENfromlogin123",
                   "hunter2-long", "other-pass", "carol"):
        assert secret not in clean, secret
    assert "https://[redacted]@proxy.example/v1" in clean and "git+ssh://[redacted]@host/repo.git" in clean
    monkeypatch.setenv("HF_TOKEN", "1")
    assert redact("version 1.0.1") == "version 1.0.1"  # too short to be a secret


def test_redact_a_gateway_token_in_the_base_urls_path_or_query(monkeypatch):
    """Gateways that take their token in the URL: a key-shaped path segment, and a query value
    (every value of a key/token/auth-named parameter, a key-shaped value of any other) are secrets;
    the path's names, a model name and short settings are left alone."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://gw.example/v1/acct-7f3e9a1c2b4d6e8f/my-gateway/anthropic"
                                             "?api-version=2023-06-01&sig=s1gn4ture&region=eu&t=Zq8Xw2Lp9Rk4Mn7V")
    text = ("POST https://gw.example/v1/acct-7f3e9a1c2b4d6e8f/my-gateway/anthropic/v1/messages?sig=s1gn4ture&"
            "t=Zq8Xw2Lp9Rk4Mn7V failed; model claude-sonnet-4-5-20250929, region eu, api-version 2023-06-01")
    clean = redact(text)
    for secret in ("7f3e9a1c2b4d6e8f", "s1gn4ture", "Zq8Xw2Lp9Rk4Mn7V"):
        assert secret not in clean, secret
    for kept in ("https://gw.example/v1/", "/my-gateway/anthropic/v1/messages", "claude-sonnet-4-5-20250929",
                 "region eu", "api-version 2023-06-01"):
        assert kept in clean, kept


def test_cli_redacts_hub_token_and_url_credentials_in_errors(tmp_path):
    """Any command's error output, here `curate init` naming a path and a URL it cannot read."""
    token = "hf_TOKENinAPathXYZ123"
    for data in (f"/no/such/{token}/validation.jsonl", "https://alice:s3cr3t-pass@127.0.0.1:9/validation.jsonl"):
        proc = run_cli("init", tmp_path / "ws", "--benchmark", "hellaswag", "--data", data, check=False,
                       env={"HF_TOKEN": token})
        assert proc.returncode != 0
        assert token not in proc.stderr and "s3cr3t-pass" not in proc.stderr and REDACTED in proc.stderr


# --- one writer -------------------------------------------------------------------------------

def start_annotate(ws, url, round, limit=10):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url}
    return subprocess.Popen([sys.executable, "-m", "curate", "annotate", str(ws), "--round", str(round), "--annotator",
                             ANNOTATOR, "--limit", str(limit), "--concurrency", "1", "--key-header", "x-api-key",
                             "--no-progress"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_lock(ws, work, proc):
    path = lock_path(ws, work)
    deadline = time.time() + 60
    while not (path.is_file() and b"pid" in path.read_bytes()):
        assert time.time() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() is not None else ""
        time.sleep(0.05)


def test_second_annotate_on_the_same_work_is_refused(base_ws, tmp_path):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with katan(tmp_path, "--latency-ms", "1500") as url:  # the first run takes 15 s or more
        first = start_annotate(ws, url, 2)
        wait_for_lock(ws, f"annotate {ANNOTATOR} round 2", first)
        second = run_cli("annotate", ws, "--round", "2", "--annotator", ANNOTATOR, "--limit", "10",
                         "--key-header", "x-api-key", check=False, env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url})
        other_round = run_cli("annotate", ws, "--round", "1", "--annotator", ANNOTATOR, "--limit", "2", "--no-progress",
                              "--key-header", "x-api-key", env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url})
        assert first.wait(120) == 0
    lines = second.stderr.strip().splitlines()
    assert second.returncode == 2 and len(lines) == 1 and "Traceback" not in second.stderr
    assert f"another `curate annotate` is already running annotate {ANNOTATOR} round 2" in lines[0]
    assert f"pid {first.pid}" in lines[0]
    assert "invalid 2" in other_round.stdout  # another round runs alongside (llm-katan's round 1 is unusable)
    round2, round1, rows = records(ws, round=2), records(ws, round=1), ledger(ws)
    assert len(round2) == 10 and round2.run_id.nunique() == 1  # each item asked by one run, once
    assert len(rows[rows.run_id == round2.run_id.iloc[0]]) == 10
    assert set(rows.run_id) == {round2.run_id.iloc[0], round1.run_id.iloc[0]}  # the refused run asked nothing


def test_a_killed_run_leaves_no_stale_lock(base_ws, tmp_path):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with katan(tmp_path, "--latency-ms", "300") as url:
        first = start_annotate(ws, url, 2, limit=20)
        wait_for_lock(ws, f"annotate {ANNOTATOR} round 2", first)
        first.send_signal(signal.SIGKILL)
        first.wait()
        again = run_cli("annotate", ws, "--round", "2", "--annotator", ANNOTATOR, "--limit", "20", "--no-progress",
                        "--key-header", "x-api-key", env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url})
    assert "remaining 0" in again.stdout
    assert len(records(ws, round=2)) == 20


def test_second_score_on_the_same_label_is_refused(base_ws, tmp_path):
    """The scoring run checks the lock before it loads the model. The holder is this test
    process, a process apart from the `curate score` subprocess."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    with work_lock(ws, "score smollm2-135m", command="score"):
        proc = run_cli("score", ws, "--model", "smollm2-135m", "--modes", "full", "--limit", "2", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"another `curate score` is already running score smollm2-135m in this workspace (pid {os.getpid()}" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_second_generate_of_the_same_label_and_settings_is_refused(base_ws, tmp_path):
    """Found by an audit: two `curate generate` runs of one label both asked for every pending
    answer (with Claude, paid twice). The second now stops before its model loads, naming the
    holder (this test process); other settings are other work and are not held up."""
    from generate.prompts import DEFAULT_TEMPLATE, load_template
    from generate.store import settings_label
    ws = copy_ws(base_ws, tmp_path / "ws")
    work = f"generate smollm2-135m {load_template(DEFAULT_TEMPLATE).name} {settings_label(0.0, 1.0, 8)}"
    args = ["generate", ws, "--model", "smollm2-135m", "--modes", "full", "--seeds", "1", "--limit", "2", "--quiet"]
    with work_lock(ws, work, command="generate"):
        proc = run_cli(*args, check=False)
        other = run_cli(*args, "--max-new-tokens", "2")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert f"another `curate generate` is already running {work} in this workspace (pid {os.getpid()}" in proc.stderr
    assert other.returncode == 0


def _open_tables(root, barrier, results):
    from scoring.store import open_scores

    barrier.wait()
    try:
        open_scores(root).close()
        open_annotations(root).close()
        results.put("ok")
    except Exception as exc:  # noqa: BLE001 - the test reports whatever a process hit
        results.put(repr(exc))


def test_concurrent_processes_create_a_fresh_workspaces_tables(base_ws, tmp_path):
    """Six processes open a fresh workspace's score and annotation tables at the same instant,
    three times over (before the fix five of six failed with 'table score_runs already exists')."""
    ctx = multiprocessing.get_context("fork")
    for trial in range(3):
        root = tmp_path / f"ws{trial}"
        shutil.copytree(base_ws, root)
        barrier, results = ctx.Barrier(6), ctx.Queue()
        procs = [ctx.Process(target=_open_tables, args=(root, barrier, results)) for _ in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [results.get(timeout=5) for _ in procs] == ["ok"] * 6


# --- an endpoint that is not the API -----------------------------------------------------------

@pytest.mark.parametrize("body, says", [("html", "answered HTTP 200 with text, not JSON: '<html><body><h1>Sign in"),
                                        ("broken-json", "answered HTTP 200 with broken JSON"),
                                        ("other-json", "answered HTTP 200 with JSON without the fields of a message")])
@pytest.mark.parametrize("batch", [False, True], ids=["messages", "batches"])
def test_endpoint_answering_200_with_something_else(base_ws, tmp_path, body, says, batch):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn(body=body) as s:
        proc = run_cli("annotate", ws, "--round", "2", "--annotator", ANNOTATOR, "--limit", "3", "--no-progress",
                       *(["--batch"] if batch else []), check=False,
                       env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": s.url})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    assert "check ANTHROPIC_BASE_URL" in lines[0] and s.url in lines[0]  # the endpoint named, whatever it sent
    if not batch:
        assert says in lines[0]
    assert records(ws).empty and ledger(ws).empty


# --- settings no request can succeed with ------------------------------------------------------

@pytest.mark.parametrize("command", ["annotate", "generate"])
@pytest.mark.parametrize("key, url, header, says", [
    (KEY + "\n", None, None, "ANTHROPIC_API_KEY holds a line break"),
    (KEY, None, "x api key", "-o key-header 'x api key' is not a valid HTTP header name"),
    (KEY, "http://127.0.0.1::1", None, "ANTHROPIC_BASE_URL 'http://127.0.0.1::1' is not a usable URL"),
    (KEY, "localhost:8080", None, "ANTHROPIC_BASE_URL 'localhost:8080' is not a usable URL"),
    (KEY, "http://127.0.0.1:99999", None, "ANTHROPIC_BASE_URL 'http://127.0.0.1:99999' is not a usable URL: port "
                                          "99999 is not a TCP port"),
    (KEY, "http://user:p@[bad", None, "is not a usable URL: '%5Bbad' is no host name or IP address"),
    (KEY, "http://api example.com", None, "is not a usable URL: 'api%20example.com' is no host name"),
], ids=["key-newline", "bad-header", "bad-port", "no-scheme", "port-out-of-range", "bad-host", "space-in-host"])
def test_a_bad_setting_is_one_line_without_retries(base_ws, tmp_path, command, key, url, header, says):
    """Reported at once, naming the setting (never the key); not a "Connection error" retried
    with backoff, not a traceback. Nothing is sent."""
    from conftest import one_line_error

    ws = copy_ws(base_ws, tmp_path / "ws")
    args = (["--round", "2", "--annotator", ANNOTATOR, "--no-progress"] if command == "annotate"
            else ["--model", ANNOTATOR, "--seeds", "1", "--quiet"])
    with StandIn() as s:
        started = time.monotonic()
        proc = run_cli(command, ws, *args, "--limit", "2", *(["--key-header", header] if header else []),
                       check=False, env={"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": url or s.url})
        assert s.headers == [] and time.monotonic() - started < 30
    line = one_line_error(proc, says)
    assert KEY not in proc.stderr + proc.stdout and "Connection error" not in line
    assert records(ws).empty


@pytest.mark.parametrize("command", ["annotate", "generate"])
def test_a_max_cost_or_any_number_of_nan_or_inf_is_refused(base_ws, command):
    """float() reads 'nan' and 'inf', and no comparison with nan is ever true: a cap of nan
    would never stop a run."""
    for value in ("nan", "inf"):
        args = (["--round", "1", "--annotator", ANNOTATOR] if command == "annotate"
                else ["--model", "anthropic:claude-haiku-4-5", "--modes", "zero"])
        proc = run_cli(command, base_ws, *args, "--max-cost", value, check=False)
        assert proc.returncode == 2 and f"{value} is not a finite number" in proc.stderr, proc.stderr
    # the same for every other number a run takes: a backoff of nan failed after requests were sent
    options = ["--backoff", "--timeout", *(["--poll-interval"] if command == "annotate" else ["--temperature"])]
    for option in options:
        proc = run_cli(command, base_ws, *args, option, "nan", check=False)
        assert proc.returncode == 2 and "nan is not a finite number" in proc.stderr, (option, proc.stderr)
    proc = run_cli("analyze", base_ws, "--out", base_ws.parent / "r", "--alpha", "nan", check=False)
    assert proc.returncode == 2 and "nan is not a finite number" in proc.stderr
    if command == "generate":  # a temperature where sampling overflows, and seeds beyond any use
        for option, value, says in (("--temperature", "1e-300", "use 0 for greedy decoding"),
                                    ("--seeds", "1000000000", "1000000000 is not in the range 1<=x<=1000")):
            proc = run_cli(command, base_ws, *args, option, value, check=False)
            assert proc.returncode == 2 and says in proc.stderr, proc.stderr
        # a local model: the window is known once it loads; the option is named, not an item
        proc = run_cli(command, base_ws, "--model", "smollm2-135m", "--modes", "zero", "--seeds", "1", "--limit", "1",
                       "--max-new-tokens", "100000", check=False)
        assert proc.returncode == 2 and "--max-new-tokens 100000 leaves no room for a prompt in the model's window " \
            "of 8192 tokens" in proc.stderr, proc.stderr
