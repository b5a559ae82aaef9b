"""Near ``--max-cost`` a run slows down, because every request is held at its worst case until
its reply is billed: Messages requests wait for room beside the ones in flight, and each message
batch takes only the items whose worst case fits beside the batches still processing, so batches
shrink as the cap nears. The run says so on its progress line while the cap holds it back, and
when the cap stops it says what was spent, what is left, how many items are left and how to
resume with a higher cap; Ctrl-C says the same instead of a bare "Aborted!" (issue 37, item 4).

Real HellaSwag items, the real anthropic SDK, tests/standin_anthropic.py on 127.0.0.1.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from annotate import claude
from annotate.run import Annotate
from annotate.options import AnnotateOptions
from annotate_helpers import KEY, MODEL, api_env, items_of, small_workspace
from conftest import ROOT, run_cli
from curate.anthropic_api import client as api
from generate.run import Generate
from generate.options import GenerateOptions
from standin_anthropic import StandIn

SPEC = f"anthropic:{MODEL}"


def worst(ws, *, attempts: int, batch: bool) -> float:
    """The most the first item's round-1 request(s) can cost."""
    params = claude.request_params(MODEL, items_of(ws)[0], 1)
    return claude.worst_case_usd(params, api.input_bound(params), attempts=attempts, batch=batch)


def worst_answer(ws) -> float:
    """The most the first item's generated answer (full mode, seed 0) can cost."""
    from generate import claude as gen
    from generate.prompts import load_template, render, shuffle_order

    item = items_of(ws)[0]
    order = shuffle_order(item["content_hash"], 0, len(item["options"]))
    instructions, user = render(load_template("numbered"), item["prompts"]["full"], item["options"], order)
    return gen.worst_case_usd(gen.request_params(MODEL, instructions, user, max_new_tokens=8), len(order), 0)


def test_batches_the_cap_shrinks_are_named_and_the_stop_says_how_to_resume(tmp_path):
    """Found: with max_cost 5 round 1 went from about 500 to 2 items/s (ETA 1 -> 16 min) without
    a word: each batch took what fit under the cap at its worst case, batches shrank to one item."""
    ws = small_workspace(tmp_path / "ws", 150)
    cap = round(25 * worst(ws, attempts=1, batch=True), 4)
    args = ["annotate", ws, "--round", "1", "--annotator", SPEC, "--batch", "--poll-interval", "0"]
    with StandIn(polls_before_end=0) as s:
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": s.url}
        proc = run_cli(*args, "--max-cost", cap, env=env, check=False)
        sizes = [len(b["requests"]) for b in s.batches.values()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert sizes[0] > sizes[-1] == 1 and sizes == sorted(sizes, reverse=True), sizes  # the crawl
    # the progress line names the cap while it holds items back
    assert re.search(r"cap=\d+ items wait: [0-9.]+ USD reserved by batches in flight, [0-9.]+ left", proc.stderr), \
        proc.stderr[-2000:]
    assert f"--max-cost {cap:g} USD: each batch now takes only the items whose worst case fits" in proc.stderr
    [stop] = [line for line in proc.stderr.splitlines() if line.startswith("error: stopped: ")]
    done = int(re.search(r"valid (\d+)", proc.stdout).group(1))
    spent = float(re.search(r"this run spent ([0-9.]+) USD", stop).group(1))
    assert f"--max-cost {cap:g} USD reached" in stop and spent <= cap
    assert f"{cap - spent:.4f} USD of the cap is left" in stop, stop
    assert f"{150 - done} items left" in stop, stop
    higher = float(re.search(r"--max-cost ([0-9.]+) lets every request go without waiting on the cap", stop).group(1))
    assert higher > cap
    # resumed with the cap the message gives: the rest in one batch, nothing held back
    with StandIn(polls_before_end=0) as s:
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": s.url}
        again = run_cli(*args, "--max-cost", higher, env=env)
        assert [len(b["requests"]) for b in s.batches.values()] == [150 - done]
    assert "items wait" not in again.stderr and f"skipped {done} (already done), remaining 0" in again.stdout


@pytest.mark.parametrize("command", ["annotate", "generate"])
def test_messages_waiting_on_the_cap_are_named(tmp_path, monkeypatch, capsys, command):
    """Messages requests, four at a time: near the cap fewer go at once, and the bar says why."""
    ws = small_workspace(tmp_path / "ws", 120)
    cap = 5 * (worst(ws, attempts=3, batch=False) if command == "annotate" else worst_answer(ws))
    with StandIn(text_reply=lambda body: "2", delay=0.05) as s:
        api_env(monkeypatch, s.url)
        if command == "annotate":
            summary = Annotate(ws, AnnotateOptions(round=1, annotator=SPEC, concurrency=4, max_cost=cap,
                                                   backoff=0.01)).run()
        else:
            summary = Generate(ws, GenerateOptions(model=SPEC, modes=["full"], seeds=1, concurrency=4, max_cost=cap,
                                                   backoff=0.01)).run()
    err = capsys.readouterr().err
    assert re.search(r"cap=waiting: [0-9.]+ USD reserved by \d requests in flight, [0-9.]+ left", err), err[-2000:]
    assert f"--max-cost {cap:g} USD: requests now wait for room under the cap" in err
    unit = "items" if command == "annotate" else "answers"
    assert f"{summary['remaining']} {unit} left" in summary["stopped"] and summary["remaining"] > 0
    assert "USD of the cap is left" in summary["stopped"]
    assert "lets every request go without waiting on the cap" in summary["stopped"]


def test_ctrl_c_while_the_cap_holds_batches_back_says_where_the_run_stands(tmp_path):
    """Found: Ctrl-C printed only "Aborted!". It now says what the run spent, what is left of the
    cap, how many items are left and that a run of the same command resumes."""
    ws = small_workspace(tmp_path / "ws", 40)
    cap = round(10 * worst(ws, attempts=1, batch=True), 4)
    with StandIn(polls_before_end=10 ** 9) as s:  # the batch never ends: the run polls until stopped
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": s.url}
        proc = subprocess.Popen([sys.executable, "-m", "curate", "annotate", str(ws), "--round", "1",
                                 "--annotator", SPEC, "--batch", "--poll-interval", "0.05", "--max-cost", str(cap)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while not s.batches and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "Traceback" not in err, err[-2000:]
    [line] = [x for x in err.splitlines() if x.startswith("interrupted: ")]
    assert "this run spent 0.0000 USD" in line and f"of its --max-cost {cap:g} USD" in line, line
    assert "40 items left" in line and "are held back by the cap" in line, line
    assert "run the same command again to resume" in line, line


def test_the_audit_names_its_config_key_when_the_cap_stops_it(tmp_path, monkeypatch):
    """In `curate audit` the cap is the annotator's `max_cost` in the config, and the stop says so."""
    import yaml

    from conftest import HELLASWAG
    from curate.audit.run import run_audit
    from curate.audit.config import load_config

    ws = small_workspace(tmp_path / "probe", 1)
    cap = round(2 * worst(ws, attempts=3, batch=False), 4)
    config = tmp_path / "audit.yaml"
    config.write_text(yaml.safe_dump({
        "workspace": str(tmp_path / "ws"), "benchmark": {"adapter": "hellaswag", "path": str(HELLASWAG), "limit": 80},
        "annotators": [{"annotator": SPEC, "rounds": [1], "max_cost": cap}]}))
    with StandIn() as s:
        api_env(monkeypatch, s.url)
        outcomes = run_audit(load_config(config, cwd=tmp_path), echo=lambda line: None)
    stopped = outcomes[-1]
    assert stopped.status == "stopped" and f"annotators[0].max_cost {cap:g} USD reached" in stopped.detail
    assert "run the same command again with a higher annotators[0].max_cost" in stopped.detail
    assert "--max-cost" not in stopped.detail
