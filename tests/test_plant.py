"""`curate plant` and `curate plant evaluate` on the demo benchmark: planting is seeded and
reproducible, the key says exactly what changed, nothing in the planted workspace gives the key
away, scores are copied or re-scored as they should be, and evaluate's numbers equal an
independent computation (scikit-learn's AUROC, a hand count of precision@k)."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score  # imported before the CLI fork server starts (it sets KMP_*)
from conftest import copy_ws, one_line_error, run_cli, save_tiny, seed_random_scores, small_workspace

import schemas
from curate import demo
from curate.plant import KINDS
from curate.plant.evaluate import auroc, hits_at_k, measure
from curate.items.store import Workspace
from scoring.store import open_scores, read_scores
from test_demo import INIT_ARGS

ALL = ",".join(KINDS)


@pytest.fixture(scope="module")
def demo_ws(tmp_path_factory):
    ws = tmp_path_factory.mktemp("plant") / "ws"
    run_cli("init", ws, "--data", demo.benchmark_path(), *INIT_ARGS)
    return ws


def plant(src, dst, *args, check=True):
    return run_cli("plant", src, dst, *args, check=check)


def key_of(dst) -> dict:
    return json.loads(dst.with_name(dst.name + ".plant-key.json").read_text())


def items_of(ws) -> list[dict]:
    with Workspace.open(ws) as w:
        return w.items()


def test_planting_is_seeded_reproducible_and_the_key_is_what_changed(demo_ws, tmp_path):
    proc = plant(demo_ws, tmp_path / "a", "--rate", "0.05", "--seed", "3")
    assert "planted 8 of 40 items (gold_move 2, several_correct 2, no_right_answer 2, swapped_question 2)" in proc.stdout
    plant(demo_ws, tmp_path / "b", "--rate", "0.05", "--seed", "3")
    plant(demo_ws, tmp_path / "c", "--rate", "0.05", "--seed", "4")
    key = key_of(tmp_path / "a")
    schemas.read_checked(tmp_path / "a.plant-key.json", "plant-key")
    assert key["planted"] == key_of(tmp_path / "b")["planted"] != key_of(tmp_path / "c")["planted"]
    assert items_of(tmp_path / "a") == items_of(tmp_path / "b")

    before = {it["item_id"]: it for it in items_of(demo_ws)}
    after = {it["item_id"]: it for it in items_of(tmp_path / "a")}
    planted = {p["item_id"]: p for p in key["planted"]}
    changed = {i for i in before if before[i] != after[i]}
    assert changed == set(planted) and len(planted) == 8
    for item_id, p in planted.items():
        old, new = before[item_id], after[item_id]
        assert old["gold"] == p["gold"] and new["gold"] == p["new_gold"]
        differing = [j for j, (a, b) in enumerate(zip(old["options"], new["options"])) if a != b]
        if p["kind"] == "gold_move":
            assert new["options"] == old["options"] and new["gold"] != old["gold"] and new["prompts"] == old["prompts"]
        elif p["kind"] == "several_correct":
            (j,) = p["changed_options"]
            assert differing in ([j], []) and j != old["gold"]  # an exact copy of a same-text option changes nothing
            assert new["options"][j].lower().rstrip(". ") == old["options"][old["gold"]].lower().rstrip(". ")
        elif p["kind"] == "no_right_answer":
            assert differing == p["changed_options"] == [old["gold"]]
            assert new["options"][old["gold"]] in before[p["donor"]]["options"]
        else:
            assert new["options"] == old["options"] and new["prompts"] == before[p["donor"]]["prompts"]
        assert new["content_hash"] != old["content_hash"]


def test_nothing_in_the_planted_workspace_gives_the_key_away(demo_ws, tmp_path):
    """Every table of workspace.db, searched for the key's words; raw rows rewritten for every
    item alike (the source rows would hold the original answers); the key outside the folder."""
    dst = tmp_path / "p"
    plant(demo_ws, dst, "--rate", "0.1", "--seed", "7")
    key = key_of(dst)
    assert not any(dst.rglob("*key*"))
    db = sqlite3.connect(dst / "workspace.db")
    dump = "\n".join(db.iterdump())
    for word in [*KINDS, "\"seed\"", *(p["note"] for p in key["planted"])]:
        assert word not in dump, word
    with Workspace.open(dst) as w:
        for item, raw in zip(w.items(), w.raw_rows()):
            assert raw == {k: item[k] for k in ("item_id", "context_parts", "options", "gold")}
        assert "planted" in w.meta("planted")["note"] and "seed" not in w.meta("planted")


def test_scores_are_copied_with_gold_moves_and_refused_or_dropped_where_options_changed(demo_ws, tmp_path):
    src = copy_ws(demo_ws, tmp_path / "src")
    seed_random_scores(src, models=("m/a", "m/b"))
    dst = tmp_path / "gold"
    plant(src, dst, "--kinds", "gold_move", "--rate", "0.1", "--seed", "1")
    with open_scores(src) as a, open_scores(dst) as b:
        old, new = read_scores(a), read_scores(b)
    moved = {p["item_id"] for p in key_of(dst)["planted"]}
    value = ["model", "item_id", "option_index", "seq_mean"]
    pd.testing.assert_frame_equal(old[value], new[value])  # every score, the gold moves' too
    hashes = {it["item_id"]: it["content_hash"] for it in items_of(dst)}
    assert (new["content_hash"] == new["item_id"].map(hashes)).all()  # fresh for the planted items: no re-score
    assert set(new.loc[new["content_hash"] != old["content_hash"], "item_id"]) == moved

    # imported scores of changed options cannot be recomputed: refused, nothing left behind
    proc = plant(src, tmp_path / "all", "--kinds", ALL, "--seed", "1", check=False)
    one_line_error(proc, "model 'm/a'", "--drop-unscored")
    assert not (tmp_path / "all").exists() and not (tmp_path / "all.plant-key.json").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    # dropping both would leave no scores: refused too (test_drop_unscored_refuses_to_leave_no_scores_...)
    proc = plant(src, tmp_path / "all", "--kinds", ALL, "--seed", "1", "--drop-unscored", check=False)
    one_line_error(proc, "every model (m/a, m/b)")
    assert not (tmp_path / "all").exists() and not (tmp_path / "all.plant-key.json").exists()


def test_changed_options_are_rescored_and_the_rest_copied(demo_ws, tmp_path):
    """A local model (a seeded 2-layer llama with SmolLM2's tokenizer, through the real engine)
    scored the source; planting with --model re-scores only the changed items, and a copied gold
    option scores exactly as the gold does."""
    from scoring.models import load_tokenizer, resolve

    model = str(save_tiny(tmp_path / "tiny", "llama", load_tokenizer(resolve("smollm2-135m"))))
    src = copy_ws(demo_ws, tmp_path / "src")
    run_cli("score", src, "--model", model, "--modes", "full", "--quiet")
    dst = tmp_path / "p"
    proc = plant(src, dst, "--rate", "0.05", "--seed", "3", "--model", model, "--quiet")
    key = key_of(dst)
    changed = {p["item_id"] for p in key["planted"] if p["changed_options"]}
    assert f"re-scored {model}: {len(changed)} units computed" in proc.stdout
    with open_scores(src) as a, open_scores(dst) as b:
        old, new = read_scores(a).set_index(["item_id", "option_index"]), read_scores(b)
    assert len(new) == len(old)
    new = new.set_index(["item_id", "option_index"])
    same = [i for i in old.index if i[0] not in changed]
    assert (new.loc[same, "logprob_sum"] == old.loc[same, "logprob_sum"]).all()
    assert (new.loc[same, "run_id"] == old.loc[same, "run_id"]).all()
    assert set(new.loc[[i for i in new.index if i[0] in changed], "run_id"]) != set(old["run_id"])
    after = {it["item_id"]: it for it in items_of(dst)}
    for p in key["planted"]:
        item = after[p["item_id"]]
        if p["kind"] == "several_correct" and item["options"][p["changed_options"][0]] == item["options"][item["gold"]]:
            copy, gold = new.loc[(p["item_id"], p["changed_options"][0])], new.loc[(p["item_id"], item["gold"])]
            assert copy["logprob_sum"] == pytest.approx(gold["logprob_sum"], abs=1e-4)


def test_the_key_stays_out_and_belongs_to_its_workspace(demo_ws, tmp_path):
    one_line_error(plant(demo_ws, tmp_path / "p", "--key", tmp_path / "p" / "k.json", check=False),
                   "inside the new workspace")
    plant(demo_ws, tmp_path / "p", "--key", tmp_path / "k.json")
    one_line_error(plant(demo_ws, tmp_path / "q", "--key", tmp_path / "k.json", check=False), "already exists")
    plant(demo_ws, tmp_path / "q", "--seed", "9")
    proc = run_cli("plant", "evaluate", tmp_path / "q", "--key", tmp_path / "k.json", check=False)
    one_line_error(proc, "k.json", "belongs to another workspace")
    one_line_error(plant(demo_ws, tmp_path / "r", "--kinds", "gold_move,nonsense", check=False),
                   "unknown plant kind(s) nonsense")


def test_the_key_schema_names_the_kinds():
    assert schemas.load("plant-key")["$defs"]["kind"]["enum"] == list(KINDS)


def test_hits_at_k_counts_ties_at_the_cut_by_their_share():
    scores = np.array([0.9, 0.5, 0.5, 0.5, 0.1, np.nan])
    positive = np.array([True, True, False, False, False, True])
    assert hits_at_k(scores, positive, 1) == 1
    assert hits_at_k(scores, positive, 3) == pytest.approx(1 + 2 / 3)  # two of three tied items, one positive
    assert hits_at_k(scores, positive, 6) == 3


def test_auroc_equals_scikit_learns_with_ties_and_missing_scores():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, 300).astype(float)
    scores[rng.choice(300, 20, replace=False)] = np.nan
    positive = rng.random(300) < 0.2
    lowest = np.where(np.isnan(scores), -1.0, scores)
    assert auroc(scores, positive) == pytest.approx(roc_auc_score(positive, lowest), abs=1e-12)


def test_measure_against_a_hand_count():
    ids = [f"i{n}" for n in range(8)]
    key = pd.DataFrame({"item_id": ["i0", "i1", "i2"], "kind": ["gold_move", "gold_move", "several_correct"]})
    detector = pd.Series([0.9, 0.2, 0.8, 0.7, 0.1, 0.3, 0.0, 0.4], index=ids)
    table = measure({"d": ("scores", detector)}, key, ids).set_index("kind")
    # gold_move: pool i0, i1 and the unplanted i3..i7; the top 2 are i0 (0.9), i3 (0.7)
    assert table.loc["gold_move", ["k", "precision_at_k", "recall_at_k", "unplanted_above", "n"]].tolist() == \
           [2, 0.5, 0.5, 1, 7]
    # AUROC: i0 beats all 5 unplanted, i1 (0.2) beats i4 and i6: (5 + 2) / 10
    assert table.loc["gold_move", "auroc"] == pytest.approx(0.7)
    assert table.loc["several_correct", ["precision_at_k", "auroc"]].tolist() == [1.0, 1.0]
    assert table.loc["all", ["k", "precision_at_k"]].tolist() == [3, pytest.approx(2 / 3)]


def test_evaluate_filter_stages_and_annotators_against_an_independent_count(demo_ws, tmp_path):
    """The demo's model-free filter stages and an annotator who knows the original golds, on a
    planted demo; every number recomputed here with scikit-learn and a plain count."""
    import yaml

    dst = tmp_path / "p"
    plant(demo_ws, dst, "--rate", "0.1", "--seed", "5")
    key = key_of(dst)
    rules = yaml.safe_load(demo.rules_path().read_text())
    rules["stages"] = [s for s in rules["stages"] if s["name"] in ("near-duplicate", "length-spread")]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    run_cli("filter", dst, "--rules", tmp_path / "rules.yaml", "--out", tmp_path / "decisions")
    # round 2 of an annotator who picks each item's original gold: it flags wrong_gold exactly on gold moves
    original = {it["row_index"]: it["gold"] for it in items_of(demo_ws)}
    pd.DataFrame([{"original_index": r, "best_option": "ABCD"[g], "equally_good_options": "None",
                   "all_implausible": "No", "worst_option": "ABCD"[(g + 1) % 4]} for r, g in original.items()]
                 ).to_csv(tmp_path / "r2.csv", index=False)
    run_cli("import-annotations", dst, "--format", "study", "--round", "2", "--file", tmp_path / "r2.csv",
            "--annotator", "oracle")
    proc = run_cli("plant", "evaluate", dst, "--key", dst.with_name("p.plant-key.json"),
                   "--decisions", tmp_path / "decisions", "--json")
    rows = pd.DataFrame(json.loads(proc.stdout)["rows"]).set_index(["detector", "kind"])
    gold_moves = {p["item_id"] for p in key["planted"] if p["kind"] == "gold_move"}
    assert rows.loc[("oracle: wrong_gold", "gold_move"), ["precision_at_k", "auroc"]].tolist() == [1.0, 1.0]

    decisions = pd.read_parquet(tmp_path / "decisions" / "decisions.parquet")
    kind_of = {p["item_id"]: p["kind"] for p in key["planted"]}
    for stage in ("near-duplicate", "length-spread"):
        for kind in [*KINDS, "all"]:
            pool = decisions[[kind_of.get(i) in (None, kind) or (kind == "all") for i in decisions["item_id"]]]
            positive = pool["item_id"].map(lambda i: i in kind_of and kind in ("all", kind_of[i])).to_numpy()
            flagged = pool["matched"].map(lambda m: stage in list(m)).to_numpy()
            k = positive.sum()
            # a yes/no detector's top k: flagged items first, the tied ones in random order
            n_flag, tp = flagged.sum(), (positive & flagged).sum()
            hits = k * tp / n_flag if n_flag >= k else tp + (k - n_flag) * (positive & ~flagged).sum() / (~flagged).sum()
            row = rows.loc[(f"filter decisions: {stage}", kind)]
            assert row["k"] == k and row["n"] == len(pool)
            assert row["precision_at_k"] == pytest.approx(hits / k) and row["recall_at_k"] == pytest.approx(hits / k)
            assert row["auroc"] == pytest.approx(roc_auc_score(positive, flagged.astype(float)))
    assert len(gold_moves) == 4
    text = run_cli("plant", "evaluate", dst, "--key", dst.with_name("p.plant-key.json")).stdout
    assert "note: no scores in mode full" in text and "oracle: wrong_gold" in text


def seed_model_scores(root, n_models: int = 10, seed: int = 0) -> None:
    """Ten models' option scores, each preferring the gold by its own margin (the strongest
    most), with noise: a stand-in for the study's models on the demo."""
    from scoring.store import add_run, write_scores

    rng = np.random.default_rng(seed)
    with open_scores(root) as w, w.transaction():
        items = w.items()
        for m, skill in enumerate(np.linspace(0.2, 4.0, n_models)):
            run_id = f"t-m{m}"
            add_run(w, run_id=run_id, model=f"m{m}", origin="imported:test", info={})
            write_scores(w, [{"model": f"m{m}", "mode": "full", "item_id": it["item_id"], "option_index": j,
                              "logprob_sum": float(rng.normal() + skill * (j == it["gold"])), "n_tokens": 5,
                              "n_chars": len(o), "n_bytes": len(o.encode()), "content_hash": it["content_hash"],
                              "run_id": run_id} for it in items for j, o in enumerate(it["options"])])


def test_evaluate_the_item_validity_scores_against_an_independent_count(demo_ws, tmp_path):
    """Gold moves planted in a demo scored by ten stand-in models: evaluate's row for each
    suspects score equals scikit-learn's AUROC and a sort-and-count precision@k of the same
    scores, and the label-error score finds the moved golds."""
    from curate.validity.responses import response_matrix
    from curate.validity.suspects import suspects, two_best_baseline

    src = copy_ws(demo_ws, tmp_path / "src")
    seed_model_scores(src)
    dst = tmp_path / "p"
    plant(src, dst, "--kinds", "gold_move", "--rate", "0.1", "--seed", "2")
    proc = run_cli("plant", "evaluate", dst, "--key", tmp_path / "p.plant-key.json", "--json")
    rows = pd.DataFrame(json.loads(proc.stdout)["rows"]).set_index(["detector", "kind"])
    moved = {p["item_id"] for p in key_of(dst)["planted"]}
    with open_scores(dst) as w:
        responses = response_matrix(read_scores(w, modes=["full"]), w.items())
    table = suspects(responses).set_index("item_id")
    scores = {name: table[name] for name in ("label_error_score", "several_correct_score", "no_right_answer_score")}
    scores["two_best_baseline"] = two_best_baseline(responses)
    for name, series in scores.items():
        positive = np.array([i in moved for i in series.index])
        top = series.sort_values(ascending=False).index[:len(moved)]
        assert (name, "all") not in rows.index  # one kind planted: no "all" row
        for kind in ("gold_move",):
            row = rows.loc[(name, kind)]
            assert row["k"] == 4 and row["n"] == 40
            assert row["auroc"] == pytest.approx(roc_auc_score(positive, series.to_numpy()), abs=1e-12)
            assert row["precision_at_k"] == pytest.approx(len(set(top) & moved) / 4)
    assert rows.loc[("label_error_score", "gold_move"), "auroc"] >= 0.9


# --- issue 36: a planted source, an edited key, the rate's range, dropping every model ---------

STUDY_ITEMS = 400


@pytest.fixture(scope="module")
def study_ws(tmp_path_factory):
    """The first 400 HellaSwag validation items with the study's ten models' released full-prompt
    scores (imported: no model can re-score a changed option)."""
    from test_item_validity_fewshot import STUDY, write_scores

    root = small_workspace(tmp_path_factory.mktemp("plant-study") / "ws", STUDY_ITEMS)
    write_scores(root, STUDY, fewshot=0)
    return root


def test_a_planted_workspace_is_refused_as_a_source(study_ws, tmp_path):
    """Planting again into a planted copy would give a key that knows only the new plants, and
    evaluate would count the first plants as clean items: refused, nothing written."""
    dst = tmp_path / "p"
    plant(study_ws, dst, "--kinds", "gold_move", "--rate", "0.05", "--seed", "0")
    rows = pd.DataFrame(json.loads(run_cli("plant", "evaluate", dst, "--key", tmp_path / "p.plant-key.json",
                                           "--json").stdout)["rows"]).set_index("detector")
    assert rows.loc["label_error_score", "k"] == 20 and rows.loc["label_error_score", "auroc"] >= 0.9
    proc = plant(dst, tmp_path / "again", "--kinds", "gold_move", "--rate", "0.05", "--seed", "1", check=False)
    one_line_error(proc, str(dst), "planted copy", "plant from the original workspace")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p", "p.plant-key.json"]


def evaluate_key(ws, key):
    return run_cli("plant", "evaluate", ws, "--key", key, check=False)


def test_evaluate_refuses_an_edited_or_empty_key(study_ws, tmp_path):
    """The key carries a digest of what it plants and of the planted items: an edited key, a
    plant naming an item the workspace lacks, a key with no plants and a key written before keys
    carried a digest are refused in one line; the key as written is read."""
    dst = tmp_path / "p"
    plant(study_ws, dst, "--kinds", "gold_move", "--rate", "0.02", "--seed", "0")
    key = key_of(dst)
    assert key["format"] == "benchcurate-plant-key/2" and key["key_digest"].startswith("sha256:")
    assert evaluate_key(dst, tmp_path / "p.plant-key.json").returncode == 0

    def edited(name, change) -> Path:
        doc = json.loads(json.dumps(key))
        change(doc)
        (tmp_path / name).write_text(json.dumps(doc))
        return tmp_path / name

    outside = edited("outside.json", lambda d: d["planted"][0].update(item_id="hellaswag-val-9999"))
    one_line_error(evaluate_key(dst, outside), "outside.json", "hellaswag-val-9999", "not in")
    dropped = edited("dropped.json", lambda d: d["planted"].pop())
    one_line_error(evaluate_key(dst, dropped), "dropped.json", "does not match", "edited")
    counts = edited("counts.json", lambda d: d["counts"].update(gold_move=3))
    one_line_error(evaluate_key(dst, counts), "counts.json", "does not match")
    empty = edited("empty.json", lambda d: d.update(planted=[], counts={"gold_move": 0}))
    one_line_error(evaluate_key(dst, empty), "empty.json", "no plants")
    old = edited("old.json", lambda d: d.update(format="benchcurate-plant-key/1") or d.pop("key_digest"))
    one_line_error(evaluate_key(dst, old), "old.json", "re-plant")


def test_the_rate_is_above_0_and_below_1_and_leaves_an_item_unplanted(demo_ws, tmp_path):
    """--rate's range is 0 < rate < 1, both ends refused by the option itself: a rate of 1 would
    leave no unplanted item for evaluate to compare against. Within it, the kinds together must
    leave at least one of the items unplanted; the lowest rate plants one item per kind."""
    for rate in ("0", "1"):
        proc = plant(demo_ws, tmp_path / f"r{rate}", "--kinds", "gold_move", "--rate", rate, check=False)
        assert proc.returncode == 2 and f"{float(rate)} is not in the range 0<x<1" in proc.stderr, proc.stderr
    one_line_error(plant(demo_ws, tmp_path / "all", "--kinds", "gold_move", "--rate", "0.99", check=False),
                   "40 of the 40 items", "at least one", "unplanted")
    proc = plant(demo_ws, tmp_path / "top", "--kinds", "gold_move", "--rate", "0.975")
    assert "planted 39 of 40 items (gold_move 39)" in proc.stdout
    proc = plant(demo_ws, tmp_path / "low", "--rate", "0.0001")
    assert "planted 4 of 40 items" in proc.stdout
    assert schemas.load("plant-key")["properties"]["rate"] == {"type": "number", "exclusiveMinimum": 0,
                                                                "exclusiveMaximum": 1}


def test_drop_unscored_refuses_to_leave_no_scores_and_counts_what_it_drops(study_ws, tmp_path):
    """--drop-unscored that would leave out every model (the study's imported scores: none can be
    re-scored) is refused in one line, nothing written; where a model holds no score of a changed
    item it stays, and each model left out is reported with the count of its scores dropped."""
    proc = plant(study_ws, tmp_path / "none", "--kinds", "no_right_answer", "--rate", "0.01", "--drop-unscored",
                 check=False)
    one_line_error(proc, "--drop-unscored", "every model", "no scores")
    assert list(tmp_path.iterdir()) == []

    # the plants are the same without the scores: learn them, then take one model's changed items away
    src = copy_ws(study_ws, tmp_path / "src")
    with open_scores(src) as w:
        models = sorted(read_scores(w)["model"].unique())
    bare = copy_ws(study_ws, tmp_path / "bare")
    with open_scores(bare) as w, w.transaction():
        w.conn.execute("DELETE FROM scores")
        w.conn.execute("DELETE FROM score_runs")
    plant(bare, tmp_path / "probe", "--kinds", "no_right_answer", "--rate", "0.01", "--seed", "0")
    changed = [p["item_id"] for p in key_of(tmp_path / "probe")["planted"]]
    kept = models[0]
    with open_scores(src) as w, w.transaction():
        w.conn.execute("DELETE FROM scores WHERE model = ? AND item_id IN (SELECT value FROM json_each(?))",
                       (kept, json.dumps(changed)))
    proc = plant(src, tmp_path / "some", "--kinds", "no_right_answer", "--rate", "0.01", "--seed", "0",
                 "--drop-unscored")
    assert key_of(tmp_path / "some")["planted"] == key_of(tmp_path / "probe")["planted"]
    per_model = (STUDY_ITEMS - len(changed)) * 4  # its rows of the changed items were never copied
    for model in models[1:]:
        assert f"left out {model}: {per_model} scores dropped" in proc.stdout
    assert key_of(tmp_path / "some")["dropped_scores"] == {m: per_model for m in models[1:]}
    with open_scores(tmp_path / "some") as w:
        assert sorted(read_scores(w)["model"].unique()) == [kept]
