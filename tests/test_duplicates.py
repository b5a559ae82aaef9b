"""Duplicate search (`curate duplicates`): planted copies found, exact copies checked against a
plain-Python reading of the raw files, the LSH index checked against an all-pairs comparison."""
from __future__ import annotations

import gzip
import json
import re
import tracemalloc
import unicodedata

import pandas as pd
import pytest

from conftest import HELLASWAG, SHARED, one_line_error, run_cli, seed_random_scores
from curate.items.adapters import get_adapter
from curate.items.duplicates import detect, plant
from curate.items.ingest import build_items
from curate.items.sources import open_source

BENCH = SHARED / "benchmarks"


def items_of(name: str, split: str, subject: str | None = None) -> list[dict]:
    source = open_source(str(BENCH / name), split=split)
    items, _ = build_items(source.rows, get_adapter(name), split=split, where=name)
    return [i for i in items if subject is None or i.get("source") == subject]


@pytest.fixture(scope="module")
def arc():
    return items_of("arc_challenge", "validation")


@pytest.fixture(scope="module")
def psychology():
    return items_of("mmlu", "test", "high_school_psychology")


@pytest.mark.parametrize("which", ["arc", "psychology"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_copies_are_found(request, which, seed):
    """2% copies, each with case, white space, punctuation, option order and one word changed."""
    items = request.getfixturevalue(which)
    assert len(items) > 250
    baseline = {k: c for (_, k), c in detect.clusters(detect.find_pairs([detect.entry(i, "w") for i in items])).items()}
    planted, key = plant.plant(items, 0.02, seed)
    pairs = detect.find_pairs([detect.entry(i, "w") for i in planted])
    recall, precision = plant.recall_precision(pairs, key, baseline)
    assert recall >= 0.98 and precision >= 0.95, (recall, precision)
    copy = next(iter(key))
    edited = next(i for i in planted if i["item_id"] == copy)
    original = next(i for i in items if i["item_id"] == key[copy])
    assert edited["context_parts"] != original["context_parts"] and sorted(edited["options"]) != sorted(original["options"])


def test_lsh_finds_every_pair_an_all_pairs_comparison_finds(arc):
    """The index only proposes candidates: on a small set, comparing every pair must add nothing."""
    planted, _ = plant.plant(arc, 0.05, 7)
    entries = [detect.entry(i, "w") for i in planted]
    texts = [detect._text(e) for e in entries]
    brute = set()
    for i in range(len(entries)):
        for j in range(i + 1, len(entries)):
            if detect._verdict(texts[i], texts[j], detect.THRESHOLD):
                brute.add(frozenset((entries[i].key, entries[j].key)))
    found = {frozenset((p.a, p.b)) for p in detect.find_pairs(entries)}
    assert brute and found == brute


def plain_normal(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]|_", " ", text).split())


def test_cli_finds_mmlu_dev_copies_in_its_other_splits(tmp_path):
    """Every MMLU dev question that the raw test/validation files hold again (same question text,
    same set of choices, after case/space/punctuation folding, found here with plain Python) is an
    exact pair; the export carries them; ARC-Easy, compared too, adds no MMLU copies."""
    ws = tmp_path / "ws"
    run_cli("init", ws, "--benchmark", "mmlu", "--data", BENCH / "mmlu", "--split", "dev")
    out = run_cli("duplicates", ws, "--splits", "all", "--against", f"arc_easy:{BENCH / 'arc_easy'}").stdout
    assert "compared split:test: 14042 items" in out and "compared arc_easy/validation: 570 items" in out
    assert "splits not in the source: train" in out

    def key(row):
        return plain_normal(row["question"]), tuple(sorted(plain_normal(c) for c in row["choices"]))

    dev = [json.loads(line) for line in gzip.open(BENCH / "mmlu" / "dev.jsonl.gz", "rt")]
    expected = set()
    for split in ("test", "validation"):
        index: dict = {}
        for n, line in enumerate(gzip.open(BENCH / "mmlu" / f"{split}.jsonl.gz", "rt")):
            index.setdefault(key(json.loads(line)), []).append(n)
        for d, row in enumerate(dev):
            expected |= {(f"mmlu/dev/{d}", f"mmlu/{split}/{n}") for n in index.get(key(row), [])}
    assert len(expected) >= 5

    run_cli("export", ws, "duplicates", "--out", tmp_path / "d.parquet")
    table = pd.read_parquet(tmp_path / "d.parquet")
    exact = table[table.exact]
    got = {tuple(sorted((r.item_a, r.item_b), key=lambda k: "/dev/" not in k)) for r in exact.itertuples()
           if "workspace" in (r.collection_a, r.collection_b) and {r.collection_a, r.collection_b} != {"workspace"}}
    assert got == expected
    assert not table.collection_a.str.startswith("arc_easy").any() and not table.collection_b.str.startswith("arc_easy").any()
    assert set(table.field) <= {"both", "question"} and (table.similarity >= detect.THRESHOLD).all()


def test_cli_refuses_what_it_cannot_compare(tmp_path):
    ws = tmp_path / "ws"
    run_cli("init", ws, "--benchmark", "arc_challenge", "--data", BENCH / "arc_challenge" / "validation.jsonl.gz")
    one_line_error(run_cli("duplicates", ws, "--against", "nosuchbench", check=False), "--against 'nosuchbench'",
                   "workspace folder")
    one_line_error(run_cli("duplicates", ws, "--splits", "test", check=False), "one file")
    out = run_cli("duplicates", ws).stdout  # one file, default splits: nothing else to read, said so
    assert "splits not in the source: train, dev, test" in out


def run_together(rows: list[dict], start: int, size: int) -> str:
    """HellaSwag contexts from row ``start`` on, run together into about ``size`` characters."""
    parts, end = [], start
    while sum(map(len, parts)) + len(parts) < size:
        parts.append(rows[end]["ctx"])
        end += 1
    return " ".join(parts)


@pytest.fixture(scope="module")
def huge_rows() -> list[dict]:
    """Six items of 110-140k characters (issue 36: 27 s and 441 MB before the caps): an item, its
    exact copy and a copy with three characters changed (at its start, middle and end); then three
    items of the same long passage, each starting a few contexts later, so that LSH proposes every
    pair of the six and only the edit distance tells them apart."""
    rows = [json.loads(line) for line in gzip.open(HELLASWAG, "rt")]
    text = run_together(rows, 0, 130_000)
    near = list(text)
    for at in (100, len(text) // 2, len(text) - 100):
        near[at] = "Q" if near[at].lower() != "q" else "Z"
    shifted = [run_together(rows, start, size) for start, size in ((5, 110_000), (10, 120_000), (15, 140_000))]
    return [{"id": f"huge{n}", "question": t, "choices": rows[2000]["endings"], "answer": 0}
            for n, t in enumerate([text, text, "".join(near), *shifted])]


class Counted:
    """rapidfuzz's Indel, recording the lengths of the two texts and the band (``score_cutoff``
    of a distance) of each comparison."""

    def __init__(self, indel, calls: list):
        self.indel, self.calls = indel, calls

    def __getattr__(self, name):
        def call(a, b, **kw):
            self.calls.append((len(a), len(b), kw.get("score_cutoff") if name == "distance" else None))
            return getattr(self.indel, name)(a, b, **kw)
        return call


def test_huge_items_cost_is_bounded_and_their_copies_still_found(huge_rows, monkeypatch):
    """The work for one huge item is capped: MinHash hashes at most 10,000 of its 5-grams, an
    edit distance over its whole text is banded to MAX_EDIT, and a full (unbanded) comparison reads
    at most 10,000 characters of each text; memory stays small. Its exact and near copies are
    still pairs, and the other four (the same passage shifted) are not."""
    from datasketch import MinHash

    assert all(len(r["question"]) > 110_000 for r in huge_rows)
    hashed, calls = [], []
    update_batch = MinHash.update_batch
    monkeypatch.setattr(MinHash, "update_batch", lambda self, b: (hashed.append(len(b)), update_batch(self, b))[1])
    monkeypatch.setattr(detect, "Indel", Counted(detect.Indel, calls))
    entries = [detect.entry({"item_id": r["id"], "context_parts": {"question": r["question"]},
                             "options": r["choices"]}, "w") for r in huge_rows]
    tracemalloc.start()
    try:
        pairs = detect.find_pairs(entries)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sum(hashed) <= 6 * 10_000, hashed
    full = [(a, b) for a, b, band in calls if band is None]
    assert all(band <= detect.MAX_EDIT for _, _, band in calls if band is not None), calls
    assert all(a <= 10_000 and b <= 10_000 for a, b in full), full
    assert peak < 100 * 2**20, f"{peak / 2**20:.0f} MB"
    got = {(p.a, p.b): p for p in pairs}
    assert set(got) == {("huge0", "huge1"), ("huge0", "huge2"), ("huge1", "huge2")}, got
    assert got["huge0", "huge1"].exact and got["huge0", "huge1"].similarity == 1.0
    near = got["huge0", "huge2"]
    assert not near.exact and near.field == "both" and 0.9999 < near.similarity < 1.0
    assert 0.9999 < near.question_similarity < 1.0 and near.options_similarity == 1.0


def test_cli_and_report_say_how_many_items_were_capped(huge_rows, tmp_path):
    """`curate duplicates` on the six huge items: the copies are found, and its output and the
    report's section say how many items were over the caps (seeded random scores stand in for a
    scoring run: analyze needs scores)."""
    data = tmp_path / "huge.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in huge_rows))
    ws = tmp_path / "ws"
    run_cli("init", ws, "--benchmark", "generic", "--name", "huge", "--data", data, "--question", "question",
            "--choices", "choices", "--answer", "answer", "--id-columns", "id")
    out = run_cli("duplicates", ws).stdout
    assert "3 pairs in 1 clusters of copies" in out, out
    assert "6 items over 10000 characters" in out, out
    seed_random_scores(ws)
    run_cli("analyze", ws, "--out", tmp_path / "report")
    section = json.loads((tmp_path / "report" / "metrics.json").read_text())["duplicates"]
    assert section["n_pairs"] == 3 and section["long_items"] == 6
    assert "6 items are over 10000 characters" in (tmp_path / "report" / "report.md").read_text()
