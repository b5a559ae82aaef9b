"""`curate review` under concurrent use, as real processes: two servers on one workspace, each
with several client threads, lose no verdict they answered 200 and leave the database whole; a
save made from a page that showed no verdict is refused once one exists."""
from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import ExitStack

import pytest

from annotate.store import LABELS
from conftest import small_workspace
from review_helpers import review_server
from test_review import request

ROUNDS, SERVERS, THREADS, POSTS = 20, 2, 3, 3


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return small_workspace(tmp_path_factory.mktemp("concurrency") / "ws", 20)


@pytest.fixture(scope="module")
def servers(workspace):
    """Two `curate review` processes on the one workspace (started together: each takes a while)."""
    with ExitStack() as stack:
        yield [stack.enter_context(review_server(workspace)) for _ in range(SERVERS)]


def item_ids(root) -> list[str]:
    with sqlite3.connect(root / "workspace.db") as conn:
        return [r[0] for r in conn.execute("SELECT item_id FROM items ORDER BY row_index")]


def post(port, token, verdict):
    return request(port, "POST", "/api/verdict", body=verdict,
                   headers={"X-Review-Token": token, "Content-Type": "application/json"})


def client(port, token, reviewer, ids, answered, failed):
    """One reviewer's tab: reads each item, then saves a verdict on it; notes what was answered."""
    for n, item_id in enumerate(ids):
        request(port, "GET", f"/api/item?id={item_id}&reviewer={reviewer}", headers={"X-Review-Token": token})
        verdict = {"reviewer": reviewer, "item_id": item_id, "round": 1, "version": 0, "note": f"{reviewer} {n}",
                   "result": {"labels": [LABELS[n % len(LABELS)]]}}
        status, body = post(port, token, verdict)
        (answered if status == 200 else failed).append((verdict, status, body))


def stored_verdicts(root) -> tuple[str, dict]:
    """(PRAGMA integrity_check, (annotator, item) -> (result, raw)) read straight from SQLite."""
    with sqlite3.connect(root / "workspace.db", timeout=60) as conn:
        check = "; ".join(r[0] for r in conn.execute("PRAGMA integrity_check"))
        rows = conn.execute("SELECT annotator, item_id, result_json, raw FROM annotations WHERE round = 1")
        return check, {(a, i): (json.loads(res), json.loads(raw)["note"]) for a, i, res, raw in rows}


def test_two_review_servers_with_threaded_clients_lose_no_answered_verdict(workspace, servers):
    """Two servers, three client threads each (each thread a reviewer of its own), 20 rounds: every
    verdict answered 200 is in the database afterwards and PRAGMA integrity_check says ok."""
    ids = item_ids(workspace)
    for rnd in range(ROUNDS):
        answered, failed, threads = [], [], []
        for s, (port, token) in enumerate(servers):
            for t in range(THREADS):
                mine = [ids[(rnd + t * POSTS + k) % len(ids)] for k in range(POSTS)]
                threads.append(threading.Thread(target=client, args=(port, token, f"r{rnd}-s{s}-t{t}", mine,
                                                                     answered, failed)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check, stored = stored_verdicts(workspace)
        assert check == "ok", f"round {rnd}: {check}"
        missing = [v for v, _, _ in answered if stored.get((f"human:{v['reviewer']}", v["item_id"]))
                   != (v["result"], v["note"])]
        assert failed == [] and missing == [], f"round {rnd}: {len(missing)} answered verdicts lost, failed: {failed[:3]}"


@pytest.mark.parametrize("shown", ["no version", "null", 0])
def test_a_first_save_from_a_page_that_showed_no_verdict_is_refused_once_one_exists(workspace, servers, shown):
    """One reviewer, two tabs on an unanswered item (one tab on each server): both show no
    verdict and save at the same moment, 20 times. Exactly one save is answered 200 (version 1);
    the other is refused (409, current version 1), whether its page sent no version, null or 0."""
    ids, reviewer = item_ids(workspace), f"tabs-{shown}".replace(" ", "-")
    for rnd in range(ROUNDS):
        item_id, replies, start = ids[rnd % len(ids)], [], threading.Barrier(2)

        for port, token in servers:  # both pages show no verdict
            _, page = request(port, "GET", f"/api/item?id={item_id}&reviewer={reviewer}",
                              headers={"X-Review-Token": token})
            assert json.loads(page)["verdicts"] == {}

        def tab(port, token, label):
            verdict = {"reviewer": reviewer, "item_id": item_id, "round": 1, "note": label,
                       "result": {"labels": [label]}, **({} if shown == "no version" else
                                                         {"version": None if shown == "null" else shown})}
            start.wait(30)
            status, body = post(port, token, verdict)
            replies.append((status, json.loads(body), label))

        threads = [threading.Thread(target=tab, args=(*server, label))
                   for server, label in zip(servers, ("high_quality", "nonsense_prompt"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(status for status, _, _ in replies) == [200, 409], f"round {rnd}: {replies}"
        (saved,) = [label for status, _, label in replies if status == 200]
        assert [body.get("version", body.get("current")) for _, body, _ in replies] == [1, 1]
        check, stored = stored_verdicts(workspace)
        assert check == "ok" and stored[(f"human:{reviewer}", item_id)] == ({"labels": [saved]}, saved)
