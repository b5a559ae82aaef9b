"""Duplicates where a user looks: the `duplicate` filter condition, the report section and the
review queue, on a small benchmark written with known copies."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import one_line_error, run_cli, seed_random_scores

TOPICS = ["volcano", "river", "glacier", "desert", "forest", "canyon", "island", "prairie", "swamp", "reef"]


def row(i: int) -> dict:
    t = TOPICS[i % 10]
    return {"id": f"q{i}", "question": f"Which statement about the {t} number {i * 7 + 3} seen by team {chr(65 + i)} "
                                       f"in survey {i * 13} is correct?",
            "choices": [f"It is {t} fact {i}-{j} with detail {i * j + 1}" for j in range(4)], "answer": i % 4}


def copy_of(i: int, key: str) -> dict:
    """Row i again, as a careless re-entry: upper case, options reversed, a word changed."""
    r = row(i)
    return {"id": key, "question": r["question"].upper().replace("STATEMENT", "CLAIM"),
            "choices": r["choices"][::-1], "answer": 3 - r["answer"]}


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def init(tmp_path, name, rows):
    ws = tmp_path / name
    run_cli("init", ws, "--benchmark", "generic", "--name", name, "--data", write(tmp_path / f"{name}.jsonl", rows),
            "--question", "question", "--choices", "choices", "--answer", "answer", "--id-columns", "id")
    return ws


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """Rows 0-24, then copies of rows 3 and 7 (and a copy of the copy of 3); another benchmark
    holds a copy of row 11 among rows of its own."""
    tmp = tmp_path_factory.mktemp("dups")
    rows = [row(i) for i in range(25)] + [copy_of(3, "c3"), copy_of(7, "c7"), copy_of(3, "c3b")]
    ws = init(tmp, "bench", rows)
    other = init(tmp, "other", [row(i) for i in range(40, 50)] + [copy_of(11, "x11")])
    out = run_cli("duplicates", ws, "--against", other).stdout
    return tmp, ws, out


def test_search_finds_the_known_copies(searched):
    tmp, ws, out = searched
    run_cli("export", ws, "duplicates", "--out", tmp / "pairs.jsonl")
    pairs = [json.loads(line) for line in (tmp / "pairs.jsonl").read_text().splitlines()]
    got = {frozenset((p["item_a"], p["item_b"])) for p in pairs}
    assert got == {frozenset(p) for p in [("bench/validation/3", "bench/validation/25"),
                                          ("bench/validation/3", "bench/validation/27"),
                                          ("bench/validation/25", "bench/validation/27"),
                                          ("bench/validation/7", "bench/validation/26"),
                                          ("bench/validation/11", "other/validation/10")]}, pairs
    assert "compared workspace:other: 11 items" in out


def test_filter_condition_keeps_the_first_copy(searched, tmp_path):
    _, ws, _ = searched
    rules = tmp_path / "rules.yaml"
    rules.write_text("name: dedup\nstages:\n  - name: copies\n    when:\n      duplicate: {scope: [within]}\n"
                     "  - name: elsewhere\n    when:\n      duplicate: {scope: [cross], min_similarity: 0.9}\n")
    run_cli("filter", ws, "--rules", rules, "--out", tmp_path / "out")
    decisions = pd.read_parquet(tmp_path / "out" / "decisions.parquet")
    removed = decisions[~decisions["kept"].astype(bool)]
    by_stage = removed.groupby("first_stage").size().to_dict()
    assert by_stage == {"copies": 3, "elsewhere": 1}, removed
    ids = set(removed.index if removed.index.name == "item_id" else removed["item_id"])
    assert ids == {"bench/validation/25", "bench/validation/26", "bench/validation/27", "bench/validation/11"}


def test_filter_condition_without_a_search_is_one_line(tmp_path):
    ws = init(tmp_path, "plain", [row(i) for i in range(5)])
    rules = tmp_path / "rules.yaml"
    rules.write_text("name: dedup\nstages:\n  - name: copies\n    when:\n      duplicate: {}\n")
    one_line_error(run_cli("filter", ws, "--rules", rules, "--out", tmp_path / "out", check=False),
                   "run `curate duplicates")


def test_review_queue_lists_copies_closest_first(searched):
    from curate.review.data import ReviewData
    from curate.review.queues import available, resolve

    _, ws, _ = searched
    data = ReviewData.load(ws)
    queue = resolve(data, "duplicates")
    assert set(queue) == {f"bench/validation/{n}" for n in (3, 7, 11, 25, 26, 27)}
    assert resolve(data, "duplicates:cross") == ["bench/validation/11"]
    assert {q["name"]: q["items"] for q in available(data, pd.DataFrame())}["duplicates"] == 6


def test_report_has_a_duplicates_section(searched, tmp_path):
    """Seeded random scores stand in for a scoring run (analyze needs scores); the section reads
    only the stored pairs."""
    _, ws, _ = searched
    seed_random_scores(ws)
    run_cli("analyze", ws, "--out", tmp_path / "report")
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_text())
    d = metrics["duplicates"]
    assert d["n_pairs"] == 5 and d["workspace_items_in_pairs"] == 6 and d["n_items"] == 28
    assert "duplicates" in metrics["about"]
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Duplicate items" in report and "duplicate_pairs.csv" in report
    assert len(pd.read_csv(tmp_path / "report" / "duplicate_pairs.csv")) == 5
