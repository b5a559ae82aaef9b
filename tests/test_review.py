"""`curate review`: verdicts as human:NAME annotation records with history, queues, the item view,
the server's security checks, two reviewers at once, and the app driven by keyboard in headless
Chromium."""
from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest
from rapidfuzz import fuzz

from annotate.store import (LABELS, VersionConflict, open_annotations, read_annotations, read_history,
                            write_annotation)
from conftest import PAPER_SCORES, ROOT, one_line_error, run_cli, small_workspace
from curate.core.errors import CurateError, InputError
from curate.review import queues
from curate.review.exchange import import_review
from curate.review.data import ReviewData
from curate.review.sections import ItemContext, item_sections, sections_html
from curate.review.server import ReviewApp, make_server
from curate.review.verdicts import LABEL_TEXT, annotator_name, reviewer_verdicts, save_verdict
from headless import Browser, Tab, require_chromium
from review_helpers import LLM, MODELS, one_torch_thread, review_server, review_workspace


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(workspace, decisions): 30 real items, study scores, 8 items labelled by SmolLM2-135M."""
    return review_workspace(tmp_path_factory.mktemp("review"))


@pytest.fixture
def ws_copy(built, tmp_path):
    """A private copy of the workspace for tests that write verdicts."""
    root = tmp_path / "ws"
    shutil.copytree(built[0], root)
    return root, built[1]


# --- verdicts ------------------------------------------------------------------------------------

def test_verdicts_are_annotation_records_with_every_version_kept(ws_copy):
    root, _ = ws_copy
    with open_annotations(root) as ws:
        item = ws.items()[3]
        assert save_verdict(ws, item, 1, "alice", {"labels": ["nonsense_prompt"]}, note="odd start") == 1
        assert save_verdict(ws, item, 1, "alice", {"labels": ["high_quality"]}, note="fine after all",
                            expected_version=1) == 2
        g = item["gold"]
        assert save_verdict(ws, item, 2, "human:alice", {"best": g, "equally_good": [], "all_implausible": False,
                                                         "worst": (g + 1) % 4}) == 1
        with pytest.raises(VersionConflict, match="edited from version 1, but version 2 is the latest"):
            save_verdict(ws, item, 1, "alice", {"labels": ["nonsense_correct"]}, expected_version=1)
        for bad in ({"labels": ["typo"]}, {"labels": ["high_quality", "nonsense_prompt"]}, {"labels": []}):
            with pytest.raises(CurateError, match=f"{item['item_id']} round 1"):
                save_verdict(ws, item, 1, "alice", bad)
        with pytest.raises(CurateError, match="lists the option marked correct"):
            save_verdict(ws, item, 2, "alice", {"best": g, "equally_good": [g], "all_implausible": False, "worst": 0})
        with pytest.raises(CurateError, match="out of range"):
            save_verdict(ws, item, 2, "alice", {"best": 7, "equally_good": [], "all_implausible": False, "worst": 0})
        for name in ("", "a b", "x/../y", "../etc", "a" * 41, "human:"):
            with pytest.raises(CurateError, match="reviewer name"):
                annotator_name(name)
        records = read_annotations(ws, annotator="human:alice")
        history = read_history(ws, annotator="human:alice")
        mine = reviewer_verdicts(ws, "alice")
    # One current record per (item, round, reviewer), in the annotation schema; every version kept.
    assert sorted(zip(records["round"], records["item_id"])) == [(1, item["item_id"]), (2, item["item_id"])]
    r1 = records[records["round"] == 1].iloc[0]
    assert r1["result"] == {"labels": ["high_quality"]} and r1["status"] == "valid"
    assert json.loads(r1["raw"])["note"] == "fine after all" and r1["content_hash"] == item["content_hash"]
    assert [(h["round"], h["version"], h["result"]) for h in history] == [
        (1, 1, {"labels": ["nonsense_prompt"]}), (1, 2, {"labels": ["high_quality"]}), (2, 1, records.iloc[1]["result"])]
    assert json.loads(history[0]["raw"])["note"] == "odd start"
    assert mine[item["item_id"]][1] == {"result": {"labels": ["high_quality"]}, "note": "fine after all", "version": 2}
    assert list(LABEL_TEXT) == list(LABELS)


# --- queues --------------------------------------------------------------------------------------

def test_queues(built, tmp_path):
    root, decisions = built
    data = ReviewData.load(root, [decisions])
    ids = [it["item_id"] for it in data.items]
    frame = pd.read_parquet(decisions / "decisions.parquet")
    assert queues.resolve(data, "removed") == frame.loc[~frame["kept"], "item_id"].tolist()
    for stage in ("near-duplicate", "pythia-wrong"):
        assert queues.resolve(data, f"removed:{stage}") == frame.loc[frame["first_stage"] == stage, "item_id"].tolist()
    with pytest.raises(CurateError, match="no filter stage 'nope'"):
        queues.resolve(data, "removed:nope")
    with pytest.raises(CurateError, match="--decisions"):
        queues.resolve(ReviewData.load(root), "removed")
    # Decisions made on other data (here the first 10 rows of the same file) are refused: item
    # ids can coincide, and reviewers would see other items' stages.
    with pytest.raises(CurateError, match="made on another workspace's data"):
        ReviewData.load(small_workspace(tmp_path / "other", 10), [decisions])

    # wrong: recomputed from the study's CSV files (argmax per row), the three models being all there are.
    rows = [it["row_index"] for it in data.items]
    gold = np.array([it["gold"] for it in data.items])
    right = np.array([pd.read_csv(PAPER_SCORES / "full_prompt" / f"{m}.csv").to_numpy()[rows].argmax(1) == gold
                      for m in MODELS])
    assert queues.resolve(data, "wrong") == [i for i, r in zip(ids, right.any(0)) if not r]
    best = int(np.argmax(right.mean(1)))
    assert queues.resolve(data, "wrong:1") == [i for i, r in zip(ids, right[best]) if not r]

    sample = queues.resolve(data, "sample:10")
    assert len(sample) == len(set(sample)) == 10 and sample == queues.resolve(data, "sample:10:0")
    assert sample != queues.resolve(data, "sample:10:1") and set(sample) <= set(ids)
    assert queues.resolve(data, "all") == ids

    listing = tmp_path / "ids.txt"
    listing.write_text(f"# to look at\n{ids[5]}\n\n{ids[2]}  # twice below\n{ids[2]}\n")
    assert queues.resolve(data, f"ids:{listing}") == [ids[5], ids[2]]
    listing.write_text(f"{ids[1]}\nhellaswag/validation/99999\n")
    with pytest.raises(InputError, match=r"ids.txt, row 2, field 'item_id': 'hellaswag/validation/99999' is not"):
        queues.resolve(data, f"ids:{listing}")
    for bad in ("sample:x", "wrong:0", "nope"):
        with pytest.raises(CurateError):
            queues.resolve(data, bad)


def test_disagree_queue_compares_llm_annotators_only(ws_copy):
    root, _ = ws_copy
    with open_annotations(root) as ws:
        llm = read_annotations(ws, annotator=LLM)
        items = {it["item_id"]: it for it in ws.items()}
        # A second LLM annotator (a test double: no other LLM runs here) agrees on the first four
        # items the local one labelled and differs on the next two.
        with ws.transaction():
            for n, r in enumerate(llm.head(6).itertuples()):
                labels = r.result["labels"] if n < 4 else (["multiple_plausible"] if r.result["labels"] != [
                    "multiple_plausible"] else ["high_quality"])
                write_annotation(ws, {"annotator": "imported:other", "round": 1, "item_id": r.item_id, "status": "valid",
                                      "result": {"labels": labels}, "raw": None, "prompt_version": None,
                                      "model_snapshot": None, "request_key": f"other/{r.item_id}",
                                      "content_hash": r.content_hash})
        save_verdict(ws, items[llm.iloc[0]["item_id"]], 1, "alice", {"labels": ["nonsense_prompt"]}
                     if llm.iloc[0]["result"]["labels"] != ["nonsense_prompt"] else {"labels": ["high_quality"]})
        records = read_annotations(ws)
    data = ReviewData.load(root)
    assert queues.resolve(data, "disagree", records) == list(llm["item_id"].iloc[4:6])


# --- the item view -------------------------------------------------------------------------------

def test_item_view_shows_everything_known(ws_copy):
    root, decisions = ws_copy
    data = ReviewData.load(root, [decisions])
    frame = pd.read_parquet(decisions / "decisions.parquet").set_index("item_id")
    values = {m: pd.read_csv(PAPER_SCORES / "full_prompt" / f"{m}.csv").to_numpy() for m in MODELS}
    with open_annotations(root) as ws:
        save_verdict(ws, data.items[0], 1, "bob", {"labels": ["multiple_plausible"]}, note="B <and> D both work")
        for item in data.items:
            html = sections_html(item_sections(ItemContext(data, item, read_annotations(ws, item_id=item["item_id"]))))
            for mode, text in item["prompts"].items():
                assert (f"<th>{mode}</th><td>{text}</td>" if text else f"<th>{mode}</th><td><i>(empty)</i>") in \
                    html.replace("&#x27;", "'").replace("&quot;", '"')
            gold = re.search(r'<li class="gold[^"]*" data-option="(\d)"', html)
            assert gold and int(gold.group(1)) == item["gold"]
            opts = item["options"]
            closest = max(fuzz.ratio(a, b) for k, a in enumerate(opts) for b in opts[k + 1:])
            assert bool(re.search(r'<li class="[^"]*near-dup', html)) == (closest >= 80), item["item_id"]
            # Each model's full-mode pick is the argmax of the study's released row.
            for m in MODELS:
                pick = "ABCD"[int(values[m][item["row_index"]].argmax())]
                row = re.search(rf"<td>{re.escape(m.replace('--', '/'))}</td><td>full</td><td>seq_mean: (\w)", html)
                assert row and row.group(1) == pick, (item["item_id"], m)
            matched = list(frame.loc[item["item_id"], "matched"])
            assert ("<b>kept</b>" in html) == (not matched)
            for stage in matched:
                assert f"<li><code>{stage}</code>" in html
    first = sections_html(item_sections(ItemContext(data, data.items[0], read_annotations(
        open_annotations(root), item_id=data.items[0]["item_id"]))))
    assert "human:bob" in first and "B &lt;and&gt; D both work" in first and LLM in first


def test_scores_are_grouped_by_formulation_when_present(built):
    root, _ = built
    data = ReviewData.load(root)
    two = pd.concat([data.scores.assign(formulation="mc"), data.scores.assign(
        formulation="cloze", seq_mean=-data.scores["seq_mean"])], ignore_index=True)
    item = data.items[0]
    html = sections_html(item_sections(ItemContext(ReviewData(root, data.items, two), item, pd.DataFrame())))
    assert "<th>formulation</th>" in html
    row = pd.read_csv(PAPER_SCORES / "full_prompt" / f"{MODELS[0]}.csv").to_numpy()[item["row_index"]]
    for form, pick in (("mc", row.argmax()), ("cloze", row.argmin())):
        assert re.search(rf"<td>EleutherAI/pythia-1b \[{form}\]</td><td>full</td><td>{form}</td><td>seq_mean: "
                         f"{'ABCD'[int(pick)]}", html)


def test_generation_answers_are_shown_mapped_back_through_the_shuffle(built):
    """Generation records (as read_generations returns them) appear on the item's page with the
    option the model chose named by the item's own letter, not by the shuffled number it saw."""
    root, _ = built
    data = ReviewData.load(root)
    item = data.items[0]
    order = [3, 2, 1, 0]            # displayed position -> original option
    rows = [{"model": "m", "template": "numbered", "settings": "t=0,p=1,n=8", "mode": "full", "seed": 0,
             "item_id": item["item_id"], "shown": 1, "pred": order[0], "status": "strict", "raw": "1",
             "correct": order[0] == item["gold"]},
            {"model": "m", "template": "numbered", "settings": "t=0,p=1,n=8", "mode": "full", "seed": 1,
             "item_id": item["item_id"], "shown": None, "pred": None, "status": "unparsed", "raw": "<maybe>",
             "correct": None}]
    gens = pd.DataFrame(rows).astype({"shown": "Int64", "pred": "Int64", "correct": "boolean"})
    html = sections_html(item_sections(ItemContext(ReviewData(root, data.items, data.scores, generations=gens),
                                                   item, pd.DataFrame())))
    assert "Answers by generation" in html
    mark = "&#10003;" if item["gold"] == 3 else "&#10007;"
    assert f"<td>0</td><td>D {mark}</td><td>strict</td><td><code>1</code></td>" in html
    assert "<td>1</td><td>unparsed</td><td>unparsed</td><td><code>&lt;maybe&gt;</code></td>" in html
    other = sections_html(item_sections(ItemContext(ReviewData(root, data.items, data.scores, generations=gens),
                                                    data.items[1], pd.DataFrame())))
    assert "Answers by generation" not in other


# --- the server ----------------------------------------------------------------------------------

def own_addresses() -> list[str]:
    """This machine's IPv4 addresses other than loopback (`hostname -I`, else name lookup)."""
    try:
        found = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10).stdout.split()
    except OSError:
        found = [a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
    return sorted({a for a in found if re.fullmatch(r"[\d.]+", a) and not a.startswith("127.")})


@contextmanager
def serving(root, decisions=None, **kw):
    data = ReviewData.load(root, [decisions] if decisions else [])
    app = ReviewApp(data, **kw)
    server = make_server(app, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield app, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def request(port, method, path, *, body=None, headers=None, host=None):
    """A raw HTTP request (http.client sends the path exactly as given)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host or f"127.0.0.1:{port}")
        data = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else None
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        if data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        res = conn.getresponse()
        return res.status, res.read()
    finally:
        conn.close()


def test_server_refuses_other_hosts_foreign_pages_and_paths_outside(ws_copy):
    root, decisions = ws_copy
    secret_files = [b"SQLite format 3", b"import ", b"-----BEGIN"]
    with serving(root, decisions, reviewer="alice") as (app, port):
        status, page = request(port, "GET", "/")
        assert status == 200 and app.token.encode() in page and b"http" not in page.replace(b"http-equiv", b"")
        ok = {"X-Review-Token": app.token}
        assert request(port, "GET", "/api/config", headers=ok)[0] == 200
        assert request(port, "GET", "/", host=f"localhost:{port}")[0] == 200
        # DNS rebinding: a page of another site whose name resolves to 127.0.0.1.
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1", f"127.0.0.1.evil.example:{port}"):
            assert request(port, "GET", "/", host=host)[0] == 403, host
        # Paths outside the app never reach a file: the database, this package's code, system files.
        for path in ("/../workspace.db", "/static/../workspace.db", "/%2e%2e/workspace.db", "/%2E%2E%2Fworkspace.db",
                     "/static/%2e%2e/%2e%2e/workspace.db", "/static/..%2f..%2fworkspace.db", "/..%5c..%5cworkspace.db",
                     "/static/%252e%252e/server.py", "/static/../server.py", "/static/review.js/../../server.py",
                     "//etc/passwd", "/static//etc/passwd", "/../../../../etc/passwd", "/workspace.db",
                     "/static/review.html", "/static/", "/api/../workspace.db", "/exports/"):
            status, body = request(port, "GET", path, headers=ok)
            assert status == 404 and not any(s in body for s in secret_files), (path, status)
        # The API needs the page's token; writes also need the app's origin and a JSON body.
        assert request(port, "GET", "/api/config")[0] == 403
        assert request(port, "GET", "/api/config", headers={"X-Review-Token": "x" * 43})[0] == 403
        item = app.data.items[1]
        verdict = {"reviewer": "alice", "item_id": item["item_id"], "round": 1, "result": {"labels": ["high_quality"]},
                   "note": "", "version": 0}
        json_ok = {**ok, "Content-Type": "application/json"}
        assert request(port, "POST", "/api/verdict", body=verdict, headers={"Content-Type": "application/json"})[0] == 403
        assert request(port, "POST", "/api/verdict", body=verdict,
                       headers={**json_ok, "Origin": "http://evil.example"})[0] == 403
        assert request(port, "POST", "/api/verdict", body=verdict, headers={**ok, "Content-Type": "text/plain"})[0] == 403
        with open_annotations(root) as ws:
            assert read_annotations(ws, annotator="human:alice").empty  # nothing refused was written
        status, body = request(port, "POST", "/api/verdict", body=verdict,
                               headers={**json_ok, "Origin": f"http://127.0.0.1:{port}"})
        assert status == 200 and json.loads(body)["version"] == 1
        status, body = request(port, "POST", "/api/verdict", body=verdict, headers=json_ok)
        assert status == 409 and json.loads(body)["current"] == 1
        status, body = request(port, "POST", "/api/verdict", body={**verdict, "result": {"labels": ["typo"]}},
                               headers=json_ok)
        assert status == 400 and "labels" in json.loads(body)["error"]
        status, body = request(port, "GET", "/api/queue?name=ids:/etc/passwd&reviewer=alice", headers=ok)
        assert status == 400 and b"root:" not in body
        assert request(port, "GET", "/api/item?id=nope&reviewer=alice", headers=ok)[0] == 404
        assert request(port, "GET", "/api/queue?name=all&reviewer=../x", headers=ok)[0] == 400
    # Bound to the loopback address only: other addresses of this machine get no answer.
    with serving(root) as (app, port):
        for address in own_addresses():
            with pytest.raises(OSError):
                socket.create_connection((address, port), timeout=5).close()


def test_two_reviewers_at_once_lose_nothing(ws_copy):
    """Two servers on one workspace (one a real `curate review` process), two reviewers posting
    every item at the same time; then one reviewer's stale edit is refused, not lost."""
    root, decisions = ws_copy
    with review_server(root, "--reviewer", "bob") as (port_b, token_b):
        with serving(root, reviewer="alice") as (app, port_a):
            items = app.data.items
            errors = []

            def post_all(port, token, reviewer, labels):
                for n, it in enumerate(items):
                    status, body = request(port, "POST", "/api/verdict", headers={
                        "X-Review-Token": token, "Content-Type": "application/json"},
                        body={"reviewer": reviewer, "item_id": it["item_id"], "round": 1, "version": 0,
                              "result": {"labels": [labels[n % len(labels)]]}, "note": f"{reviewer} {n}"})
                    if status != 200:
                        errors.append((reviewer, n, status, body))

            threads = [threading.Thread(target=post_all, args=(port_a, app.token, "alice", LABELS)),
                       threading.Thread(target=post_all, args=(port_b, token_b, "bob", LABELS[::-1]))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert errors == []
    with open_annotations(root) as ws:
        for reviewer, labels in (("alice", LABELS), ("bob", LABELS[::-1])):
            got = reviewer_verdicts(ws, reviewer)
            assert len(got) == len(items)
            for n, it in enumerate(items):
                assert got[it["item_id"]][1] == {"result": {"labels": [labels[n % len(labels)]]},
                                                 "note": f"{reviewer} {n}", "version": 1}
        assert len(read_history(ws)) == 2 * len(items)


# --- the app in a real browser -------------------------------------------------------------------

def progress(tab) -> tuple[int, int]:
    p = tab.evaluate("[document.querySelector('#progress').dataset.either, document.querySelector('#progress').dataset.total]")
    return int(p[0]), int(p[1])


def current_item(tab) -> str:
    """The item on screen once the app has loaded it (the page arrives with it rendered, before)."""
    return tab.wait_until("document.querySelector('#item').dataset.loaded && "
                          "document.querySelector('#item-id').textContent")


def chosen(tab) -> list[str]:
    return tab.evaluate("Array.from(document.querySelectorAll('.choice.chosen')).map(c => c.textContent)")


def answer(tab, keys: list[str]) -> str:
    """Press ``keys`` on the item on screen, then Enter; return the item id once the next loaded."""
    item = current_item(tab).split(" ")[0]
    for key in keys:
        tab.press(key)
    tab.press("Enter")
    tab.wait_until(f"document.querySelector('#item-id').textContent.split(' ')[0] !== {json.dumps(item)}")
    return item


def test_review_in_headless_chromium_by_keyboard(ws_copy, tmp_path):
    binary = require_chromium()
    root, decisions = ws_copy
    removed = pd.read_parquet(decisions / "decisions.parquet").query("not kept")["item_id"].tolist()
    proc = subprocess.Popen([sys.executable, "-m", "curate", "review", str(root), "--decisions", str(decisions),
                             "--queue", "removed", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    browser = Browser(binary)
    try:
        line = ""
        while "open http" not in line:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        alice, bob = Tab(browser), Tab(browser)   # two browser contexts: two people
        alice.goto(url + "?reviewer=alice")
        bob.goto(url + "?reviewer=bob")
        assert current_item(alice).startswith(removed[0]) and progress(alice) == (0, len(removed))
        # Three items by keyboard: labels by number, a round-2 answer set with arrow keys and numbers.
        done = [answer(alice, ["8"]),
                answer(alice, ["1", "4"]),
                answer(alice, ["1", "ArrowDown", "2", "1", "ArrowDown", "2", "3"])]
        assert done == removed[:3] and progress(alice) == (3, len(removed))
        assert [answer(bob, ["7"]), answer(bob, ["8"])] == removed[:2]
        # Reload: the answers are kept, the app resumes at the first unanswered item.
        alice.reload()
        assert current_item(alice).startswith(removed[3]) and progress(alice) == (3, len(removed))
        for _ in range(3):
            alice.press("k")
        alice.wait_until(f"document.querySelector('#item-id').textContent.startsWith({json.dumps(removed[0])})")
        assert chosen(alice) == ["8 high quality (no issue)"]
        alice.press("j")
        alice.press("j")
        alice.wait_until(f"document.querySelector('#item-id').textContent.startsWith({json.dumps(removed[2])})")
        g2 = ReviewData.load(root).by_id[removed[2]]["gold"]
        assert chosen(alice) == ["1 prompt ungrammatical", "2 B", *(["1 A"] if g2 != 0 else []), "2 no", "3 C"]
        assert alice.errors() == [] and bob.errors() == []
        shot = os.environ.get("BENCHCURATE_REVIEW_SCREENSHOT") or tmp_path / "review.png"
        alice.screenshot(shot)
        assert open(shot, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    finally:
        browser.close()
        proc.terminate()
        proc.wait(30)
    with open_annotations(root) as ws:
        records = read_annotations(ws)
    human = records[records["annotator"].str.startswith("human:")]
    got = {(r.annotator, r.round, r.item_id): r.result for r in human.itertuples()}
    assert got == {
        ("human:alice", 1, removed[0]): {"labels": ["high_quality"]},
        ("human:alice", 1, removed[1]): {"labels": ["ungrammatical_prompt", "nonsense_prompt"]},
        ("human:alice", 1, removed[2]): {"labels": ["ungrammatical_prompt"]},
        ("human:alice", 2, removed[2]): {"best": 1, "equally_good": [] if g2 == 0 else [0], "all_implausible": False,
                                         "worst": 2},
        ("human:bob", 1, removed[0]): {"labels": ["multiple_plausible"]},
        ("human:bob", 1, removed[1]): {"labels": ["high_quality"]},
    }
    # The LLM annotator measured against each reviewer.
    out = run_cli("agreement", root, "--round", "1", "--boot", "50").stdout
    for reviewer in ("human:alice", "human:bob"):
        assert re.search(rf"round 1 high_quality\s+{reviewer} vs {re.escape(LLM)} n=\d", out), out
    assert "human:alice vs human:bob n=2" in out


# --- verdicts in filter rules --------------------------------------------------------------------

def test_rules_can_use_human_verdicts(ws_copy, tmp_path):
    """rules/human-override.yaml: the scorer stage removes an item unless the reviewer marked it
    high quality; the reviewer's problem labels and wrong-gold answers remove items."""
    from scoring.run import Score

    root, _ = ws_copy
    with one_torch_thread():
        Score.with_options(root, model="smollm2-135m", modes=["full"], quiet=True).run()
    rules = ROOT / "rules" / "human-override.yaml"

    def decide(out):
        run_cli("filter", root, "--rules", rules, "--annotator", "human:alice", "--out", tmp_path / out)
        return pd.read_parquet(tmp_path / out / "decisions.parquet").set_index("item_id")

    # A reviewer without any verdict is most likely a wrong name: refused, not a silent no-match.
    proc = run_cli("filter", root, "--rules", rules, "--annotator", "human:alice", "--out", tmp_path / "none",
                   check=False)
    assert proc.returncode == 2 and "annotator 'human:alice' has no round-1 records" in proc.stderr
    with open_annotations(root) as ws:
        items = {it["item_id"]: it for it in ws.items()}
        # Verdicts that change nothing: high quality, and the gold as best, on one item.
        neutral = ws.items()[-1]
        save_verdict(ws, neutral, 1, "alice", {"labels": ["high_quality"]})
        save_verdict(ws, neutral, 2, "alice", {"best": neutral["gold"], "equally_good": [], "all_implausible": False,
                                               "worst": (neutral["gold"] + 1) % 4})
    before = decide("before")
    assert set(before["first_stage"].dropna()) <= {"scorer-disagrees"}  # no problem verdicts yet
    removed = [i for i in before.index[~before["kept"]] if i != neutral["item_id"]]
    kept = [i for i in before.index[before["kept"]] if i != neutral["item_id"]]
    with open_annotations(root) as ws:
        save_verdict(ws, items[removed[0]], 1, "alice", {"labels": ["high_quality"]})
        save_verdict(ws, items[removed[1]], 1, "bob", {"labels": ["high_quality"]})   # another reviewer: no effect
        save_verdict(ws, items[kept[0]], 1, "alice", {"labels": ["nonsense_correct"]})
        g = items[kept[1]]["gold"]
        save_verdict(ws, items[kept[1]], 2, "alice", {"best": (g + 1) % 4, "equally_good": [], "all_implausible": False,
                                                       "worst": (g + 2) % 4})
    after = decide("after")
    assert bool(after.loc[removed[0], "kept"]) and after.loc[removed[0], "matched"].tolist() == []
    assert after.loc[removed[1], "first_stage"] == "scorer-disagrees"
    assert after.loc[kept[0], "first_stage"] == "reviewer-flagged"
    assert after.loc[kept[1], "first_stage"] == "reviewer-wrong-gold"
    unchanged = [i for i in before.index if i not in (removed[0], kept[0], kept[1], neutral["item_id"])]
    assert (after.loc[unchanged, "kept"] == before.loc[unchanged, "kept"]).all()
    summary = json.loads((tmp_path / "after" / "summary.json").read_text())
    assert {a["annotator"] for a in summary["inputs"]["annotators"]} == {"human:alice"}


# --- export to and import from external tools ----------------------------------------------------

def test_argilla_round_trip_on_real_items(ws_copy, tmp_path):
    """Export the removed queue for Argilla, check it with Argilla's own client models, answer it
    as Argilla records its users' responses (rg.Response; a stand-in for people clicking in
    Argilla's UI, which needs a server), write it with Argilla's own exporter, import it back."""
    import uuid

    import argilla as rg
    from argilla._models import FieldModel, MetadataFieldModel, QuestionModel
    from argilla.records._io import JsonIO
    from argilla.records._resource import Record

    root, decisions = ws_copy
    out = tmp_path / "argilla"
    run_cli("export", root, "review", "--format", "argilla", "--decisions", decisions, "--out", out)
    settings = json.loads((out / "settings.json").read_text())
    for q in settings["questions"]:
        QuestionModel(**q)
    for f in settings["fields"]:
        FieldModel(**f)
    for m in settings["metadata"]:
        MetadataFieldModel(**m)
    names = {f["name"] for f in settings["fields"]} | {q["name"] for q in settings["questions"]}
    assert len(names) == len(settings["fields"]) + len(settings["questions"])
    records = [Record.from_dict(r) for r in json.loads((out / "records.json").read_text())]
    removed = pd.read_parquet(decisions / "decisions.parquet").query("not kept")["item_id"].tolist()
    assert [r.id for r in records] == removed
    items = ReviewData.load(root).by_id
    first = items[removed[0]]
    assert records[0].fields["context"] == first["prompts"]["full"]
    assert records[0].fields["options"].splitlines()[first["gold"]].endswith("(marked correct)")

    ann, ben = uuid.uuid4(), uuid.uuid4()
    answered = []
    for n, r in enumerate(records[:4]):
        g = items[r.id]["gold"]
        other = "ABCD"[(g + 1) % 4]
        responses = [rg.Response("labels", ["high_quality"] if n % 2 else ["nonsense_prompt", "multiple_plausible"],
                                 user_id=ann),
                     rg.Response("note", f"checked {n}", user_id=ann)]
        if n < 2:
            responses += [rg.Response("best", "ABCD"[g], user_id=ann), rg.Response("worst", other, user_id=ann),
                          rg.Response("all_implausible", "no", user_id=ann)]
        if n == 0:
            responses += [rg.Response("equally_good", [other], user_id=ann), rg.Response("labels", ["high_quality"],
                                                                                       user_id=ben)]
        answered.append(Record(id=r.id, fields=dict(r.fields), metadata=dict(r.metadata), responses=responses))
    reviewed = tmp_path / "reviewed.json"
    JsonIO.to_json(answered + records[4:], reviewed)

    out_text = run_cli("import-review", root, "--format", "argilla", "--file", reviewed,
                       "--user", f"{ann}=ann").stdout
    assert "imported 7 verdicts" in out_text
    with open_annotations(root) as ws:
        got = {(r.annotator, r.round, r.item_id): (r.result, json.loads(r.raw)["note"])
               for r in read_annotations(ws).itertuples() if r.annotator.startswith("human:")}
    g0, g1 = items[removed[0]]["gold"], items[removed[1]]["gold"]
    assert got == {
        ("human:ann", 1, removed[0]): ({"labels": ["nonsense_prompt", "multiple_plausible"]}, "checked 0"),
        ("human:ann", 2, removed[0]): ({"best": g0, "equally_good": [(g0 + 1) % 4], "all_implausible": False,
                                        "worst": (g0 + 1) % 4}, "checked 0"),
        ("human:ann", 1, removed[1]): ({"labels": ["high_quality"]}, "checked 1"),
        ("human:ann", 2, removed[1]): ({"best": g1, "equally_good": [], "all_implausible": False,
                                        "worst": (g1 + 1) % 4}, "checked 1"),
        ("human:ann", 1, removed[2]): ({"labels": ["nonsense_prompt", "multiple_plausible"]}, "checked 2"),
        ("human:ann", 1, removed[3]): ({"labels": ["high_quality"]}, "checked 3"),
        (f"human:{ben}", 1, removed[0]): ({"labels": ["high_quality"]}, ""),
    }
    # Importing again adds versions, not records; a response that breaks the rules writes nothing.
    run_cli("import-review", root, "--format", "argilla", "--file", reviewed, "--user", f"{ann}=ann")
    bad = json.loads(reviewed.read_text())
    bad[5]["responses"] = {"best": [{"value": "Z", "user_id": str(ann)}], "worst": [{"value": "A", "user_id": str(ann)}]}
    reviewed.write_text(json.dumps(bad))
    proc = run_cli("import-review", root, "--format", "argilla", "--file", reviewed, "--user", f"{ann}=ann", check=False)
    assert proc.returncode == 2 and "reviewed.json, row 5, field 'best': 'Z' is not an option letter A..D" in proc.stderr
    with open_annotations(root) as ws:
        assert len(read_annotations(ws).query("annotator.str.startswith('human:')")) == 7
        assert len(read_history(ws)) == 14


def test_jsonl_round_trip_on_real_items(ws_copy, tmp_path):
    root, _ = ws_copy
    out = tmp_path / "queue.jsonl"
    run_cli("export", root, "review", "--format", "jsonl", "--queue", "sample:5", "--out", out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    data = ReviewData.load(root)
    assert [r["item_id"] for r in rows] == queues.resolve(data, "sample:5")
    assert all(r["labels"] is None and r["reviewer"] is None and r["options"] == data.by_id[r["item_id"]]["options"]
               for r in rows)
    rows[0] |= {"labels": ["high_quality"], "note": "fine"}
    rows[1] |= {"reviewer": "carol", "best": rows[1]["gold"], "worst": "A" if rows[1]["gold"] != "A" else "B",
                "all_implausible": True}
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run_cli("import-review", root, "--format", "jsonl", "--file", out, check=False)
    assert proc.returncode == 2 and "queue.jsonl, row 0, field 'reviewer': no reviewer" in proc.stderr
    run_cli("import-review", root, "--format", "jsonl", "--file", out, "--reviewer", "dave")
    with open_annotations(root) as ws:
        dave, carol = reviewer_verdicts(ws, "dave"), reviewer_verdicts(ws, "carol")
    assert dave == {rows[0]["item_id"]: {1: {"result": {"labels": ["high_quality"]}, "note": "fine", "version": 1}}}
    (r2,) = carol[rows[1]["item_id"]].values()
    assert r2["result"]["all_implausible"] is True and "ABCD"[r2["result"]["best"]] == rows[1]["gold"]
    # exported, a human record's empty fields are JSON nulls, not NaN (which no strict reader takes)
    run_cli("export", root, "annotations", "--out", tmp_path / "annotations.jsonl")

    def no_constants(name):
        raise ValueError(f"{name} is not JSON")
    exported = [json.loads(line, parse_constant=no_constants)
                for line in (tmp_path / "annotations.jsonl").read_text().splitlines()]
    assert {r["annotator"] for r in exported} >= {"human:dave", "human:carol"}
    assert all(r["model_snapshot"] is None for r in exported if r["annotator"].startswith("human:"))
    rows[2] |= {"labels": ["typo"], "reviewer": "dave", "content_hash": "sha256:0"}
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run_cli("import-review", root, "--format", "jsonl", "--file", out, "--reviewer", "dave", check=False)
    assert proc.returncode == 2 and "row 2, field 'content_hash': " in proc.stderr and "changed since" in proc.stderr


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """(workspace, its jsonl review export): 5 real items, nothing else (fast; nothing is written to it)."""
    root = small_workspace(tmp_path_factory.mktemp("plain") / "ws", 5)
    out = root.parent / "queue.jsonl"
    run_cli("export", root, "review", "--format", "jsonl", "--out", out)
    return root, [json.loads(line) for line in out.read_text().splitlines()]


def no_verdicts(root) -> bool:
    with open_annotations(root) as ws:
        return read_annotations(ws).empty


def test_an_argilla_export_to_a_place_that_is_no_folder_is_one_line(plain, tmp_path):
    root, _ = plain
    (tmp_path / "queue.jsonl").write_text("")
    (tmp_path / "plain.log").write_text("")
    for out, expected in ((tmp_path / "queue.jsonl", "exists and is not a folder"),
                          (tmp_path / "plain.log" / "sub", "plain.log is a file, not a folder")):
        one_line_error(run_cli("export", root, "review", "--format", "argilla", "--out", out, check=False), expected)


def test_import_review_refuses_malformed_jsonl_in_one_line(plain, tmp_path):
    """Wrong JSON types name the file, row and field, and nothing is written, not even the good
    line before."""
    root, rows = plain
    good = rows[0] | {"reviewer": "dave", "labels": ["high_quality"]}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(good) + "\n" + json.dumps(rows[1] | {"reviewer": 5, "labels": ["high_quality"]}) + "\n")
    one_line_error(run_cli("import-review", root, "--format", "jsonl", "--file", bad, check=False),
                   "bad.jsonl, row 1, field 'reviewer': is a number, expected a reviewer name")
    assert no_verdicts(root)
    for line, expected in (
            ([1, 2], "row 1: is an array, expected an object"),
            (rows[1] | {"item_id": ["x"]}, "row 1, field 'item_id': is an array, expected an item id"),
            (rows[1] | {"labels": "high_quality"}, "row 1, field 'labels': is a string, expected a list of label names"),
            (rows[1] | {"best": "A", "worst": "B", "equally_good": 3}, "row 1, field 'equally_good': is a number"),
            (rows[1] | {"labels": ["high_quality"], "note": 5}, "row 1, field 'note': is a number, expected text"),
            (rows[1] | {"labels": ["high_quality"], "reviewer": "a b"}, "row 1, field 'reviewer': reviewer name"),
            # a round-2 answer that does not fit is named by its own field, not 'best'
            (rows[1] | {"best": "A", "worst": "B", "equally_good": ["C", "C"], "reviewer": "dave"},
             "row 1, field 'equally_good': ")):
        bad.write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
        with pytest.raises(InputError, match=re.escape(f"bad.jsonl, {expected}")):
            import_review(root, bad, "jsonl")
    assert no_verdicts(root)
    # the same reviewer answering one item twice: the later line would silently win
    twice = rows[0] | {"reviewer": "dave", "labels": ["nonsense_prompt"]}
    bad.write_text(json.dumps(good) + "\n" + json.dumps(twice) + "\n")
    with pytest.raises(InputError, match=re.escape("bad.jsonl, row 1, field 'labels': a second round-1 verdict "
                                                   f"of dave on {rows[0]['item_id']} (also row 0)")):
        import_review(root, bad, "jsonl")
    assert no_verdicts(root)


def test_import_review_refuses_malformed_argilla_records_in_one_line(plain, tmp_path):
    root, rows = plain
    item_id = rows[0]["item_id"]
    good = {"id": item_id, "metadata": {"item_id": item_id}, "responses": {"labels": [
        {"value": ["high_quality"], "user_id": "u1"}]}}
    bad = tmp_path / "records.json"
    bad.write_text(json.dumps([good, {"id": item_id, "responses": {"labels": "x"}}]))
    one_line_error(run_cli("import-review", root, "--format", "argilla", "--file", bad, check=False),
                   "records.json, row 1, field 'responses.labels': is a string, expected a list of responses")
    assert no_verdicts(root)
    for record, expected in (
            (1, "row 1: is a number, expected a record (an object)"),
            ({"id": item_id, "metadata": [1]}, "row 1, field 'metadata': is an array, expected an object"),
            ({"id": 7}, "row 1, field 'id': is a number, expected a record id"),
            ({"id": item_id, "responses": {"labels": [5]}}, "row 1, field 'responses.labels': holds a number"),
            ({"id": item_id, "responses": {"labels": [{"value": "high_quality", "user_id": "u1"}]}},
             "row 1, field 'responses.labels': is a string, expected a list of label names"),
            ({"id": item_id, "responses": {"labels": [{"value": ["high_quality"]}]}},
             "row 1, field 'responses.labels[0].user_id': a response without a user_id"),
            ({"id": item_id, "responses": {"labels": [{"value": ["high_quality"], "user_id": "u2"},
                                                      {"value": ["nonsense_prompt"], "user_id": "u2"}]}},
             "row 1, field 'responses.labels[1]': user u2 answered labels twice")):
        bad.write_text(json.dumps([good, record]))
        with pytest.raises(InputError, match=re.escape(f"records.json, {expected}")):
            import_review(root, bad, "argilla")
    bad.write_text("[1]")
    with pytest.raises(InputError, match=re.escape("records.json, row 0: is a number, expected a record")):
        import_review(root, bad, "argilla")
    assert no_verdicts(root)


def test_server_answers_malformed_verdicts_with_a_json_error(plain, tmp_path, capfd):
    """A bad Content-Length or a field of the wrong type is a 400 naming it, not a traceback and a
    dropped connection; the server goes on serving."""
    root, rows = plain
    root = shutil.copytree(root, tmp_path / "ws")
    item_id = rows[0]["item_id"]
    verdict = {"reviewer": "alice", "item_id": item_id, "round": 1, "result": {"labels": ["high_quality"]}}
    with serving(root) as (app, port):
        ok = {"X-Review-Token": app.token, "Content-Type": "application/json"}
        status, body = request(port, "POST", "/api/verdict", headers={**ok, "Content-Length": "abc"})
        assert status == 400 and "Content-Length must be a number" in json.loads(body)["error"]
        for change, expected in (({"item_id": [item_id]}, "item_id must be text"),
                                 ({"reviewer": 5}, "reviewer must be text"),
                                 ({"round": 1.0}, "round must be 1 or 2"),
                                 # stored, 1.0 made the item's page fail to load (a float indexes no list)
                                 ({"round": 2, "result": {"best": 1.0, "worst": 0, "equally_good": [],
                                                          "all_implausible": False}}, "best: 1.0 is not of type"),
                                 ({"result": [1]}, "result must be an object"),
                                 ({"note": None}, "note must be text")):
            status, body = request(port, "POST", "/api/verdict", body=verdict | change, headers=ok)
            assert status == 400 and expected in json.loads(body)["error"], (change, body)
        deep_is_refused_and_the_verdict_saves(port, verdict, ok)
    assert "Traceback" not in capfd.readouterr().err


def deep_is_refused_and_the_verdict_saves(port, verdict: dict, headers: dict) -> None:
    """A body nested deeper than Python's JSON reader goes (under the size limit) is a 400; then
    ``verdict`` saves as version 1."""
    deep = b"[" * 30000 + b"]" * 30000
    status, body = request(port, "POST", "/api/verdict", body=deep, headers=headers)
    assert status == 400 and "nests values too deeply" in json.loads(body)["error"]
    status, body = request(port, "POST", "/api/verdict", body=verdict, headers=headers)
    assert status == 200 and json.loads(body)["version"] == 1


def test_a_verdict_the_workspace_cannot_take_is_a_503_and_the_next_one_saves(plain, tmp_path, monkeypatch, capfd):
    """Another process holds the workspace's write lock past SQLite's busy timeout (shortened here):
    the save is answered 503 "nothing was changed", not a dropped connection; once the lock is gone
    the same verdict saves as version 1 (the failed one left no trace)."""
    import sqlite3

    import curate.items.store

    root, rows = plain
    root = shutil.copytree(root, tmp_path / "ws")
    monkeypatch.setattr(curate.items.store, "BUSY_TIMEOUT_S", 0.2)
    verdict = {"reviewer": "alice", "item_id": rows[0]["item_id"], "round": 1, "result": {"labels": ["high_quality"]}}
    with serving(root) as (app, port):
        ok = {"X-Review-Token": app.token, "Content-Type": "application/json"}
        other = sqlite3.connect(root / "workspace.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another writer, mid-transaction
        status, body = request(port, "POST", "/api/verdict", body=verdict, headers=ok)
        assert status == 503 and "database is locked" in json.loads(body)["error"]
        assert "nothing was changed" in json.loads(body)["error"]
        assert request(port, "GET", "/api/config", headers=ok)[0] == 200  # reads go on meanwhile
        other.execute("ROLLBACK")
        other.close()
        deep_is_refused_and_the_verdict_saves(port, verdict, ok)
    assert "Traceback" not in capfd.readouterr().err


# --- the report's item browser -------------------------------------------------------------------

def test_report_links_every_flagged_item_to_a_static_page(ws_copy, tmp_path):
    root, _ = ws_copy
    with open_annotations(root) as ws:
        save_verdict(ws, ws.items()[20], 1, "alice", {"labels": ["nonsense_correct"]}, note="<b>not bold</b>")
        llm = read_annotations(ws, annotator=LLM)
    out = tmp_path / "report"
    run_cli("analyze", root, "--out", out, "--bootstrap", "100")
    m = json.loads((out / "metrics.json").read_text())
    flagged = set(llm.loc[llm["result"].map(lambda r: r["labels"] != ["high_quality"]), "item_id"]) | {
        f"hellaswag/validation/{20}"}
    pages = m["item_pages"]
    assert {r["item_id"] for r in pages["rows"]} == flagged and pages["with_page"] == len(flagged)
    report = (out / "report.html").read_text()
    for r in pages["rows"]:
        assert f'<a href="{r["page"]}">{r["item_id"]}</a>' in report
        page = (out / r["page"]).read_text()
        item = ReviewData.load(root).by_id[r["item_id"]]
        assert "Context per prompt mode" in page and "Model choices and log-likelihoods" in page
        assert all(o.replace("'", "&#x27;").replace('"', "&quot;") in page for o in item["options"])
    page20 = (out / "items" / "20.html").read_text()
    assert "human:alice" in page20 and "&lt;b&gt;not bold&lt;/b&gt;" in page20 and "<b>not bold" not in page20
    assert "<script" not in report and "src=\"http" not in page20 and "href=\"http" not in page20
    binary = require_chromium()
    browser = Browser(binary)
    try:
        tab = Tab(browser)
        tab.goto((out / "items" / "index.html").as_uri())
        assert tab.evaluate("document.querySelectorAll('tbody tr').length") == len(flagged)
        tab.evaluate("const b = document.getElementById('search'); b.value = 'validation/20 alice'; "
                     "b.dispatchEvent(new Event('input')); 1")
        assert tab.evaluate("Array.from(document.querySelectorAll('tbody tr')).filter(r => !r.hidden)"
                            ".map(r => r.querySelector('a').textContent)") == ["hellaswag/validation/20"]
        tab.goto((out / "items" / "20.html").as_uri())
        assert tab.evaluate("document.querySelectorAll('table').length") >= 3 and tab.errors() == []
    finally:
        browser.close()


def test_a_port_in_use_is_a_clear_error(built):
    root, _ = built
    with serving(root) as (_, port):
        proc = run_cli("review", root, "--port", port, check=False, timeout=120)
    assert proc.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in proc.stderr and "Traceback" not in proc.stderr


# --- what a reviewer sees first ------------------------------------------------------------------

#: Eleven scorers: every model of the study's full-prompt files (ten), and Llama-3.2-1B's summed
#: variant under a name of its own.
ELEVEN = sorted(p.stem for p in (PAPER_SCORES / "full_prompt").glob("*.csv") if not p.stem.startswith("byte_mean"))


def test_why_an_item_is_in_its_queue_is_on_the_first_screen_with_eleven_models(ws_copy, tmp_path):
    """At 1280 x 800 with eleven models scored in two modes, the filter stages that removed the
    item (queue `removed`) and the label-error score and suspected option (queue `suspects`) are
    above the fold and above the models' table; the page arrives with its item rendered (a
    screenshot at load shows it, not "loading...")."""
    from review_helpers import write_study_scores

    binary = require_chromium()
    root, decisions = ws_copy
    extra = [m for m in ELEVEN if m not in MODELS]
    write_study_scores(root, modes=("full",), models=[m for m in extra if m.startswith("sum_")])
    write_study_scores(root, models=[m for m in extra if not m.startswith("sum_")])
    assert len(ELEVEN) == 11
    removed = pd.read_parquet(decisions / "decisions.parquet").query("not kept")["item_id"].tolist()
    browser = Browser(binary)
    try:
        with serving(root, decisions, queue="removed") as (app, port):
            status, page = request(port, "GET", "/?reviewer=alice")
            assert status == 200 and f'<h2 id="item-id">{removed[0]}'.encode() in page
            assert b"Filter stages that matched" in page and b"loading" not in page
            tab = Tab(browser, height=800)
            tab.goto(f"http://127.0.0.1:{port}/?reviewer=alice")
            shot = os.environ.get("BENCHCURATE_REVIEW_LOAD_SCREENSHOT") or tmp_path / "at-load.png"
            tab.screenshot(shot)
            box = "(s => s && s.getBoundingClientRect().top)(document.querySelector({}))"
            assert tab.evaluate(box.format("'#item-id'")) is not None  # there at load, before any script ran
            current_item(tab)
            tab.wait_until("document.querySelectorAll('.sec-scores tr').length > 1")
            assert tab.evaluate("document.querySelectorAll('.sec-scores tr').length") == 1 + 11 + 10
            top = tab.evaluate(box.format("'.sec-filter'"))
            assert top < min(800, tab.evaluate(box.format("'.sec-scores'"))), top

            table = queues.suspect_table(app.data)
            first = table.iloc[0]
            tab.goto(f"http://127.0.0.1:{port}/?reviewer=alice&queue=suspects:3")
            tab.wait_until(f"document.querySelector('#item-id').textContent.startsWith({json.dumps(first.item_id + ' ')})"
                           " && !!document.querySelector('.sec-suspect')")
            text = tab.evaluate("document.querySelector('.sec-suspect').innerText")
            assert f"label-error score {first.label_error_score:.2f}" in text, text
            assert f"suspected option {'ABCD'[int(first.suspected_option)]}" in text, text
            assert tab.evaluate(box.format("'.sec-suspect'")) < min(800, tab.evaluate(box.format("'.sec-scores'")))
            assert tab.errors() == []
    finally:
        browser.close()
