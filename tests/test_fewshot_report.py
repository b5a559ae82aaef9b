"""The report's shot-count section (curate/analyses/sections/fewshot.py) and the export, on
COPA items with 0-shot and 5-shot scores written through the store (a test double for the
model: 0-shot always picks option 0, 5-shot always the gold)."""
from __future__ import annotations

import pandas as pd
import pytest

from conftest import SHARED, run_cli


@pytest.fixture(scope="module")
def copa_two_shots(tmp_path_factory):
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from scoring.store import add_run, open_scores, write_scores
    ws = Ingest(tmp_path_factory.mktemp("fs") / "ws",
                IngestOptions(data=str(SHARED / "benchmarks" / "copa" / "validation.jsonl.gz"), limit=30),
                get_adapter("copa")).run()
    with open_scores(ws) as w, w.transaction():
        add_run(w, run_id="r", model="m", origin="scored", info={})
        items = w.items()
        for k in (0, 5):
            write_scores(w, [{"model": "m", "mode": "full", "fewshot": k, "item_id": it["item_id"], "option_index": j,
                              "logprob_sum": -1.0 if j == (it["gold"] if k else 0) else -2.0, "n_tokens": 1,
                              "n_chars": 1, "n_bytes": 1, "content_hash": it["content_hash"], "run_id": "r"}
                             for it in items for j in range(2)])
    return ws, items


def test_accuracy_per_shot_count_tests_and_flips(copa_two_shots, tmp_path):
    from curate.analyses.report import Analyze
    from curate.analyses.options import AnalyzeOptions
    ws, items = copa_two_shots
    m = Analyze(ws, AnalyzeOptions(out=tmp_path / "report", normalization="sum", modes=["full"],
                                   core_mode="none")).run()
    f = m["fewshot"]
    golds = [it["gold"] for it in items]
    by = {r["fewshot"]: r for r in f["by_shots"]}
    assert f["present"] and f["shot_counts"] == [0, 5]
    assert by[0]["accuracy"] == pytest.approx(golds.count(0) / 30) and by[5]["accuracy"] == 1.0
    assert by[0]["ci_low"] < by[0]["accuracy"] < by[0]["ci_high"]
    [fam] = f["comparisons"]
    [row] = fam["rows"]
    assert (fam["fewshot_a"], fam["fewshot_b"]) == (0, 5) and row["only_b"] == golds.count(1) and row["only_a"] == 0
    assert row["p_holm"] == pytest.approx(row["p_mcnemar"])  # one model: nothing to correct across
    [agree] = f["agreement"]
    assert agree["wrong_to_right"] == golds.count(1) and agree["right_to_wrong"] == 0
    assert {x["item_id"] for x in agree["flipped_items"]} == {it["item_id"] for it in items if it["gold"] == 1}
    assert agree["same_prediction"] == pytest.approx(golds.count(0) / 30)
    # The other sections read the 0-shot scores alone.
    acc = pd.DataFrame(m["accuracy"]["rows"])
    assert set(acc.loc[acc["subset"] == "all", "accuracy"]) == {golds.count(0) / 30}
    text = (tmp_path / "report" / "report.md").read_text()
    assert "Shot counts" in text and "0-shot (a) vs 5-shot (b)" in text


def test_one_shot_count_shows_no_section(tmp_path):
    from curate.analyses.sections import Context, fewshot
    ctx = Context(root=tmp_path, out=tmp_path, items=[], gold=pd.Series(dtype=int), round1=None, round2=None,
                  gens=None, gen_runs=None, alpha=0.05, n_resamples=100, seed=0,
                  fewshot_scores=pd.DataFrame({"fewshot": [0, 0]}))
    assert fewshot.compute(ctx) == {"fewshot": {"present": False}}
    assert fewshot.render({"fewshot": {"present": False}}, 1, tmp_path) == []


def test_export_carries_the_shot_count(copa_two_shots, tmp_path):
    ws, _ = copa_two_shots
    run_cli("export", ws, "scores", "--out", tmp_path / "s.csv")
    frame = pd.read_csv(tmp_path / "s.csv")
    assert frame.groupby("fewshot").size().to_dict() == {0: 60, 5: 60}


@pytest.mark.parametrize("k, kept", [(0, "gold 1"), (5, "none")])
def test_a_filter_condition_names_the_shot_count(copa_two_shots, tmp_path, k, kept):
    """correct: {fewshot: K} reads the K-shot predictions: 0-shot the model is right where the
    gold is option 0 (those items are removed), 5-shot everywhere."""
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions
    ws, items = copa_two_shots
    rules = tmp_path / "rules.yaml"
    rules.write_text("name: shots\nstages:\n  - name: right\n    when: {correct: {models: [m], mode: full, "
                     f"normalization: sum, fewshot: {k}, at_least: 1}}}}\n")
    summary = Filter(ws, FilterOptions(rules=rules, out=tmp_path / "out")).run()
    assert summary["kept"] == (sum(it["gold"] == 1 for it in items) if kept == "gold 1" else 0)
    [run] = summary["inputs"]["score_runs"]
    assert run["run_id"] == "r" and run.get("fewshots", [0]) == [k]


def test_item_validity_kinds_read_the_named_shot_count(copa_two_shots):
    """The item statistics behind easy, misfit, label_error ... come from the K-shot scores
    when a condition names fewshot: K (0-shot the model is right where the gold is option 0)."""
    from curate.filter.inputs import Inputs
    from curate.filter.kinds import _validity
    from curate.items.store import Workspace
    ws, items = copa_two_shots
    with Workspace.open(ws) as w:
        inputs = Inputs(w)
        spec = {"models": ["m"], "mode": "full", "normalization": "sum"}
        zero, five = (_validity.table(spec | {"fewshot": k}, inputs) for k in (0, 5))
    assert list(zero["difficulty"]) == [float(it["gold"] == 0) for it in items]
    assert set(five["difficulty"]) == {1.0}
