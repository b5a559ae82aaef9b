"""Item validity reads k-shot scores (issue 29): where a workspace holds several shot counts, the
report's "Items most likely broken", the filter's validity kinds, the `suspects` review queue,
`curate export item-stats` and `curate plant evaluate` all read the one
``curate.validity.item_table.choose`` picks (the shot count with the most models; ties: the
fewest shots) unless told another, and the audit plan counts k-shot scores, stored or to come.

The HellaSwag workspace holds the study's ten models' released full-mode scores as 5-shot scores
(as 5-shot lm-eval samples of many models arrive) and two of them again, from the study's
zero-prompt scores, as 0-shot scores: before, every one of these read the 0-shot scores only."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import PAPER_SCORES, SHARED, one_line_error, run_cli, small_workspace

N_ITEMS = 60
STUDY = sorted(p.stem for p in (PAPER_SCORES / "full_prompt").glob("*.csv")
               if not p.stem.startswith(("sum_", "byte_mean_")))
ZERO_SHOT = STUDY[:2]  # also scored 0-shot: the shot count with the fewer models


def write_scores(root, stems, *, fewshot: int, prompt: str = "full") -> None:
    """The study's released seq_mean scores of ``stems`` (from its ``prompt`` files) as full-mode
    ``fewshot``-shot scores, through the store API."""
    from scoring.store import add_run, open_scores, write_scores as write

    with open_scores(root) as ws:
        items = ws.items()
        with ws.transaction():
            for stem in stems:
                model, run_id = stem.replace("--", "/"), f"study-{stem}-{fewshot}shot"
                values = pd.read_csv(PAPER_SCORES / f"{prompt}_prompt" / f"{stem}.csv").to_numpy()
                add_run(ws, run_id=run_id, model=model, origin="imported:test", info={})
                write(ws, [{"model": model, "mode": "full", "fewshot": fewshot, "item_id": it["item_id"],
                            "option_index": j, "content_hash": it["content_hash"], "run_id": run_id,
                            "seq_mean": float(values[it["row_index"], j])}
                           for it in items for j in range(len(it["options"]))])


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = small_workspace(tmp_path_factory.mktemp("fewshot-validity") / "ws", N_ITEMS)
    write_scores(root, STUDY, fewshot=5)
    write_scores(root, ZERO_SHOT, fewshot=0, prompt="zero")
    return root


def table_of(ws, fewshot: int, models=None) -> pd.DataFrame:
    """The contract function's item table of the ``fewshot``-shot scores, by item id."""
    from curate.validity.item_table import item_table
    from scoring.store import open_scores, read_scores

    with open_scores(ws) as w:
        items, scores = w.items(), read_scores(w, modes=["full"], fewshots=[fewshot])
    responses, table = item_table(scores, items, models=models, fewshot=fewshot, normalization="seq_mean")
    return table.set_index("item_id").assign(n_models=len(responses.models))


def ranked(table: pd.DataFrame) -> list[str]:
    return list(table.sort_values("label_error_score", ascending=False, kind="stable").index)


def test_the_rule_most_models_then_fewest_shots():
    from curate.validity.item_table import pick_fewshot

    assert pick_fewshot({0: {"a", "b"}, 5: {"a", "b", "c"}}) == 5
    assert pick_fewshot({5: {"a"}, 0: {"b"}, 25: {"c"}}) == 0
    assert pick_fewshot({}) == 0


def test_item_stats_export_reads_the_shot_count_with_most_models(ws, tmp_path):
    run_cli("export", ws, "item-stats", "--out", tmp_path / "stats.csv")
    out = pd.read_csv(tmp_path / "stats.csv").set_index("item_id")
    five = table_of(ws, 5)
    assert set(out["fewshot"]) == {5} and out["models"].iloc[0].count(",") == len(STUDY) - 1
    assert out.loc[five.index, "label_error_score"].to_numpy() == pytest.approx(five["label_error_score"].to_numpy())
    run_cli("export", ws, "item-stats", "--fewshot", "0", "--out", tmp_path / "zero.csv")
    zero = pd.read_csv(tmp_path / "zero.csv").set_index("item_id")
    assert set(zero["fewshot"]) == {0} and zero["models"].iloc[0].count(",") == len(ZERO_SHOT) - 1
    assert zero.loc[five.index, "label_error_score"].to_numpy() == pytest.approx(
        table_of(ws, 0)["label_error_score"].to_numpy())
    one_line_error(run_cli("export", ws, "item-stats", "--fewshot", "3", "--out", tmp_path / "x.csv", check=False),
                   "3-shot")
    proc = run_cli("export", ws, "scores", "--fewshot", "5", check=False)
    assert proc.returncode == 2 and "--fewshot applies to KIND item-stats and lm-eval-tasks only" in proc.stderr


def rules(models: list[str], fewshot: str = "") -> str:
    common = f"models: [{', '.join(models)}], mode: full, normalization: seq_mean{fewshot}"
    return f"""name: validity
stages:
  - {{name: label-error, description: top 10%, when: {{label_error: {{{common}, top_share: 0.1}}}}}}
  - {{name: misfit, description: negative discrimination, when: {{misfit: {{{common}}}}}}}
"""


def matched(ws, path, out) -> dict[str, set]:
    run_cli("filter", ws, "--rules", path, "--out", out)
    decisions = pd.read_parquet(out / "decisions.parquet").set_index("item_id")
    return {stage: set(decisions.index[decisions["matched"].map(lambda m, s=stage: s in m)])
            for stage in ("label-error", "misfit")}


def top_share(table: pd.DataFrame, share: float = 0.1) -> set:
    scores = table["label_error_score"]
    return set(table.index[scores >= scores.quantile(1 - share, interpolation="higher")])


def test_filter_validity_kinds_read_the_rule_or_the_named_shot_count(ws, tmp_path):
    models = [s.replace("--", "/") for s in STUDY]
    (tmp_path / "all.yaml").write_text(rules(models))
    five = table_of(ws, 5)
    got = matched(ws, tmp_path / "all.yaml", tmp_path / "all")
    assert got == {"label-error": top_share(five), "misfit": set(five.index[five["discrimination"] < 0])}
    summary = json.loads((tmp_path / "all" / "summary.json").read_text())
    assert {r["model"]: r.get("fewshots") for r in summary["inputs"]["score_runs"]} == {m: [5] for m in models}
    # The two models scored at both shot counts: a tie, so the fewest shots; or the one named.
    two = [s.replace("--", "/") for s in ZERO_SHOT]
    (tmp_path / "two.yaml").write_text(rules(two))
    assert matched(ws, tmp_path / "two.yaml", tmp_path / "two")["label-error"] == top_share(table_of(ws, 0))
    (tmp_path / "two5.yaml").write_text(rules(two, ", fewshot: 5"))
    assert matched(ws, tmp_path / "two5.yaml", tmp_path / "two5")["label-error"] == top_share(table_of(ws, 5, two))


def test_suspects_queue_reads_the_rule_or_the_named_shot_count(ws):
    from curate.review.data import ReviewData
    from curate.review.queues import resolve

    data = ReviewData.load(ws)
    five, zero = table_of(ws, 5), table_of(ws, 0)
    assert resolve(data, "suspects:7") == ranked(five)[:7]
    assert resolve(data, "suspects") == [i for i in ranked(five) if five.loc[i, "label_error_score"] > math.log(9)]
    assert resolve(data, "suspects:7:0-shot") == ranked(zero)[:7] != ranked(five)[:7]
    assert resolve(data, "suspects:5-shot") == resolve(data, "suspects")
    for bad in ("suspects:x-shot", "suspects:3:4:5-shot"):
        with pytest.raises(Exception, match="queue"):
            resolve(data, bad)


def test_validity_kinds_read_the_scores_once(ws, tmp_path, monkeypatch):
    """Two validity stages on the same models: one read of their scores (each model's scores were
    read once more for its predictions before)."""
    import scoring.store
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions

    reads, real = [], scoring.store.read_scores
    monkeypatch.setattr(scoring.store, "read_scores", lambda *a, **kw: reads.append(kw.get("models")) or real(*a, **kw))
    (tmp_path / "rules.yaml").write_text(rules([s.replace("--", "/") for s in STUDY], ", fewshot: 5"))
    Filter(ws, FilterOptions(rules=tmp_path / "rules.yaml", out=tmp_path / "out")).run()
    assert len(reads) == 1


@pytest.fixture(scope="module")
def planted(ws, tmp_path_factory):
    """(planted workspace, key): 10% gold moves, the scores copied."""
    folder = tmp_path_factory.mktemp("planted")
    run_cli("plant", ws, folder / "ws", "--kinds", "gold_move", "--rate", "0.1", "--seed", "1",
            "--key", folder / "key.json")
    return folder / "ws", folder / "key.json"


def test_plant_evaluate_opens_the_workspace_once(planted, monkeypatch):
    from curate.plant.evaluate import evaluate_workspace
    from curate.items.store import Workspace

    opened, real = [], Workspace.open.__func__
    monkeypatch.setattr(Workspace, "open",
                        classmethod(lambda cls, root, *stores: opened.append(root) or real(cls, root, *stores)))
    table, _ = evaluate_workspace(*planted)
    assert len(opened) == 1 and "label_error_score" in set(table["detector"])


def test_plant_evaluate_reads_the_rule_or_the_named_shot_count(planted):
    root, key = planted
    out = json.loads(run_cli("plant", "evaluate", root, "--key", key, "--json").stdout)
    zero = json.loads(run_cli("plant", "evaluate", root, "--key", key, "--fewshot", "0", "--json").stdout)
    assert any("5-shot" in n and "0-shot" in n for n in out["notes"])
    auroc = {r["detector"]: r["auroc"] for r in out["rows"]}
    assert auroc["label_error_score"] != {r["detector"]: r["auroc"] for r in zero["rows"]}["label_error_score"]
    assert auroc["label_error_score"] > 0.9  # ten models' evidence


def test_report_section_reads_the_rule_and_names_the_other_shot_counts(ws, tmp_path):
    run_cli("analyze", ws, "--out", tmp_path / "report")
    s = json.loads((tmp_path / "report" / "metrics.json").read_text())["suspects"]
    assert (s["present"], s["fewshot"], s["other_fewshots"], len(s["models"])) == (True, 5, [0], len(STUDY))
    assert [r["item_id"] for r in s["top"]] == ranked(table_of(ws, 5))[:len(s["top"])]
    assert "5-shot; also stored: 0-shot" in (tmp_path / "report" / "report.md").read_text()


# --- the audit plan ---------------------------------------------------------------------------

def plan(ws, tmp_path, rules_text: str, scoring=None):
    """plan_problems of an audit config of HellaSwag on workspace ``ws`` reading ``rules_text``
    (``scoring``: its scoring section)."""
    import yaml

    from conftest import HELLASWAG
    from curate.audit.config import load_config
    from curate.audit.plan import plan_problems

    (tmp_path / "rules.yaml").write_text(rules_text)
    config = {"workspace": str(ws), "benchmark": {"adapter": "hellaswag", "path": str(HELLASWAG)},
              "filter": {"rules": str(tmp_path / "rules.yaml"), "out": str(tmp_path / "decisions")},
              **({"scoring": scoring} if scoring else {})}
    (tmp_path / "audit.yaml").write_text(yaml.safe_dump(config))
    return plan_problems(load_config(tmp_path / "audit.yaml", cwd=tmp_path))


def test_audit_plan_counts_stored_k_shot_scores(ws, tmp_path):
    models = [s.replace("--", "/") for s in STUDY]
    assert plan(ws, tmp_path, rules(models)) == []
    assert plan(ws, tmp_path, rules(models, ", fewshot: 5")) == []
    [(key, message)] = plan(ws, tmp_path, rules(models[-1:], ", fewshot: 0"))
    assert key == "scoring" and "0-shot" not in message and "full 5-shot: seq_mean" in message


def test_audit_plan_counts_k_shot_scoring_and_imports(tmp_path):
    """A workspace to come: k-shot scores from `scoring.fewshot` and from lm-eval samples whose
    results file says 5 shots."""
    import shutil

    from scoring.imports import shot_counts

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "fixtures" / "lm_eval_samples" / "SmolLM2-135M", run)
    [res] = run.glob("results_*.json")
    results = json.loads(res.read_text())
    results["n-shot"] = {task: 5 for task in results["n-shot"]}
    res.write_text(json.dumps(results))
    assert shot_counts("lm-eval-samples", [run]) == {"SmolLM2-135M": {5}}
    assert shot_counts("study-csv", [run]) == {}

    label = "label_error: {models: [SmolLM2-135M], mode: full, normalization: sum}"
    text = f"name: r\nstages:\n  - {{name: s, description: d, when: {{{label}}}}}\n"
    nothing = tmp_path / "nothing"
    imports = {"imports": [{"format": "lm-eval-samples", "dir": str(run)}]}
    assert plan(nothing, tmp_path, text, imports) == []
    five = text.replace("sum}", "sum, fewshot: 5}")
    assert plan(nothing, tmp_path, five, imports) == []
    [(_, message)] = plan(nothing, tmp_path, text.replace("sum}", "sum, fewshot: 0}"),
                          imports)
    assert "0-shot" not in message and "will have full 5-shot: byte, char, sum" in message
    scored = {"models": ["smollm2-135m"], "modes": ["full"], "fewshot": "0,5"}
    assert plan(nothing, tmp_path, five.replace("SmolLM2-135M", "smollm2-135m"), scored) == []


# --- one choice of formulation (issue 29 item 3) -------------------------------------------------

@pytest.fixture(scope="module")
def letters_ws(tmp_path_factory):
    """40 MMLU items (a letters workspace) with four fake models' letters and cloze scores, whose
    rankings differ."""
    from scoring.store import add_run, open_scores, write_scores as write

    root = tmp_path_factory.mktemp("letters") / "ws"
    run_cli("init", root, "--benchmark", "mmlu", "--data", SHARED / "benchmarks" / "mmlu" / "test.jsonl.gz",
            "--limit", "40")
    rng = np.random.default_rng(0)
    with open_scores(root) as ws:
        assert ws.meta("formulation") == "letters"
        items = ws.items()
        with ws.transaction():
            for m in range(4):
                for formulation in ("letters", "cloze"):
                    run_id = f"fake-{m}-{formulation}"
                    add_run(ws, run_id=run_id, model=f"fake/m{m}", origin="imported:test", info={})
                    write(ws, [{"model": f"fake/m{m}", "mode": "full", "formulation": formulation,
                                "item_id": it["item_id"], "option_index": j, "content_hash": it["content_hash"],
                                "run_id": run_id, "logprob_sum": float(rng.normal(-2 * (j != it["gold"]), 1.5)),
                                "n_tokens": 1, "n_chars": 1, "n_bytes": 1}
                               for it in items for j in range(len(it["options"]))])
    return root


def test_suspects_queue_report_and_filter_use_one_formulation(letters_ws, tmp_path):
    from curate.review.data import ReviewData
    from curate.review.queues import resolve

    queue = resolve(ReviewData.load(letters_ws), "suspects:8")
    models = [f"fake/m{m}" for m in range(4)]
    (tmp_path / "rules.yaml").write_text(
        "name: r\nstages:\n  - {name: s, description: d, when: {suspect: {models: [" + ", ".join(models)
        + "], mode: full, normalization: sum, top_share: 0.2}}}\n")
    run_cli("filter", letters_ws, "--rules", tmp_path / "rules.yaml", "--out", tmp_path / "f")
    flagged = set(pd.read_parquet(tmp_path / "f" / "decisions.parquet").query("not kept")["item_id"])
    run_cli("analyze", letters_ws, "--out", tmp_path / "report")
    s = json.loads((tmp_path / "report" / "metrics.json").read_text())["suspects"]
    assert s["formulation"] == "letters"
    assert queue == [r["item_id"] for r in s["top"]][:8]
    assert set(queue) <= flagged and len(flagged) == 8
