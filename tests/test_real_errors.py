"""The default ranking of likely broken items (suspect_score) against experts' labels, verdicts as
evidence (issue 45), on MMLU-Redux's development split (../shared/data/mmlu-redux-dev: 1900 MMLU
items with expert error labels, 20 frontier models' answers, seven LLM judges' verdicts).

Everything runs as a user would: `curate init --benchmark generic` with the benchmark's own ids,
`curate import-answers` and `curate import-verdicts` by those ids, `curate export item-stats`."""
from __future__ import annotations

import json
import re
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT, SHARED, built_once, copy_ws, one_line_error, run_cli

sys.path.insert(0, str(ROOT / "benchmarks"))
import real_errors  # noqa: E402

DEV = SHARED / "mmlu-redux-dev"
COLUMNS = "{question: question, choices: choices, answer: answer, answer_format: index, ids: [id], source: subject}"


def dev_items() -> pd.DataFrame:
    return pd.read_json(DEV / "items.jsonl", lines=True)


@pytest.fixture(scope="module")
def dev_ws(tmp_path_factory):
    """The dev split ingested as a user would, with its 20 models' answers imported by the
    benchmark's own ids (read-only; tests copy it)."""
    def build(folder: Path):
        data = folder.parent / "items.jsonl"
        dev_items().drop(columns=["error_type", "correct_answer"]).to_json(data, orient="records", lines=True)
        run_cli("init", folder, "--benchmark", "generic", "--data", data, "--columns", COLUMNS)
        run_cli("import-answers", folder, "--format", "table", DEV / "answers.csv")
    return built_once(tmp_path_factory, "mmlu-redux-dev-ws", build)


@pytest.fixture
def ws(dev_ws, tmp_path):
    return copy_ws(dev_ws, tmp_path / "ws")


def exported(ws: Path, out: Path) -> pd.DataFrame:
    """`curate export WS item-stats`, indexed by the benchmark's own ids (row order of items.jsonl)."""
    run_cli("export", ws, "item-stats", "--out", out)
    stats = pd.read_csv(out)
    ids = dev_items()["id"]
    return stats.set_index(stats["row_index"].map(lambda r: ids.iloc[int(r)]))


def test_the_default_ranking_is_at_least_the_simple_baselines_on_experts_labels():
    """suspect_score against ability-weighted votes and 1 - accuracy on the dev split: at least
    the best of them on AUROC and on precision at 50 and at 100, and the numbers the report quotes
    (curate/analyses/sections/suspects.py TRUST) are these."""
    from curate.analyses.sections.suspects import TRUST

    items, answers, _ = real_errors.load()
    responses = real_errors.responses_of(items, answers)
    kinds = items.set_index("id")["error_type"].reindex(responses.item_ids).to_numpy()
    found = {name: real_errors.metrics(score, kinds) for name, score in real_errors.signals(responses).items()}
    ours = found["suspect_score"]
    for metric in ("AUROC", "P@50", "P@100"):
        best = max(found["ability-weighted votes against the key"][metric], found["1 - accuracy"][metric])
        assert ours[metric] >= best, (metric, ours[metric], best)
    assert (round(ours["P@50"] * 50), round(ours["P@100"] * 100)) == (28, 43)
    text = TRUST["votes"]
    assert "28 labelled errors in its top 50 (precision 0.56" in text and "43 in its top 100 (0.43" in text
    assert f"AUROC {ours['AUROC']:.2f}" in text and f"(AUROC {ours['wrong key']:.2f} on them)" in text


def test_the_panel_decides_the_combination():
    """Models alike in ability (the 20 frontier models, or any 5 of them) get votes; a panel with
    weak and strong models gets the pooled log-odds; the export says which and why."""
    from curate.validity.suspects import ALIKE_SPREAD, ability_spread, choose_basis

    items, answers, _ = real_errors.load()
    alike = real_errors.responses_of(items, answers)
    assert ability_spread(alike) < ALIKE_SPREAD and choose_basis(alike)[0] == "votes"
    five = real_errors.responses_of(items, answers, sorted(answers["model"].unique())[:5])
    assert choose_basis(five)[0] == "votes"
    # a spread panel: the 20 models plus one that answers at random
    rng = np.random.default_rng(0)
    weak = answers[answers["model"] == answers["model"].iloc[0]].assign(
        model="random-guesser", choice=rng.choice(list("ABCD"), size=(answers["model"] == answers["model"].iloc[0]).sum()))
    spread = real_errors.responses_of(items, pd.concat([answers, weak]))
    basis, why = choose_basis(spread)
    assert basis == "log-odds" and f"spread {ability_spread(spread):.2f} >= {ALIKE_SPREAD}" in why


def test_export_and_queue_rank_by_suspect_score_through_the_cli(ws, tmp_path):
    """The user's path: answers imported by the benchmark's own ids; `export item-stats` carries
    suspect_score (equal to the functions' own), its basis, and the IRT note counts the 20
    answering models; the suspects queue is in suspect_score order."""
    from curate.review.data import ReviewData
    from curate.review.queues import resolve

    items, answers, _ = real_errors.load()
    expected = pd.Series(real_errors.signals(real_errors.responses_of(items, answers))["suspect_score"],
                         index=real_errors.responses_of(items, answers).item_ids)
    proc = run_cli("export", ws, "item-stats", "--out", tmp_path / "stats.csv")
    assert "no 2PL IRT fit" not in proc.stderr
    stats = exported(ws, tmp_path / "stats2.csv")
    assert np.abs(stats["suspect_score"].reindex(expected.index) - expected).max() < 1e-12
    assert set(stats["suspect_basis"]) == {"votes"} and len(stats["answer_models"].iloc[0].split(", ")) == 20
    queue = resolve(ReviewData.load(ws), "suspects:50")
    by_id = pd.read_csv(tmp_path / "stats.csv").set_index("item_id")["suspect_score"]
    assert list(by_id.loc[queue]) == sorted(by_id.loc[queue], reverse=True)
    assert by_id.loc[queue].min() >= by_id.drop(index=queue).max()


def test_judges_verdicts_join_the_ranking(ws, tmp_path):
    """The dev split's judges' verdicts imported by the benchmark's own ids: the ranking on the
    items they judged improves (0.760 -> 0.770, benchmarks/real_errors.py), the export says what it
    rests on, and a second import changes nothing."""
    labels = dev_items().set_index("id")["error_type"]
    before = exported(ws, tmp_path / "before.csv")
    run_cli("import-verdicts", ws, "--format", "table", DEV / "verdicts.csv")
    after = exported(ws, tmp_path / "after.csv")
    judged = sorted(set(pd.read_csv(DEV / "verdicts.csv")["item"]))
    broken = labels.loc[judged] != "ok"
    auc_before = real_errors.auroc(before.loc[judged, "suspect_score"].to_numpy(), broken.to_numpy())
    auc_after = real_errors.auroc(after.loc[judged, "suspect_score"].to_numpy(), broken.to_numpy())
    assert round(auc_before, 3) == 0.760 and round(auc_after, 3) == 0.770
    assert set(after["suspect_basis"]) == {"votes + verdicts of 7 sources"}
    assert (after.drop(index=judged)["verdict_evidence"] == 0).all()
    db = ws / "workspace.db"
    rows = sqlite3.connect(db).execute("SELECT judge, item_id, verdict, path, row FROM verdicts ORDER BY 1, 2, 4, 5").fetchall()
    assert len(rows) == 2800
    proc = run_cli("import-verdicts", ws, "--format", "table", DEV / "verdicts.csv")
    assert "imported 2800 verdicts of 7 judges from 1 file" in proc.stdout
    assert sqlite3.connect(db).execute("SELECT judge, item_id, verdict, path, row FROM verdicts ORDER BY 1, 2, 4, 5").fetchall() == rows


def test_a_bad_verdict_row_is_one_line_and_nothing_is_stored(ws, tmp_path):
    """Each bad cell names the file, the row and the field; the closest id is named for an id
    that matches nothing; a file whose last row is bad stores none of its rows."""
    good = "judge,item,verdict,answer\nj1,abstract_algebra/0,error,C\nj1,abstract_algebra/1,ok,\n"
    cases = {
        "item": ("j1,abstract_algebr/1,ok,\n", "row 2, field 'item'", "the closest is 'abstract_algebra/1'"),
        "verdict": ("j1,abstract_algebra/2,wrong,\n", "row 2, field 'verdict'", "'wrong' is not one of"),
        "answer": ("j1,abstract_algebra/2,wrong-key,E\n", "row 2, field 'answer'", "is past item"),
        "judge": (",abstract_algebra/2,ok,\n", "row 2, field 'judge'", "empty"),
    }
    for name, (last, where, why) in cases.items():
        path = tmp_path / f"{name}.csv"
        path.write_text(good + last)
        one_line_error(run_cli("import-verdicts", ws, "--format", "table", path, check=False), str(path), where, why)
    with sqlite3.connect(ws / "workspace.db") as conn:
        held = conn.execute("SELECT name FROM sqlite_master WHERE name = 'verdicts'").fetchone()
        assert held is None or conn.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == 0
    # a row deleted from a file leaves the workspace when the file is imported again
    path = tmp_path / "v.csv"
    path.write_text(good)
    run_cli("import-verdicts", ws, "--format", "table", path)
    path.write_text(good.splitlines()[0] + "\n" + good.splitlines()[1] + "\n")
    proc = run_cli("import-verdicts", ws, "--format", "table", path)
    assert "1 no longer in the files, removed" in proc.stdout
    with sqlite3.connect(ws / "workspace.db") as conn:
        assert conn.execute("SELECT judge, verdict, answer FROM verdicts").fetchall() == [("j1", "error", 2)]


def test_a_reviewers_verdict_moves_the_item(ws, tmp_path):
    """A person's verdict in review is taken as it is: an item confirmed broken rises into the
    top of the ranking, one cleared falls out of it."""
    from annotate.store import open_annotations, write_human_annotation
    from curate.items.canonical import sha256_text

    before = exported(ws, tmp_path / "before.csv").sort_values("suspect_score", ascending=False)
    top, middle = before.index[0], before.index[len(before) // 2]
    ids = dict(zip(before.index, before["item_id"]))
    with open_annotations(ws) as w:
        gold = {it["item_id"]: it for it in w.items()}
        for own, result in ((top, {"best": gold[ids[top]]["gold"], "worst": (gold[ids[top]]["gold"] + 1) % 4,
                                   "equally_good": [], "all_implausible": False}),
                            (middle, {"best": (gold[ids[middle]]["gold"] + 1) % 4, "worst": gold[ids[middle]]["gold"],
                                      "equally_good": [], "all_implausible": False})):
            item = gold[ids[own]]
            write_human_annotation(w, {"annotator": "human:ann", "round": 2, "item_id": item["item_id"],
                                       "status": "valid", "result": result, "raw": json.dumps(result),
                                       "prompt_version": "review", "model_snapshot": None,
                                       "request_key": sha256_text(f"human:ann/{item['item_id']}"),
                                       "content_hash": item["content_hash"]})
    after = exported(ws, tmp_path / "after.csv").sort_values("suspect_score", ascending=False)
    rank = {own: i for i, own in enumerate(after.index)}
    assert rank[middle] < 50 and rank[top] > 100
    assert "verdicts of 1 sources" in after["suspect_basis"].iloc[0]


def test_answer_only_models_on_a_few_items_are_set_apart(ws, tmp_path):
    """A model that answered 30 of the 1900 items is set apart (as a model scored on a fraction of
    the items is), named in the export, and does not join the ranking."""
    table = tmp_path / "few.csv"
    pd.DataFrame({"model": "few", "item": dev_items()["id"].head(30), "choice": "A"}).to_csv(table, index=False)
    run_cli("import-answers", ws, "--format", "table", table)
    stats = exported(ws, tmp_path / "stats.csv")
    assert "few (answers): answered 30 of 1900 items" in stats["set_apart"].iloc[0]
    assert "few" not in stats["answer_models"].iloc[0].split(" (")[0]
    assert len(stats["answer_models"].iloc[0].split(", ")) == 20


def test_the_suspect_filter_kind_and_what_it_read(ws, tmp_path):
    """`suspect` flags the ranking's top items (top, top_share, or the ranking's own suspects),
    the decisions record the verdicts it read, and a release refuses them once the verdicts changed."""
    models = sorted(pd.read_csv(DEV / "answers.csv")["model"].unique())
    run_cli("import-verdicts", ws, "--format", "table", DEV / "verdicts.csv")
    rules = tmp_path / "rules.yaml"
    rules.write_text("name: r\nstages:\n  - {name: top, description: d, when: {suspect: {answers: ["
                     + ", ".join(models) + "], top: 40}}}\n")
    out = tmp_path / "decisions"
    run_cli("filter", ws, "--rules", rules, "--out", out)
    decided = pd.read_parquet(out / "decisions.parquet")
    stats = exported(ws, tmp_path / "stats.csv")
    top = set(stats.sort_values("suspect_score", ascending=False)["item_id"].head(40))
    assert set(decided.query("not kept")["item_id"]) == top
    summary = json.loads((out / "summary.json").read_text())
    assert summary["inputs"]["verdicts"]["verdicts"] == 2800
    extra = tmp_path / "more.csv"
    extra.write_text("judge,item,verdict\nnew-judge,abstract_algebra/3,error\n")
    run_cli("import-verdicts", ws, "--format", "table", extra)
    proc = run_cli("release", ws, "--decisions", out, "--name", "x", "--version", "0.1.0", "--to", tmp_path / "rel",
                   check=False)
    one_line_error(proc, "verdicts")
