"""Duplicate search (`curate duplicates`): planted copies found, exact copies checked against a
plain-Python reading of the raw files, the LSH index checked against an all-pairs comparison."""
from __future__ import annotations

import gzip
import json
import re
import unicodedata

import pandas as pd
import pytest

from conftest import SHARED, one_line_error, run_cli
from curate.adapters import get_adapter
from curate.duplicates import detect, plant
from curate.ingest import build_items
from curate.sources import open_source

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
