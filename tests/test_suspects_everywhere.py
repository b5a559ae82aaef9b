"""Item validity where a user looks (issue 28 item 5): the filter conditions label_error,
several_correct, no_right_answer, easy and misfit, the `suspects` review queue and the
`item-stats` export, each against the contract functions on the study's ten models' released
full-mode scores for the first HellaSwag items (the report section: test_report_first_screen)."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from conftest import PAPER_SCORES, one_line_error, run_cli, small_workspace
from review_helpers import write_study_scores

N_ITEMS = 200


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = small_workspace(tmp_path_factory.mktemp("suspects") / "ws", N_ITEMS)
    write_study_scores(root, ("full",), sorted(p.stem for p in (PAPER_SCORES / "full_prompt").glob("*.csv")
                                               if not p.stem.startswith(("sum_", "byte_mean_"))))
    return root


@pytest.fixture(scope="module")
def expected(ws):
    """The item table the contract functions give on the same scores, by item id."""
    from curate.validity.item_table import item_table
    from scoring.store import open_scores, read_scores

    with open_scores(ws) as w:
        items, scores = w.items(), read_scores(w, modes=["full"])
    responses, table = item_table(scores, items, normalization="seq_mean")
    assert len(responses.models) == 10
    return responses.models, table.set_index("item_id")


def rules(models: list[str]) -> str:
    common = f"models: [{', '.join(models)}], mode: full, normalization: seq_mean"
    return f"""name: validity
stages:
  - {{name: label-error, description: default cut, when: {{label_error: {{{common}}}}}}}
  - {{name: several-correct, description: top 5%, when: {{several_correct: {{{common}, top_share: 0.05}}}}}}
  - {{name: no-right-answer, description: above 0.9, when: {{no_right_answer: {{{common}, above: 0.9}}}}}}
  - {{name: easy, description: every model sure, when: {{easy: {{{common}}}}}}}
  - {{name: misfit, description: negative discrimination, when: {{misfit: {{{common}}}}}}}
"""


def test_each_signal_is_a_filter_condition(ws, expected, tmp_path):
    models, table = expected
    path = tmp_path / "rules.yaml"
    path.write_text(rules(models))
    run_cli("filter", ws, "--rules", path, "--out", tmp_path / "out")
    decisions = pd.read_parquet(tmp_path / "out" / "decisions.parquet").set_index("item_id")
    matched = {stage: set(decisions.index[decisions["matched"].map(lambda m, s=stage: s in m)])
               for stage in ("label-error", "several-correct", "no-right-answer", "easy", "misfit")}
    several = table["several_correct_score"]
    assert matched["label-error"] == set(table.index[table["label_error_score"] > math.log(9)])
    assert matched["several-correct"] == set(table.index[several >= several.quantile(0.95, interpolation="higher")])
    assert matched["no-right-answer"] == set(table.index[table["no_right_answer_score"] > 0.9])
    assert matched["easy"] == set(table.index[table["easy"]])
    assert matched["misfit"] == set(table.index[table["discrimination"] < 0])
    assert 0 < len(matched["label-error"]) < N_ITEMS / 4 and matched["misfit"] and matched["several-correct"]


def test_a_validity_condition_on_an_unscored_model_is_one_line(ws, tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(rules(["EleutherAI/pythia-1b", "nobody/scored-this"]))
    proc = run_cli("filter", ws, "--rules", path, "--out", tmp_path / "out", check=False)
    one_line_error(proc, "nobody/scored-this")


def test_suspects_queue_puts_the_likeliest_errors_first(ws, expected):
    from curate.review.data import ReviewData
    from curate.review.queues import resolve

    _, table = expected
    ranked = table.sort_values("label_error_score", ascending=False, kind="stable")
    data = ReviewData.load(ws)
    queue = resolve(data, "suspects")
    assert queue == list(ranked.index[ranked["label_error_score"] > math.log(9)]) and queue
    assert resolve(data, "suspects:7") == list(ranked.index[:7])


def test_item_stats_export(ws, expected, tmp_path):
    from curate.validity.item_table import COLUMNS

    models, table = expected
    run_cli("export", ws, "item-stats", "--out", tmp_path / "stats.csv")
    out = pd.read_csv(tmp_path / "stats.csv")
    assert list(out.columns) == COLUMNS and len(out) == N_ITEMS
    assert out["row_index"].tolist() == list(range(N_ITEMS))
    got = out.set_index("item_id").loc[table.index]
    for column in ("difficulty", "irt_a", "irt_b", "label_error_score", "several_correct_score"):
        assert got[column].to_numpy() == pytest.approx(table[column].to_numpy(dtype=float), rel=1e-9, abs=1e-12)
    assert (got["suspected_option"] == table["suspected_option"]).all()
    assert set(out["normalization"]) == {"seq_mean"} and out["models"].iloc[0] == ", ".join(models)


@pytest.mark.slow
def test_the_demo_wrong_gold_plants_rank_high(tmp_path):
    """The demo scored as `make demo` scores it (SmolLM2-135M, full mode, float32): every planted
    wrong gold has a positive label-error score (the model prefers another option), 3 of 4 point
    at the true answer, and they rank in the top 9 of the 40 items, all of which are planted
    defects; at the default cut (odds of 9 to 1, meant for many models) one 135M model flags none
    of them. docs/report.md quotes these numbers."""
    from curate import demo
    from curate.validity.item_table import item_table
    from scoring.store import open_scores, read_scores
    from test_demo import INIT_ARGS

    ws = tmp_path / "ws"
    run_cli("init", ws, "--data", demo.benchmark_path(), *INIT_ARGS)
    run_cli("score", ws, "--model", "smollm2-135m", "--modes", "full", "--dtype", "float32")
    with open_scores(ws) as w:
        items, scores = w.items(), read_scores(w)
    _, table = item_table(scores, items)
    plants = demo.load_plants()
    table["kinds"] = [plants[it["row_index"]].kinds for it in items]
    ranked = table.sort_values("label_error_score", ascending=False, kind="stable").reset_index(drop=True)
    wrong = ranked[ranked["kinds"].map(lambda k: "wrong_gold" in k)]
    assert len(wrong) == 4 and (wrong["label_error_score"] > 0).all()
    assert wrong.index.max() < 9 and ranked["kinds"].head(9).map(bool).all()
    assert (wrong["label_error_score"] <= math.log(9)).all()
    true_gold = {it["item_id"]: plants[it["row_index"]].true_gold for it in items}
    assert (wrong["suspected_option"] == wrong["item_id"].map(true_gold)).sum() == 3
    positive = ranked[ranked["label_error_score"] > 0]
    assert len(positive) == 11 and (~positive["kinds"].map(bool)).sum() == 1  # one clean control
