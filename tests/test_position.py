"""The position audit: gold-position skew (SciQ puts the gold last on every item) and accuracy
with the options in every cyclic order, in the report and as a filter condition."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import SHARED, run_cli, save_tiny
from curate.analyses import position
from scoring import rotations

BENCHMARKS = SHARED / "benchmarks"


def items_of(name, folder, limit=None):
    import gzip
    from curate.items.adapters import get_adapter
    adapter = get_adapter(name)
    with gzip.open(BENCHMARKS / folder / "validation.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh][:limit]
    return [adapter.to_item(r, i, "validation") for i, r in enumerate(rows)]


def test_sciq_gold_always_last_is_flagged():
    table = position.gold_positions(items_of("sciq", "sciq"))
    [row] = table.to_dict("records")
    assert row["counts"] == [0, 0, 0, 1000] and row["skewed"] and row["most_common"] == "D"
    assert row["p"] == 0 and row["log10_p"] < -600  # beyond double precision, still a number


def test_arc_is_tested_per_option_count_and_not_flagged():
    table = position.gold_positions(items_of("arc_easy", "arc_easy"))
    assert table["n_options"].tolist() == [3, 4, 5] and table["n"].sum() == 570
    four = table[table["n_options"] == 4].iloc[0]
    assert not four["skewed"] and four["p"] > 0.05


def test_uniformity_by_hand():
    test = position.uniformity([10, 10, 10, 30])
    assert test["chi2"] == pytest.approx(3 * 25 / 15 + 15 ** 2 / 15) and test["dof"] == 3
    assert test["p"] == pytest.approx(np.exp(test["log10_p"] * np.log(10)))


def test_rotation_table_by_hand():
    """Two 2-option items; the model always picks the first letter shown: right in one rotation
    of each item, a pure position bias."""
    rows = []
    for item, gold in (("i0", 0), ("i1", 1)):
        for rotation, formulation in enumerate(("letters", "letters+r1")):
            pred = (0 - rotation) % 2  # the option shown at position A
            rows.append({"model": "m", "mode": "full", "formulation": formulation, "normalization": "sum",
                         "item_id": item, "row_index": int(item[1]), "source": None, "pred": pred, "gold": gold,
                         "correct": pred == gold})
    preds = pd.DataFrame(rows)
    sizes = pd.Series({"i0": 2, "i1": 2})
    [row] = position.rotation_table(preds, sizes).to_dict("records")
    assert row["accuracy_over_rotations"] == 0.5 and row["right_in_every_rotation"] == 0.0
    assert row["picked_letter_shares"] == [1.0, 0.0] and row["accuracy_original_order"] == 0.5
    counts = rotations.item_rotation_counts(preds, sizes)
    assert counts["right"].tolist() == [1, 1] and counts["complete"].all()


def test_sciq_workspace_report_and_rotation_filter(tmp_path):
    """`curate analyze` on a SciQ workspace reports the skew with a p-value; with rotated-letters
    scores it reports accuracy over rotations, and a rule removes the items a model answers
    right in at most half of the orders."""
    from scoring.models import load_tokenizer, resolve

    ws = tmp_path / "ws"
    run_cli("init", ws, "--benchmark", "sciq", "--data", BENCHMARKS / "sciq" / "validation.jsonl.gz", "--limit", "8")
    # A seeded tiny random Llama with SmolLM2's tokenizer: the bookkeeping, not the model, is tested.
    model = save_tiny(tmp_path / "tiny", "llama", load_tokenizer(resolve("smollm2-135m")))
    score = ("score", ws, "--model", model, "--label", "tiny", "--modes", "full", "--no-seq-mean", "--quiet")
    run_cli(*score, "--formulations", "cloze,letters+rotations", "--limit", "6")
    rules = tmp_path / "rules.yaml"
    rules.write_text("name: rotation\nstages:\n  - name: order-sensitive\n    when:\n      rotated_correct:\n"
                     "        models: [tiny]\n        mode: full\n        normalization: sum\n"
                     "        at_most: 0.5\n")
    proc = run_cli("filter", ws, "--rules", rules, "--out", tmp_path / "d", check=False)
    assert proc.returncode == 2 and "2 of 8 items lack scores in some rotation" in proc.stderr, proc.stderr
    run_cli(*score, "--formulations", "cloze,letters+rotations")
    out = tmp_path / "report"
    run_cli("analyze", ws, "--out", out)
    metrics = json.loads((out / "metrics.json").read_text())
    [gold] = metrics["position"]["gold"]
    assert gold["counts"] == [0, 0, 0, 8] and gold["skewed"] and 0 < gold["p"] < 1e-4
    report = (out / "report.md").read_text()
    assert "Gold-position skew" in report and "gold at D in 100.0% of items, p = 2.50e-05" in report
    [rot] = metrics["position"]["rotations"]
    assert rot["n"] == 8 and 0 <= rot["accuracy_over_rotations"] <= 1 and len(rot["picked_letter_shares"]) == 4
    assert metrics["settings"]["formulations"] == ["cloze", "letters", "letters+r1", "letters+r2", "letters+r3"]
    assert metrics["agreement"]["formulations"][0]["formulation_a"] == "cloze"
    assert metrics["comparisons"]["formulations"]["families"][0]["formulation_b"] == "letters"
    run_cli("filter", ws, "--rules", rules, "--out", tmp_path / "d")
    decisions = pd.read_parquet(tmp_path / "d" / "decisions.parquet")
    counts = rotations.item_rotation_counts(_preds(ws), pd.Series({f"sciq/validation/{i}": 4 for i in range(8)}))
    assert list(~decisions["kept"]) == list(counts["right"] / 4 <= 0.5)
    summary = json.loads((tmp_path / "d" / "summary.json").read_text())
    assert "letters+r3" in json.dumps(summary)


def _preds(ws):
    from curate.items.store import Workspace
    from scoring.normalize import predictions
    from scoring.store import read_scores
    with Workspace.open(ws) as w:
        preds = predictions(read_scores(w, formulations=["letters", "letters+r1", "letters+r2", "letters+r3"]), "sum")
    return preds.assign(correct=preds["pred"] == 3)
