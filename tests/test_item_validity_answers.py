"""Answers without probabilities as item-validity evidence (issue 40): models that only answer
join the response matrix (curate.validity.responses.join_answers), IRT and the item statistics
read their right/wrong, and the label-error ranking pools them with the probability models.

Real data: the first 2000 HellaSwag items with the study's ten models' full-prompt scores; a
model's answers are its argmax under those scores (what it would have answered), stored through
scoring.answers.store_answers. The whole-benchmark measurement is benchmarks/answers_evidence.py.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from benchmarks.detectors_gold_moves import measure, plant_gold_moves
from conftest import PAPER_SCORES, run_cli, study_slice
from curate.validity.item_table import workspace_table
from curate.validity.responses import PROBABILITIES
from curate.validity.suspects import suspects
from scoring.answers import store_answers
from scoring.store import open_scores

SLICE = 2000
STRONG = ["OLMo-2-0325-32B-Instruct", "qwen-2.5-32b-instruct"]
SMALL = ["EleutherAI/pythia-1b", "HuggingFaceTB/SmolLM2-1.7B", "PleIAs/Pleias-1b-Preview", "Qwen/Qwen2.5-1.5B",
         "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "google/gemma-3-1b-pt", "ibm-granite/granite-3.1-1b-a400m-base",
         "meta-llama/Llama-3.2-1B"]
FLAKY = "flaky (answers)"   # two runs on the first 50 items: one right, one unreadable


def answered(name: str) -> str:
    return f"{name} (answers)"


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """2000 items, the ten models' scores, and every model's argmax stored again as the answers of
    a model named ``NAME (answers)``, plus ``FLAKY``."""
    ws = study_slice(tmp_path_factory.mktemp("answers"), SLICE)
    with open_scores(ws) as opened:
        items = opened.items()
    frames = []
    for name in STRONG + SMALL:
        file = PAPER_SCORES / "full_prompt" / (name.replace("/", "--") + ".csv")
        values = pd.read_csv(file, nrows=SLICE).to_numpy()
        frames.append(pd.DataFrame({"model": answered(name), "item_id": [it["item_id"] for it in items],
                                    "choice": values.argmax(axis=1), "run": "argmax"}))
    first = items[:50]
    frames.append(pd.DataFrame({"model": FLAKY, "item_id": [it["item_id"] for it in first] * 2,
                                "choice": [it["gold"] for it in first] + [None] * 50,
                                "run": ["seed=0"] * 50 + ["seed=1"] * 50}))
    stored = store_answers(ws, pd.concat(frames, ignore_index=True), model_source="table", info={"test": "argmax"})
    assert stored == 10 * SLICE + 100
    return ws


def table_of(ws, models):
    with open_scores(ws) as opened:
        responses, table, _ = workspace_table(opened, models=models)
    return responses, table


def ranking(responses, seed=0, rate=0.05):
    moved, planted = plant_gold_moves(responses, rate, seed)
    score = suspects(moved).set_index("item_id")["label_error_score"].reindex(moved.item_ids).to_numpy(float)
    return measure(score, planted)


def test_answers_join_the_matrix_and_irt_reads_their_right_and_wrong(ws):
    r, table = table_of(ws, SMALL + [answered(m) for m in STRONG])
    assert r.models == SMALL + sorted(answered(m) for m in STRONG)
    assert list(r.sources) == [PROBABILITIES] * 8 + ["table", "table"]
    assert r.answer_only.tolist() == [False] * 8 + [True, True]
    # an answer-only model's right/wrong is its argmax's: the study's own accuracy of the 32B models
    with open_scores(ws) as opened:
        ten, _, _ = workspace_table(opened, models=STRONG)
    assert np.array_equal(r.correct[8:], ten.correct.astype(float)[[STRONG.index(m.removesuffix(" (answers)"))
                                                                     for m in r.models[8:]]])
    # its probabilities: its accuracy on the option it chose, the rest even
    acc = r.correct[9].mean()
    chosen = r.probs[9, np.arange(SLICE), r.pred[9]]
    assert np.allclose(chosen, (acc * SLICE + 0.5) / (SLICE + 1)) and np.allclose(np.nansum(r.probs[9], axis=1), 1)
    assert table["irt_a"].notna().all() and table["difficulty"].between(0, 1).all()
    top = table.sort_values("label_error_score", ascending=False).iloc[0]["evidence"]
    assert {m["source"] for m in top["models"]} == {"answers", "probabilities"}
    assert [a["model"] for a in top["answers"]] == [answered(m) for m in STRONG]  # strongest first
    json.dumps(top)


def test_strong_answer_only_models_improve_the_ranking_of_planted_errors(ws):
    """The eight ~1B models' probabilities alone, then with the two 32B models' answers joined."""
    small, _ = table_of(ws, SMALL)
    joined, _ = table_of(ws, SMALL + [answered(m) for m in STRONG])
    without, with_answers = ranking(small), ranking(joined)
    assert with_answers["auroc"] > without["auroc"] + 0.02, (without, with_answers)
    assert with_answers["precision_at_k"] > without["precision_at_k"] + 0.05, (without, with_answers)


def test_weak_answer_only_models_do_not_drown_probability_evidence(ws):
    """The ten models' probabilities, then with the eight ~1B models' answers too: the ranking
    barely moves (the weights follow accuracy, and a weak model's answers weigh as little as its
    probabilities)."""
    ten, _ = table_of(ws, STRONG + SMALL)
    joined, _ = table_of(ws, STRONG + SMALL + [answered(m) for m in SMALL])
    base, more = ranking(ten), ranking(joined)
    assert more["auroc"] >= base["auroc"] - 0.005
    assert more["precision_at_k"] >= base["precision_at_k"] - 0.02


def test_unreadable_answers_are_counted_and_runs_are_the_models_agreement_with_itself(ws, tmp_path):
    r, table = table_of(ws, SMALL + [FLAKY])
    flaky = r.models.index(FLAKY)
    assert r.sources[flaky] == "table" and r.models[:8] == SMALL
    # answered 50 items, one run right, one unreadable: half right (unreadable counts as not
    # correct); the other items it did not answer: no right/wrong, no probability
    assert np.allclose(r.correct[flaky, :50], 0.5) and np.isnan(r.correct[flaky, 50:]).all()
    assert np.isnan(r.probs[flaky, 50:]).all() and (r.pred[flaky, :50] == r.gold[:50]).all()
    by_item = table.set_index("item_id")
    assert (by_item["unparsed_answers"].iloc[:50] == 1).all() and (by_item["unparsed_answers"].iloc[50:] == 0).all()
    evidence = by_item["evidence"].iloc[0]
    assert evidence["answers"] == [{"model": FLAKY, "from": "table", "runs": {str(r.gold[0]): 1}, "unparsed": 1}]
    # the export names the answer-only models apart from the models with probabilities
    out = tmp_path / "stats.csv"
    run_cli("export", ws, "item-stats", "--out", out)
    exported = pd.read_csv(out)
    expected = sorted([answered(m) for m in STRONG + SMALL])
    assert exported["answer_models"].iloc[0].split(", ") == [f"{m} (table)" for m in expected]
    assert "(answers)" not in exported["models"].iloc[0]
    # read with every model (none named), the flaky model's 50 of 2000 items set it apart, as a model
    # scored on a fraction of the items is (issue 44): its unreadable replies are not counted there
    assert f"{FLAKY} (answers): answered 50 of {SLICE} items" in exported["set_apart"].iloc[0]
    assert exported["unparsed_answers"].sum() == 0


def test_filter_kinds_pool_the_answers_they_name(ws, tmp_path):
    """label_error with `answers:` flags the items the pooled table ranks highest; an answer-only
    model without stored answers stops the filter in one line."""
    from conftest import one_line_error

    names = ", ".join(f'"{m}"' for m in SMALL)
    strong = ", ".join(f'"{answered(m)}"' for m in STRONG)
    rules = tmp_path / "rules.yaml"
    rules.write_text("name: r\nstages:\n  - {name: s, description: d, when: {label_error: {models: [" + names
                     + "], answers: [" + strong + "], mode: full, normalization: seq_mean, top_share: 0.01}}}\n")
    run_cli("filter", ws, "--rules", rules, "--out", tmp_path / "f")
    flagged = set(pd.read_parquet(tmp_path / "f" / "decisions.parquet").query("not kept")["item_id"])
    _, table = table_of(ws, SMALL + [answered(m) for m in STRONG])
    top = table.sort_values("label_error_score", ascending=False)["item_id"].head(len(flagged))
    assert len(flagged) == 20 and flagged == set(top)
    rules.write_text(rules.read_text().replace(answered(STRONG[0]), "nobody (answers)"))
    one_line_error(run_cli("filter", ws, "--rules", rules, "--out", tmp_path / "g", check=False),
                   "no stored answers of model 'nobody (answers)'")


def test_the_answers_a_filter_read_are_in_its_summary_and_a_change_is_caught(ws, tmp_path):
    """The decisions' summary names the answer-only models read, their runs and a digest of their
    answers; answers stored again with another choice afterwards are a changed input (a release
    refuses decisions made from other numbers)."""
    from curate.filter.inputs import changed_inputs
    from curate.items.store import Workspace
    from scoring.answers import read_answers, store_answers

    copy = tmp_path / "ws"
    shutil.copytree(ws, copy)
    model = answered(STRONG[0])
    rules = tmp_path / "rules.yaml"
    rules.write_text("name: r\nstages:\n  - {name: s, description: d, when: {label_error: {models: ["
                     + ", ".join(f'"{m}"' for m in SMALL) + f'], answers: ["{model}"], mode: full, '
                     "normalization: seq_mean, top_share: 0.01}}}\n")
    run_cli("filter", copy, "--rules", rules, "--out", tmp_path / "f")
    summary = json.loads((tmp_path / "f" / "summary.json").read_text())
    [entry] = summary["inputs"]["answers"]
    assert entry["model"] == model and entry["answers"] == SLICE and entry["run_ids"] and \
        entry["answers_sha256"].startswith("sha256:")
    with Workspace.open(copy) as w:
        assert changed_inputs(w, summary["inputs"]) is None
    mine = read_answers(copy).query("model == @model").head(1).copy()
    mine["choice"] = (mine["choice"] + 1) % 4
    store_answers(copy, mine[["model", "item_id", "choice", "run"]], model_source="table", info={})
    with Workspace.open(copy) as w:
        assert changed_inputs(w, summary["inputs"]) == f"the stored answers of {model!r}"
