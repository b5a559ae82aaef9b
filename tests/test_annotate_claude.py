"""The Anthropic backend through the real anthropic SDK, against llm-katan on 127.0.0.1 (echo
backend with fault injection) and, for what llm-katan lacks (Message Batches, 529, spend-limit
errors, refusals), against the local stand-in server in tests/standin_anthropic.py.

llm-katan's Anthropic provider checks the ``x-api-key`` header while the SDK sends the key as
``Authorization: Bearer``, so runs against it pass ``key_header="x-api-key"``. Its echo backend
answers every tool call with dummy arguments: for round 2 those are a valid answer (option A is
best and worst), for round 1 an empty label list, which the schema rejects -- so round 1 against
llm-katan exercises the re-ask-then-invalid path.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from annotate import claude
from curate.anthropic_api import client as api
from annotate.run import Annotate
from annotate.options import AnnotateOptions
from annotate.store import open_annotations, read_ledger
from annotate_helpers import (KEY, MODEL, api_env, copy_ws, items_of, katan, kill_when_stored, records,
                              small_workspace, twin_workspace)
from conftest import ROOT, run_cli
from standin_anthropic import OverloadedAfterFirst, StandIn

ANNOTATOR = f"anthropic:{MODEL}"
FAST = dict(backoff=0.01, quiet=True)


@pytest.fixture(scope="module")
def base_ws(tmp_path_factory):
    return small_workspace(tmp_path_factory.mktemp("claude") / "ws", 40)


def one_record_each(root, round, n):
    frame = records(root, round=round, annotator=ANNOTATOR)
    assert len(frame) == n and frame.item_id.is_unique and frame.request_key.is_unique
    return frame


def test_katan_faults_every_item_ends_with_one_record(base_ws, tmp_path, monkeypatch):
    """500s (30% of requests) and latency: round 2 all valid, round 1 all invalid with raw kept."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    with katan(tmp_path, "--error-rate", "0.3", "--latency-ms", "20") as url:
        api_env(monkeypatch, url)
        s2 = Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, concurrency=4, limit=30, key_header="x-api-key",
                                          retries=10, **FAST)).run()
        s1 = Annotate(ws, AnnotateOptions(round=1, annotator=ANNOTATOR, concurrency=4, limit=10, key_header="x-api-key",
                                          retries=10, **FAST)).run()
    assert (s2["valid"], s2["failed"], s2["remaining"]) == (30, 0, 0)
    r2 = one_record_each(ws, 2, 30)
    assert set(r2.status) == {"valid"} and all(r["best"] == 0 for r in r2.result)
    assert r2.model_snapshot.eq(MODEL).all() and r2.prompt_version.str.startswith("sha256:").all()
    assert (s1["invalid"], s1["valid"]) == (10, 0)
    r1 = one_record_each(ws, 1, 10)
    assert r1.result.isna().all() and r1.raw.str.contains("minItems|non-empty|should be non-empty|too short").all()
    assert s1["cost"]["replies"] == 30  # first ask + 2 re-asks each, all in the ledger
    assert s2["cost"]["replies"] == 30 and s2["cost"]["usd"] > 0
    # re-running asks nothing for the valid ones and re-asks the invalid ones
    with katan(tmp_path) as url:
        api_env(monkeypatch, url)
        again = Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, limit=30, key_header="x-api-key",
                                             **FAST)).run()
    assert again["skipped"] == 30 and again["cost"]["replies"] == 0


def test_rate_limit_and_timeouts_leave_items_pending_then_resume(base_ws, tmp_path, monkeypatch):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with katan(tmp_path, "--rate-limit-after", "5") as url:  # 429 for every request after the 5th
        api_env(monkeypatch, url)
        s = Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, concurrency=1, limit=12, key_header="x-api-key",
                                         retries=2, **FAST)).run()
    assert (s["valid"], s["failed"], s["remaining"]) == (5, 7, 7)
    assert "RateLimitError" in s["last_error"]
    with katan(tmp_path, "--latency-ms", "3000") as url:  # every request outlasts the client timeout
        api_env(monkeypatch, url)
        s = Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, concurrency=4, limit=12, key_header="x-api-key",
                                         retries=1, timeout=0.5, **FAST)).run()
    assert (s["valid"], s["failed"]) == (0, 7) and "Timeout" in s["last_error"]
    with katan(tmp_path) as url:
        api_env(monkeypatch, url)
        s = Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, limit=12, key_header="x-api-key", **FAST)).run()
    assert (s["valid"], s["skipped"], s["remaining"]) == (7, 5, 0)
    one_record_each(ws, 2, 12)


def test_standin_529_malformed_refusal_and_cache_ledger(base_ws, tmp_path, monkeypatch):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn(statuses=[529, 529, 500, 408], malformed="Roof shingle", refuse="Clean and jerk") as s:
        api_env(monkeypatch, s.url)
        summary = Annotate(ws, AnnotateOptions(round=1, annotator=ANNOTATOR, concurrency=2, limit=20, parse_retries=1,
                                               **FAST)).run()
    frame = one_record_each(ws, 1, 20)
    by_status = frame.status.value_counts().to_dict()
    assert summary["refused"] == by_status.get("refused") >= 1
    assert summary["invalid"] == by_status.get("invalid") >= 1
    assert summary["valid"] + summary["invalid"] + summary["refused"] == 20 and summary["failed"] == 0
    bad = frame[frame.status == "invalid"].iloc[0]
    assert "oops" in bad.raw and bad.cost["replies"] == 2
    # The shared prefix (about 600 tokens) is below Haiku 4.5's minimum cacheable length (4096):
    # no cache mark is sent and the ledger holds no cache tokens (the cache's rules:
    # tests/test_reliability_annotate.py).
    ledger = read_ledger(open_annotations(ws))
    assert ledger.cache_write_tokens.sum() == 0 and ledger.cache_read_tokens.sum() == 0
    assert not any("cache_control" in b["system"][0] for b in s.requests)
    assert summary["cache"]["method"] == "count_tokens" and not summary["cache"]["marked"]


def test_spend_limit_stops_resumably(base_ws, tmp_path, monkeypatch):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn(spend_limit_after=6) as s:
        api_env(monkeypatch, s.url)
        summary = Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, concurrency=2, limit=15, **FAST)).run()
        proc = run_cli("annotate", ws, "--round", "2", "--annotator", ANNOTATOR, "--limit", "15", "--no-progress",
                       check=False, env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": s.url})
    assert summary["valid"] == 6 and "credit balance" in summary["stopped"] and summary["remaining"] == 9
    assert proc.returncode == 2 and "stopped" in proc.stderr and "re-run" in proc.stderr
    with StandIn() as s:
        api_env(monkeypatch, s.url)
        summary = Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, limit=15, **FAST)).run()
        assert len(s.requests) == 9
    assert summary["valid"] == 9
    one_record_each(ws, 2, 15)


def test_max_cost_and_dry_run(base_ws, tmp_path, monkeypatch):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn() as s:
        api_env(monkeypatch, s.url)
        dry = Annotate(ws, AnnotateOptions(round=1, annotator=ANNOTATOR, quiet=True, dry_run=True, limit=20)).run()
        assert s.requests == [] and dry["to_annotate"] == 20 and dry["usd_upper_bound"] > dry["usd_first_answers"] > 0
        # room for one item's worst case and a half: items go out while their worst case fits
        # beside what was spent, so the run ends part-way (tests/test_reliability_annotate.py
        # covers the cap when every reply needs its re-asks)
        params = claude.request_params(MODEL, items_of(ws)[0], 1)
        cap = 1.5 * claude.worst_case_usd(params, api.input_bound(params), attempts=3, batch=False)
        summary = Annotate(ws, AnnotateOptions(round=1, annotator=ANNOTATOR, limit=20, max_cost=cap, concurrency=3,
                                               **FAST)).run()
    assert summary["cost"]["usd"] <= cap and "--max-cost" in summary["stopped"]
    assert f"this run spent {summary['cost']['usd']:.4f} USD" in summary["stopped"]
    assert 0 < summary["valid"] < 20 and summary["remaining"] == 20 - summary["valid"]


def test_auth_error_stops_without_leaking_the_key(base_ws, tmp_path, monkeypatch):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with katan(tmp_path, "--validate-keys", "--api-keys", "anthropic=the-right-key") as url:
        proc = run_cli("annotate", ws, "--round", "2", "--annotator", ANNOTATOR, "--limit", "5",
                       "--key-header", "x-api-key", check=False,
                       env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url})
    assert proc.returncode == 2 and "authentication failed" in proc.stderr
    assert KEY not in proc.stderr + proc.stdout and "[redacted]" in proc.stderr  # llm-katan echoes the key back
    assert records(ws).empty


def test_no_key_in_workspace_logs_or_exports(base_ws, tmp_path, monkeypatch):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with katan(tmp_path) as url:
        proc = run_cli("annotate", ws, "--round", "2", "--annotator", ANNOTATOR, "--limit", "5",
                       "--key-header", "x-api-key", env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url})
    outs = [run_cli("export", ws, "annotations", "--out", tmp_path / f"a.{ext}") for ext in ("jsonl", "csv", "parquet")]
    assert "valid 5" in proc.stdout
    blobs = [proc.stdout, proc.stderr, *(o.stdout + o.stderr for o in outs)]
    files = [p for p in ws.rglob("*") if p.is_file()] + list(tmp_path.glob("a.*"))
    assert any(f.name.endswith("-wal") or f.name == "workspace.db" for f in files)
    for f in files:
        blobs.append(f.read_bytes().decode("latin-1"))
    assert not any(KEY in b for b in blobs)


def test_batches_resubmit_only_failed_requests(base_ws, tmp_path, monkeypatch):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn(batch_faults={0: "errored", 3: "expired"}, polls_before_end=2) as s:
        api_env(monkeypatch, s.url)
        summary = Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, batch=True, limit=12, poll_interval=0.01,
                                               **FAST)).run()
    sizes = [len(b["requests"]) for b in s.batches.values()]
    assert sizes == [12, 2] and summary["valid"] == 12
    ids = [r["custom_id"] for b in s.batches.values() for r in b["requests"]]
    assert len(set(ids)) == len(ids)
    frame = one_record_each(ws, 2, 12)
    assert all(c["batch"] for c in frame.cost)
    ledger = read_ledger(open_annotations(ws))
    assert len(ledger) == 12 and ledger.batch.all()


def test_killed_batch_run_polls_the_same_batch(base_ws, tmp_path):
    """A run killed while its batch is processing resumes by polling that batch, not submitting anew."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn(polls_before_end=10**6) as s:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": s.url}
        proc = subprocess.Popen([sys.executable, "-m", "curate", "annotate", str(ws), "--round", "1", "--annotator",
                                 ANNOTATOR, "--batch", "--limit", "10", "--poll-interval", "0.05", "--no-progress"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while not s.batches or next(iter(s.batches.values()))["polls"] < 2:
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        s.polls_before_end = 0
        run_cli("annotate", ws, "--round", "1", "--annotator", ANNOTATOR, "--batch", "--limit", "10",
                "--poll-interval", "0.05", "--no-progress", env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": s.url})
        assert len(s.batches) == 1
    one_record_each(ws, 1, 10)


def test_killed_run_resumes_without_duplicates(base_ws, tmp_path):
    """kill -9 a real CLI run mid-way; the re-run asks only for the items without a record."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    with katan(tmp_path, "--latency-ms", "150") as url:
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url}
        args = ["annotate", ws, "--round", "2", "--annotator", ANNOTATOR, "--limit", "40", "--concurrency", "2",
                "--key-header", "x-api-key", "--no-progress"]
        kill_when_stored(args, ws / "workspace.db", "annotations", 6, env=env)
        first = records(ws, round=2)
        assert 6 <= len(first) < 40
        run_cli(*args, env=env)
    frame = one_record_each(ws, 2, 40)
    ledger = read_ledger(open_annotations(ws))
    second_run = ledger[ledger.run_id != first.run_id.iloc[0]]
    assert set(second_run.item_id).isdisjoint(first.item_id)
    assert set(second_run.item_id) | set(first.item_id) == set(frame.item_id)


# --- items of identical content (MMLU test has 27 such pairs) --------------------------------

@pytest.mark.parametrize("batch", [False, True], ids=["messages", "batches"])
def test_items_of_identical_content_get_a_record_each(tmp_path, monkeypatch, batch):
    ws = twin_workspace(tmp_path / "ws")
    ids = [it["item_id"] for it in items_of(ws)]
    with StandIn() as s:
        api_env(monkeypatch, s.url)
        first = Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, batch=batch, poll_interval=0.01,
                                             **FAST)).run()
        again = Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, batch=batch, poll_interval=0.01,
                                             **FAST)).run()
        sent = [r["custom_id"] for b in s.batches.values() for r in b["requests"]] if batch else s.requests
    assert (first["valid"], first["remaining"], first["stopped"]) == (3, 0, None) and len(sent) == 3
    assert (again["skipped"], again["remaining"], again["cost"]["replies"]) == (3, 0, 0)
    frame = records(ws, round=2, annotator=ANNOTATOR)
    assert sorted(frame.item_id) == sorted(ids) and set(frame.status) == {"valid"}
    assert frame.request_key.nunique() == 2  # the stored keys are the content's, as before
    ledger = read_ledger(open_annotations(ws))
    assert sorted(ledger.item_id) == sorted(ids)


def test_migration_keeps_the_records_of_an_older_workspace(tmp_path, monkeypatch):
    """A workspace made before annotations-005 (request_key UNIQUE) keeps its records and keys:
    only the twin it could not hold is asked."""
    import sqlite3

    from annotate.store import MIGRATIONS
    from curate.items.store import Workspace

    done = twin_workspace(tmp_path / "done")
    with StandIn() as s:
        api_env(monkeypatch, s.url)
        Annotate(done, AnnotateOptions(round=2, annotator=ANNOTATOR, **FAST)).run()
    old = twin_workspace(tmp_path / "old")
    with Workspace.open(old) as w:
        w.migrate(MIGRATIONS[:4])
    ids = [it["item_id"] for it in items_of(old)]
    with sqlite3.connect(old / "workspace.db") as conn:  # what the older release had stored
        conn.execute("ATTACH ? AS done", (str(done / "workspace.db"),))
        conn.execute("INSERT INTO annotation_runs SELECT * FROM done.annotation_runs")
        conn.execute("INSERT INTO annotations SELECT * FROM done.annotations WHERE item_id IN (?, ?)", ids[:2])
        kept = conn.execute("SELECT * FROM annotations ORDER BY item_id").fetchall()
    with StandIn() as s:
        api_env(monkeypatch, s.url)
        summary = Annotate(old, AnnotateOptions(round=2, annotator=ANNOTATOR, **FAST)).run()
        assert len(s.requests) == 1 and summary["skipped"] == 2 and summary["valid"] == 1
    with sqlite3.connect(old / "workspace.db") as conn:
        assert conn.execute("SELECT * FROM annotations WHERE item_id IN (?, ?) ORDER BY item_id",
                            ids[:2]).fetchall() == kept
        assert conn.execute("SELECT count(*) FROM migrations WHERE name = 'annotations-005-key-per-item'").fetchone()
    assert sorted(records(old, round=2).item_id) == sorted(ids)


# --- billed replies --------------------------------------------------------------------------

@pytest.mark.parametrize("server", [lambda: StandIn(malformed="Roof shingle", spend_limit_after=1),
                                    lambda: OverloadedAfterFirst(malformed="Roof shingle")],
                         ids=["stop", "gave-up"])
def test_a_billed_reply_is_ledgered_when_its_re_ask_fails(base_ws, tmp_path, monkeypatch, server):
    """Item 1's first reply is unreadable and paid; its re-ask fails (spend limit, or 529s). The
    paid reply is in the ledger and counts against --max-cost: item 2, whose worst case would
    fit only if that reply were free, is not sent."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    first, second = items_of(ws)[:2]
    worst = max(claude.worst_case_usd(p, api.input_bound(p), attempts=2, batch=False)
                for p in (claude.request_params(MODEL, it, 1) for it in (first, second)))
    with server() as s:
        api_env(monkeypatch, s.url)
        summary = Annotate(ws, AnnotateOptions(round=1, annotator=ANNOTATOR, limit=2, concurrency=1, parse_retries=1,
                                               retries=1, max_cost=worst + 1e-6, **FAST)).run()
        asked = [b["messages"][0]["content"] for b in s.requests]
        assert len(asked) >= 2 and all("Roof shingle" in a for a in asked)  # item 1 and its re-ask only
    ledger = read_ledger(open_annotations(ws))
    assert list(ledger.item_id) == [first["item_id"]] and ledger.usd.iloc[0] > 1e-6
    assert summary["cost"]["replies"] == 1 and summary["cost"]["usd"] == pytest.approx(ledger.usd.sum())
    assert summary["stopped"] and summary["remaining"] == 2 and records(ws, round=1).empty


def test_resumed_batch_skips_the_results_already_stored(base_ws, tmp_path, monkeypatch):
    """A run killed after storing some results of a batch and before closing it: the resumed run
    polls that batch, stores only the results not yet stored, and bills nothing twice."""
    import sqlite3

    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn() as s:
        api_env(monkeypatch, s.url)
        Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, batch=True, limit=6, poll_interval=0.01,
                                     **FAST)).run()
        before = read_ledger(open_annotations(ws))
        lost = list(before.item_id[:2])  # the kill came before these two results were stored
        with sqlite3.connect(ws / "workspace.db") as conn:
            conn.execute("UPDATE annotation_batches SET status = 'submitted'")
            for table in ("annotations", "annotation_ledger"):
                conn.execute(f"DELETE FROM {table} WHERE item_id IN (?, ?)", lost)
            conn.execute("UPDATE annotation_batch_requests SET saved_at = NULL WHERE item_id IN (?, ?)", lost)
        summary = Annotate(ws, AnnotateOptions(round=2, annotator=ANNOTATOR, batch=True, limit=6, poll_interval=0.01,
                                               **FAST)).run()
        assert len(s.batches) == 1
    assert (summary["valid"], summary["skipped"], summary["remaining"]) == (2, 4, 0)
    after = read_ledger(open_annotations(ws))
    assert sorted(after.item_id) == sorted(before.item_id) and summary["cost"]["replies"] == 2
    one_record_each(ws, 2, 6)
    with open_annotations(ws) as w:
        assert [r[0] for r in w.conn.execute("SELECT DISTINCT status FROM annotation_batches")] == ["processed"]


def test_the_key_header_setting_given_with_o_reaches_the_server(base_ws, tmp_path):
    """`-o key-header x-api-key` (a documented Claude setting) used to end in an AttributeError
    (a str-typed setting had no click type to convert it); llm-katan checks the key in x-api-key."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    with katan(tmp_path, "--validate-keys", "--api-keys", f"anthropic={KEY}") as url:
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url}
        proc = run_cli("annotate", ws, "--round", "2", "--annotator", ANNOTATOR, "--limit", "3",
                       "-o", "key-header", "x-api-key", "--quiet", env=env)
        gen = run_cli("generate", ws, "--model", ANNOTATOR, "--seeds", "1", "--limit", "2", "--modes", "full",
                      "-o", "key-header", "x-api-key", "--quiet", env=env)
    assert "valid 3" in proc.stdout and "Traceback" not in proc.stderr + gen.stderr
    assert " 2 answers generated " in gen.stdout and "failed 0" in gen.stdout, gen.stdout
