"""Generation with Claude through the real anthropic SDK, against llm-katan on 127.0.0.1 (echo
backend with fault injection) and, for what llm-katan cannot produce, the local stand-in of
tests/standin_anthropic.py.

llm-katan's echo backend answers every request with a line of request metadata followed by the
user's message, which holds all numbered options: a reply naming no single option, so every
record it yields is 'unparsed' -- which is what the fault and --max-cost tests need (every reply
stored and counted; re-asks happen). Replies that name an option ("3", "The answer is 3."),
refusals and 529 overload errors are beyond llm-katan, so those tests use the stand-in.
"""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from annotate_helpers import KEY, MODEL, api_env, copy_ws, katan, small_workspace, twin_workspace
from conftest import run_cli
from curate.analyses import generation as G
from generate.claude import request_params, worst_case_usd
from generate.prompts import load_template, render, shuffle_order
from generate.run import Generate
from generate.options import GenerateOptions
from generate.store import open_generations, read_generations
from standin_anthropic import OverloadedAfterFirst, StandIn

SPEC = f"anthropic:{MODEL}"
FAST = dict(backoff=0.01, quiet=True)


@pytest.fixture(scope="module")
def base_ws(tmp_path_factory):
    return small_workspace(tmp_path_factory.mktemp("gen-claude") / "ws", 20)


def stored(root) -> pd.DataFrame:
    with open_generations(root) as ws:
        return read_generations(ws)


def ledger(root) -> pd.DataFrame:
    with open_generations(root) as ws:
        return pd.read_sql_query("SELECT * FROM generation_ledger", ws.conn)


def one_record_per_unit(frame: pd.DataFrame, n: int) -> None:
    assert len(frame) == n
    assert not frame.duplicated(["item_id", "mode", "seed"]).any() and frame["request_key"].is_unique


def test_katan_faults_every_item_and_seed_ends_with_one_record(base_ws, tmp_path, monkeypatch):
    """500s on 30% of requests and latency; one re-ask per unreadable reply; all in the ledger."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    with katan(tmp_path, "--error-rate", "0.3", "--latency-ms", "20") as url:
        api_env(monkeypatch, url)
        s = Generate(ws, GenerateOptions(model=SPEC, modes=["full", "zero"], seeds=2, limit=10, key_header="x-api-key",
                                         retries=10, parse_retries=1, concurrency=4, **FAST)).run()
    assert (s["unparsed"], s["failed"], s["remaining"], s["stopped"]) == (40, 0, 0, None)
    frame = stored(ws)
    one_record_per_unit(frame, 40)
    assert frame["status"].eq("unparsed").all() and frame["pred"].isna().all() and frame["correct"].isna().all()
    assert frame["raw"].str.contains(r"\[echo\]").all() and frame["attempts"].eq(2).all()
    assert frame["detail"].str.contains("several allowed numbers|about equally").all()
    spent = ledger(ws)
    assert len(spent) == 80 and spent["usd"].gt(0).all() and s["cost"]["replies"] == 80
    # the echo shows what was sent: the options in the stored order, then the reminder turn
    first = frame.iloc[0]
    with open_generations(ws) as conn_ws:
        replies = json.loads(conn_ws.conn.execute("SELECT replies_json FROM generations WHERE request_key = ?",
                                                  (first["request_key"],)).fetchone()[0])
        item = next(it for it in conn_ws.items() if it["item_id"] == first["item_id"])
    assert "max_tokens=8" in replies[0] and "messages=2 " in replies[0] and "messages=4 " in replies[1]
    shown = [item["options"][j] for j in first["order"]]
    assert "\n".join(f"{p}. {o}" for p, o in enumerate(shown, 1)) in replies[0]
    assert "Please reply with the number of the best option only: 1, 2, 3 or 4." in replies[1]
    with katan(tmp_path) as url:  # a second run asks nothing
        api_env(monkeypatch, url)
        again = Generate(ws, GenerateOptions(model=SPEC, modes=["full", "zero"], seeds=2, limit=10,
                                             key_header="x-api-key", parse_retries=1, **FAST)).run()
    assert (again["cached"], again["computed"], again["cost"]["replies"]) == (40, 0, 0)


def test_max_cost_holds_counting_re_asks_then_resumes(base_ws, tmp_path, monkeypatch):
    ws = copy_ws(base_ws, tmp_path / "ws")
    item = open_generations(ws).items()[0]
    order = shuffle_order(item["content_hash"], 0, 4)
    instructions, user = render(load_template("numbered"), item["prompts"]["full"], item["options"], order)
    worst = worst_case_usd(request_params(MODEL, instructions, user, max_new_tokens=8), 4, 2)
    cap = 4.5 * worst
    with katan(tmp_path) as url:
        api_env(monkeypatch, url)
        s = Generate(ws, GenerateOptions(model=SPEC, modes=["full"], seeds=3, limit=10, key_header="x-api-key",
                                         parse_retries=2, concurrency=3, max_cost=cap, **FAST)).run()
        spent = ledger(ws)
        assert "--max-cost" in s["stopped"] and 0 < s["computed"] < 30 and s["remaining"] == 30 - s["computed"]
        assert spent["usd"].sum() <= cap and len(spent) == 3 * s["computed"]  # every reply re-asked twice
        proc = run_cli("generate", ws, "--model", SPEC, "--modes", "full", "--seeds", "3", "--limit", "10",
                       "--key-header", "x-api-key", "--parse-retries", "2", "--max-cost", str(cap), "--quiet",
                       check=False, env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url})
        assert proc.returncode == 2 and "--max-cost" in proc.stderr and "re-run" in proc.stderr
        done = len(stored(ws))
        rest = Generate(ws, GenerateOptions(model=SPEC, modes=["full"], seeds=3, limit=10, key_header="x-api-key",
                                            parse_retries=2, **FAST)).run()
    assert rest["computed"] == 30 - done and rest["remaining"] == 0
    one_record_per_unit(stored(ws), 30)


def test_rate_limit_leaves_units_pending_then_resume(base_ws, tmp_path, monkeypatch):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with katan(tmp_path, "--rate-limit-after", "6") as url:  # 429 for every request after the 6th
        api_env(monkeypatch, url)
        s = Generate(ws, GenerateOptions(model=SPEC, modes=["zero"], seeds=2, limit=6, key_header="x-api-key",
                                         retries=1, concurrency=1, **FAST)).run()
    assert (s["computed"], s["failed"], s["remaining"]) == (6, 6, 6) and "RateLimitError" in s["last_error"]
    with katan(tmp_path) as url:
        api_env(monkeypatch, url)
        s = Generate(ws, GenerateOptions(model=SPEC, modes=["zero"], seeds=2, limit=6, key_header="x-api-key",
                                         **FAST)).run()
    assert (s["computed"], s["cached"], s["remaining"]) == (6, 6, 0)
    one_record_per_unit(stored(ws), 12)


def scripted(body: dict) -> str | None:
    """The stand-in's answers: by item text, a strict number, a number in a sentence, an
    unreadable reply or a refusal; the shown position of 'roof' endings otherwise."""
    text = body["messages"][0]["content"]
    lines = [line for line in text.splitlines() if re.match(r"\d+\. ", line)]
    if "Roof shingle" in text:
        return "3"
    if "Clean and jerk" in text:
        return "The answer is 3."
    if "Canoeing" in text:
        return None
    if len(body["messages"]) > 1:
        return "2"
    return "I would rather not say." if len(lines) % 2 == 0 else "1"


def test_strict_lenient_unparsed_refusal_and_529_through_the_pipeline(base_ws, tmp_path, monkeypatch):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn(statuses=[529, 529, 503], text_reply=scripted) as server:
        api_env(monkeypatch, server.url)
        s = Generate(ws, GenerateOptions(model=SPEC, modes=["full"], seeds=2, limit=8, concurrency=2, **FAST)).run()
    frame = stored(ws).set_index(["item_id", "seed"])
    one_record_per_unit(frame.reset_index(), 16)
    assert s["failed"] == 0 and s["strict"] + s["lenient"] + s["unparsed"] == 16
    items = {it["item_id"]: it for it in open_generations(ws).items()}
    for (item_id, seed), r in frame.iterrows():
        label = items[item_id]["context_parts"]["activity_label"]
        if label == "Roof shingle removal":
            assert (r["status"], r["method"], r["shown"], r["raw"]) == ("strict", "number", 3, "3")
        elif label == "Clean and jerk":
            assert (r["status"], r["method"], r["shown"]) == ("lenient", "number-in-text", 3)
        elif label == "Canoeing":
            assert r["status"] == "unparsed" and r["detail"] == "the model refused" and r["finish"] == "refusal"
        else:
            assert r["status"] == "unparsed" and r["raw"] == "I would rather not say."
        if r["status"] != "unparsed":  # the answer maps back through the stored order
            assert r["pred"] == r["order"][r["shown"] - 1] and r["correct"] == (r["pred"] == r["gold"])
        else:
            assert pd.isna(r["pred"]) and pd.isna(r["correct"])
    sent = [b for b in server.requests if "tools" not in b]
    assert all("top_p" not in b and "temperature" not in b and b["max_tokens"] == 8 for b in sent)
    assert set(frame["settings"]) == {"t=default,p=default,n=8"}
    # unparsed replies are counted and reported, never scored as right or wrong
    acc = G.seed_accuracy(stored(ws)).set_index("seed")
    frame = frame.reset_index()
    for seed, row in acc.iterrows():
        g = frame[frame["seed"] == seed]
        parsed = g[g["status"] != "unparsed"]
        assert row["unparsed"] == len(g) - len(parsed) > 0
        assert row["accuracy_parsed"] == pytest.approx((parsed["pred"] == parsed["gold"]).mean())
        assert row["accuracy"] == pytest.approx((parsed["pred"] == parsed["gold"]).sum() / len(g))


def test_auth_error_stops_without_leaking_the_key(base_ws, tmp_path):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with katan(tmp_path, "--validate-keys", "--api-keys", "anthropic=the-right-key") as url:
        proc = run_cli("generate", ws, "--model", SPEC, "--seeds", "1", "--limit", "3", "--key-header", "x-api-key",
                       "--quiet", check=False, env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url})
    assert proc.returncode == 2 and "authentication failed" in proc.stderr
    assert KEY not in proc.stderr + proc.stdout
    assert stored(ws).empty
    for f in ws.rglob("*"):
        if f.is_file():
            assert KEY not in f.read_bytes().decode("latin-1")


def test_a_thinking_model_is_refused_before_anything_is_asked(base_ws, tmp_path):
    """Generation's reply budget (--max-new-tokens) would go to thinking first: refused by name."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn() as s:
        proc = run_cli("generate", ws, "--model", "anthropic:claude-opus-5", "--seeds", "1", "--limit", "3", "--quiet",
                       check=False, env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": s.url})
        assert s.requests == []
    assert proc.returncode == 2 and "model 'claude-opus-5' is not supported: it thinks by default" in proc.stderr
    assert stored(ws).empty


def test_an_echoed_key_and_url_credentials_reach_no_file(base_ws, tmp_path):
    """The endpoint echoes the key it received into every reply's text and model name, and the
    base URL carries user:password: the stored replies, run record and ledger hold neither."""
    import base64

    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn(echo_key=True, text_reply=lambda body: "2") as s:
        url = s.url.replace("http://", "http://alice:pa55-w0rd-secret@")
        proc = run_cli("generate", ws, "--model", SPEC, "--seeds", "1", "--limit", "3", "--parse-retries", "1",
                       "--quiet", env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url})
    written = "\n".join([proc.stdout, proc.stderr] + [f.read_bytes().decode("latin-1") for f in ws.rglob("*")
                                                      if f.is_file()])
    for secret in (KEY, "pa55-w0rd-secret", base64.b64encode(b"alice:pa55-w0rd-secret").decode()):
        assert secret not in written
    raw = stored(ws)["raw"]
    assert len(raw) == 6 and all("request made with key" in r and "[redacted]" in r for r in raw)  # 3 x full, zero


# --- items of identical content -----------------------------------------------------------

def test_items_of_identical_content_get_a_record_each(tmp_path, monkeypatch):

    ws = twin_workspace(tmp_path / "ws")
    with StandIn(text_reply=lambda body: "2") as s:
        api_env(monkeypatch, s.url)
        first = Generate(ws, GenerateOptions(model=SPEC, modes=["full"], seeds=2, **FAST)).run()
        again = Generate(ws, GenerateOptions(model=SPEC, modes=["full"], seeds=2, **FAST)).run()
        assert len(s.requests) == 6
    assert (first["computed"], first["remaining"], again["computed"], again["cached"]) == (6, 0, 0, 6)
    frame = stored(ws)
    assert len(frame) == 6 and not frame.duplicated(["item_id", "mode", "seed"]).any()
    assert frame["request_key"].nunique() == 4 and len(ledger(ws)) == 6


def test_migration_keeps_the_generations_of_an_older_workspace(tmp_path, monkeypatch):
    """A workspace made before generations-002 (request_key UNIQUE) keeps its records: only the
    twin it could not hold is asked."""
    import sqlite3

    from curate.items.store import Workspace
    from generate.store import MIGRATIONS

    done = twin_workspace(tmp_path / "done")
    with StandIn(text_reply=lambda body: "2") as s:
        api_env(monkeypatch, s.url)
        Generate(done, GenerateOptions(model=SPEC, modes=["full"], seeds=1, **FAST)).run()
    old = twin_workspace(tmp_path / "old")
    with Workspace.open(old) as w:
        w.migrate(MIGRATIONS[:1])
        ids = [it["item_id"] for it in w.items()]
    with sqlite3.connect(old / "workspace.db") as conn:  # what the older release had stored
        conn.execute("ATTACH ? AS done", (str(done / "workspace.db"),))
        conn.execute("INSERT INTO generation_runs SELECT * FROM done.generation_runs")
        conn.execute("INSERT INTO generations SELECT * FROM done.generations WHERE item_id IN (?, ?)", ids[:2])
        kept = conn.execute("SELECT * FROM generations ORDER BY item_id").fetchall()
    with StandIn(text_reply=lambda body: "2") as s:
        api_env(monkeypatch, s.url)
        summary = Generate(old, GenerateOptions(model=SPEC, modes=["full"], seeds=1, **FAST)).run()
        assert len(s.requests) == 1 and (summary["cached"], summary["computed"]) == (2, 1)
    with sqlite3.connect(old / "workspace.db") as conn:
        assert conn.execute("SELECT * FROM generations WHERE item_id IN (?, ?) ORDER BY item_id",
                            ids[:2]).fetchall() == kept
    assert sorted(stored(old)["item_id"]) == sorted(ids)


# --- billed replies, refusals, endpoints that are not the API ---------------------------------

def unit_worst_case(ws, seeds, parse_retries) -> float:
    item = open_generations(ws).items()[0]
    worst = []
    for seed in seeds:
        order = shuffle_order(item["content_hash"], seed, len(item["options"]))
        instructions, user = render(load_template("numbered"), item["prompts"]["full"], item["options"], order)
        worst.append(worst_case_usd(request_params(MODEL, instructions, user, max_new_tokens=8), 4, parse_retries))
    return max(worst)


@pytest.mark.parametrize("server", [lambda: StandIn(text_reply=lambda body: "hmm", spend_limit_after=1),
                                    lambda: OverloadedAfterFirst(text_reply=lambda body: "hmm")],
                         ids=["stop", "gave-up"])
def test_a_billed_reply_is_ledgered_when_its_re_ask_fails(base_ws, tmp_path, monkeypatch, server):
    """The first reply names no option and is paid; its re-ask fails. The paid reply is in the
    ledger and counts against --max-cost: the next unit would fit only if it were free."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    cap = unit_worst_case(ws, [0, 1], 1) + 1e-9
    with server() as s:
        api_env(monkeypatch, s.url)
        summary = Generate(ws, GenerateOptions(model=SPEC, modes=["full"], seeds=2, limit=1, parse_retries=1, retries=1,
                                               concurrency=1, max_cost=cap, **FAST)).run()
        assert len({json.dumps(b["messages"][0]) for b in s.requests}) == 1  # the second unit was not sent
    spent = ledger(ws)
    assert len(spent) == 1 and spent["usd"].iloc[0] > 0 and summary["cost"]["replies"] == 1
    assert summary["stopped"] and summary["remaining"] == 2 and stored(ws).empty


class RefusesAfterText(StandIn):
    """Every reply starts with the text '2' and then stops with stop_reason 'refusal'."""

    def message(self, body, key=""):
        return {**super().message(body, key), "content": [{"type": "text", "text": "2"}], "stop_reason": "refusal"}


def test_a_refusal_with_partial_text_is_unparsed(base_ws, tmp_path, monkeypatch):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with RefusesAfterText() as s:
        api_env(monkeypatch, s.url)
        summary = Generate(ws, GenerateOptions(model=SPEC, modes=["full"], seeds=1, limit=3, parse_retries=1,
                                               **FAST)).run()
        assert len(s.requests) == 3  # a refusal is final: no re-ask
    frame = stored(ws)
    assert summary["unparsed"] == 3 and frame["status"].eq("unparsed").all() and frame["pred"].isna().all()
    assert frame["detail"].eq("the model refused").all() and frame["raw"].eq("2").all()


@pytest.mark.parametrize("body", ["html", "broken-json", "other-json"])
def test_endpoint_answering_200_with_something_else(base_ws, tmp_path, body):
    ws = copy_ws(base_ws, tmp_path / "ws")
    with StandIn(body=body) as s:
        proc = run_cli("generate", ws, "--model", SPEC, "--seeds", "1", "--limit", "3", "--quiet", check=False,
                       env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": s.url})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    assert "check ANTHROPIC_BASE_URL" in lines[0] and s.url in lines[0]  # the endpoint named, broken JSON too
    assert stored(ws).empty and ledger(ws).empty
