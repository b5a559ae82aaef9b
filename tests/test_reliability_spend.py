"""What ``--max-cost`` and the cost ledger promise when the client cannot see every reply:
requests that outlast ``--timeout``, a process killed (``kill -9``) with requests in flight, a
workspace that cannot be written (a full disk), and a dry run against an endpoint that
under-counts tokens. ``curate annotate`` and ``curate generate`` share this machinery
(``curate/anthropic_api/spend.py``); each case runs both.

Server: tests/standin_anthropic.py on 127.0.0.1. It counts a request as billed (``billed``) as
soon as it has made the reply, before any ``delay``, as the API bills a request it completes
whether or not the client still waits for the answer.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from curate.anthropic_api import prices
from annotate.run import Annotate
from annotate.options import AnnotateOptions
from annotate.store import open_annotations
from annotate_helpers import KEY, MODEL, api_env, copy_ws, items_of, small_workspace
from conftest import ROOT, one_line_error, run_cli
from generate.claude import request_params, worst_case_usd
from generate.prompts import load_template, render, shuffle_order
from generate.run import Generate
from generate.options import GenerateOptions
from generate.store import open_generations
from standin_anthropic import StandIn
from test_reliability_workspace import limited

SPEC = f"anthropic:{MODEL}"
FAST = dict(backoff=0.01, quiet=True)
TABLE = {"annotate": "annotation_ledger", "generate": "generation_ledger"}
COMMANDS = ["annotate", "generate"]


@pytest.fixture(scope="module")
def base_ws(tmp_path_factory):
    return small_workspace(tmp_path_factory.mktemp("spend") / "ws", 12)


def run(command: str, ws, **kw) -> dict:
    if command == "annotate":
        return Annotate(ws, AnnotateOptions(round=2, annotator=SPEC, **kw)).run()
    return Generate(ws, GenerateOptions(model=SPEC, modes=["full"], seeds=1, **kw)).run()


def cli_args(command: str, ws) -> list:
    if command == "annotate":
        return ["annotate", ws, "--round", "2", "--annotator", SPEC, "--no-progress"]
    return ["generate", ws, "--model", SPEC, "--modes", "full", "--seeds", "1", "--quiet"]


def ledger(ws, command: str) -> pd.DataFrame:
    opener = open_annotations if command == "annotate" else open_generations
    with opener(ws) as w:
        return pd.read_sql_query(f"SELECT * FROM {TABLE[command]} ORDER BY rowid", w.conn)


def server_billed(s: StandIn) -> float:
    """What the server's completed requests cost at the toolkit's own prices."""
    return sum(prices.usd(MODEL, input_tokens=u["input_tokens"], output_tokens=u["output_tokens"]) for u in s.billed)


# --- requests the client gave up on ----------------------------------------------------------

@pytest.mark.parametrize("command, cap", [("annotate", 0.04), ("generate", 0.01)])
def test_requests_given_up_on_count_against_max_cost(base_ws, tmp_path, monkeypatch, command, cap):
    """Every reply comes after --timeout: the server completes (bills) each request, the client
    gives up on it and retries. Found: 16 requests worth 0.075 USD completed under a 0.04 cap
    while the ledger held nothing. Each request given up on stays in the ledger as 'abandoned'
    at the most it could cost and keeps that much of the cap, so retries stop at the cap."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn(delay=1.0) as s:
        api_env(monkeypatch, s.url)
        summary = run(command, ws, max_cost=cap, timeout=0.3, retries=3, concurrency=4, **FAST)
        billed, completed = server_billed(s), len(s.billed)
    rows = ledger(ws, command)
    assert completed > 0 and billed <= rows.usd.sum() <= cap, (completed, billed, rows.usd.sum())
    given_up = rows[rows.state == "abandoned"]
    assert len(given_up) == len(rows) >= completed
    assert summary["cost"]["possibly_billed"] == len(given_up) and summary["cost"]["replies"] == 0
    assert summary["cost"]["possibly_billed_usd"] == pytest.approx(given_up.usd.sum())
    assert f"--max-cost {cap:g} USD reached" in summary["stopped"] and "given up on" in summary["stopped"]
    print(f"\n{command}: {completed} requests completed by the server, {billed:.4f} USD at the toolkit's prices; "
          f"ledger: {len(given_up)} abandoned, {given_up.usd.sum():.4f} USD possibly billed, cap {cap}")


# --- kill -9 with requests in flight ----------------------------------------------------------

def start(command: str, ws, url: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url}
    args = [*cli_args(command, ws), "--limit", "6", "--concurrency", "3"]
    return subprocess.Popen([sys.executable, "-m", "curate", *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("command", COMMANDS)
def test_requests_in_flight_at_kill_9_stay_in_the_ledger(base_ws, tmp_path, command):
    """The server has completed three requests and holds their replies back; the run is killed.
    Found: the ledger missed every reply still in flight (12 billed, 10 recorded). Each request
    is in the ledger before it is sent, so all three are there, 'in_flight' at the most they can
    cost; the next run marks them 'abandoned' and says so."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn(delay=120.0) as s:
        proc = start(command, ws, s.url)
        deadline = time.time() + 120
        while len(s.billed) < 3:
            assert time.time() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        billed = server_billed(s)
        rows = ledger(ws, command)
        assert len(rows) == 3 and rows.usd.sum() >= billed > 0, (len(rows), billed)
        assert list(rows.state) == ["in_flight"] * 3
        s.delay = 0.0
        again = run_cli(*cli_args(command, ws), "--limit", "6", env={"ANTHROPIC_API_KEY": KEY,
                                                                         "ANTHROPIC_BASE_URL": s.url})
    assert "note: 3 requests of an earlier run were still in flight when it ended" in again.stderr
    after = ledger(ws, command)
    first = after[after.run_id == rows.run_id.iloc[0]]
    assert list(first.state) == ["abandoned"] * 3 and first.usd.sum() == pytest.approx(rows.usd.sum())
    assert set(after[after.run_id != rows.run_id.iloc[0]].state) == {"billed"}


# --- a workspace that cannot be written ------------------------------------------------------

@pytest.mark.parametrize("command", COMMANDS)
def test_a_full_disk_leaves_every_request_sent_in_the_ledger(base_ws, tmp_path, command):
    """The workspace's write-ahead log may grow 120 KiB (RLIMIT_FSIZE: writes fail as on a full
    disk) while replies take 0.5 s. Found: 4 requests billed, 2 in the ledger, and an error line
    that did not mention them. Every request sent has its ledger row, and the one line says how
    many may have been billed without their replies recorded, matching the rows left in flight."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    (open_annotations if command == "annotate" else open_generations)(ws).close()  # tables made, WAL gone
    with StandIn(delay=0.5) as s:
        proc = run_cli(*cli_args(command, ws), "--limit", "12", "--concurrency", "3", check=False,
                       env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": s.url}, preexec_fn=limited(120 * 1024))
        time.sleep(0.6)  # replies still held back are counted already; let the last ones finish
        billed, completed = server_billed(s), len(s.billed)
    line = one_line_error(proc, "the run stopped sending")
    rows = ledger(ws, command)
    left = rows[rows.state == "in_flight"]
    assert completed > 0 and len(rows) >= completed and rows.usd.sum() >= billed
    # which write finds the disk full first (a reply's ledger row, or a record) varies
    assert (f"; {len(left)} requests sent before it may have been billed without their replies being recorded (up "
            f"to {left.usd.sum():.4f} USD" if len(left) else "; every request sent before it is settled") in line
    print(f"\n{command}: {completed} requests completed ({billed:.5f} USD); ledger {len(rows)} rows: "
          f"{(rows.state == 'billed').sum()} billed, {len(left)} in flight ({rows.usd.sum():.5f} USD); {line}")


# --- the dry run's ceiling -------------------------------------------------------------------

def test_dry_run_ceiling_holds_against_an_endpoint_that_under_counts(base_ws, tmp_path, monkeypatch):
    """count_tokens answers a tenth of the true count: the dry run's ceilings stay at least those
    of the byte bound (what --max-cost reserves), whatever the endpoint says."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    ceilings = {}
    for name, server in (("under", StandIn(count_under=10)), ("bound", StandIn(count_tokens=False))):
        with server as s:
            api_env(monkeypatch, s.url)
            ceilings[name] = Annotate(ws, AnnotateOptions(round=2, annotator=SPEC, dry_run=True, **FAST)).run()
    under, bound = ceilings["under"], ceilings["bound"]
    assert under["input_tokens_method"] == "count_tokens" and bound["input_tokens_method"] == "bound"
    assert under["usd_first_answers"] >= bound["usd_first_answers"] > 0
    assert under["usd_upper_bound"] >= bound["usd_upper_bound"] > 0
    assert under["input_tokens"] * 4 < bound["input_tokens"] == under["input_tokens_bound"]


# --- generate's stop message ------------------------------------------------------------------

def test_generate_stop_message_gives_the_runs_spend(base_ws, tmp_path, monkeypatch):
    """Found: "--max-cost ... reached (spent 0.0000 USD)" under a cost line of 0.0069 USD: the
    message was made when a unit did not fit, before the replies in flight were paid for. It now
    comes from the ledger once the run has ended, as annotate's does."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    item = items_of(ws)[0]
    order = shuffle_order(item["content_hash"], 0, len(item["options"]))
    instructions, user = render(load_template("numbered"), item["prompts"]["full"], item["options"], order)
    cap = 2.5 * worst_case_usd(request_params(MODEL, instructions, user, max_new_tokens=8), len(order), 0)
    with StandIn(text_reply=lambda body: "2") as s:
        api_env(monkeypatch, s.url)
        summary = Generate(ws, GenerateOptions(model=SPEC, modes=["full"], seeds=3, concurrency=4, max_cost=cap,
                                               **FAST)).run()
    spent = summary["cost"]["usd"]
    assert 0 < spent <= cap and summary["remaining"] > 0
    assert f"--max-cost {cap:g} USD reached" in summary["stopped"]
    assert f"this run spent {spent:.4f} USD" in summary["stopped"]
