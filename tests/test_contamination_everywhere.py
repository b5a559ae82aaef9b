"""Text scores where a user looks: the `min_k_pp` filter condition, the review queue and the
report section, on 12 real HellaSwag items text-scored by the real SmolLM2-135M."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import one_line_error, run_cli, seed_random_scores, small_workspace


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("contamination")
    ws = small_workspace(tmp / "ws", 12)
    run_cli("text-scores", ws, "--model", "smollm2-135m", "--quiet")
    run_cli("export", ws, "text-scores", "--out", tmp / "text.parquet")
    return tmp, ws, pd.read_parquet(tmp / "text.parquet")


def test_filter_condition_takes_the_top_share_and_a_bound(scored, tmp_path):
    _, ws, table = scored
    ranked = table.sort_values("min_kpp_20", ascending=False)
    rules = tmp_path / "rules.yaml"
    bound = float(ranked["min_kpp_20"].iloc[4])
    rules.write_text("name: membership\nstages:\n"
                     "  - name: top\n    when:\n      min_k_pp: {model: smollm2-135m, top_share: 0.25}\n"
                     f"  - name: bound\n    when:\n      min_k_pp: {{model: smollm2-135m, above: {bound!r}}}\n")
    run_cli("filter", ws, "--rules", rules, "--out", tmp_path / "out")
    decisions = pd.read_parquet(tmp_path / "out" / "decisions.parquet")
    removed = decisions[~decisions["kept"].astype(bool)]
    ids = removed["item_id"] if "item_id" in removed else removed.index
    assert set(ids[removed["first_stage"] == "top"]) == set(ranked["item_id"].iloc[:3])
    assert set(ids[removed["first_stage"] == "bound"]) == {ranked["item_id"].iloc[3]}


def test_filter_condition_names_a_model_without_text_scores(scored, tmp_path):
    _, ws, _ = scored
    rules = tmp_path / "rules.yaml"
    rules.write_text("name: m\nstages:\n  - name: top\n    when:\n      min_k_pp: {model: other, top_share: 0.1}\n")
    one_line_error(run_cli("filter", ws, "--rules", rules, "--out", tmp_path / "out", check=False),
                   "no text scores of model 'other'", "smollm2-135m")


def test_review_queue_is_the_top_items_highest_first(scored):
    from curate.review.data import ReviewData
    from curate.review.queues import available, resolve

    _, ws, table = scored
    data = ReviewData.load(ws)
    cut = np.quantile(table["min_kpp_20"], 0.95, method="higher")
    ranked = table[table["min_kpp_20"] >= cut].sort_values("min_kpp_20", ascending=False)
    assert resolve(data, "min_k_pp") == list(ranked["item_id"]) and len(ranked) == 1
    assert resolve(data, "min_k_pp:smollm2-135m") == resolve(data, "min_k_pp")
    assert "min_k_pp" in {q["name"] for q in available(data, pd.DataFrame())}


def test_report_section_says_what_the_signals_are(scored, tmp_path):
    """Seeded random option scores stand in for a scoring run (analyze needs them); the section
    reads only the text scores."""
    _, ws, table = scored
    seed_random_scores(ws)
    run_cli("analyze", ws, "--out", tmp_path / "report")
    c = json.loads((tmp_path / "report" / "metrics.json").read_text())["contamination"]
    row = next(r for r in c["summary"] if r["signal"] == "min_kpp_20")
    assert row["n"] == 12 and row["mean"] == pytest.approx(table["min_kpp_20"].mean())
    assert row["q95"] == pytest.approx(table["min_kpp_20"].quantile(0.95))
    rho = next(r["rho"] for r in c["spearman"] if (r["a"], r["b"]) == ("loss", "min_kpp_20"))
    assert rho == pytest.approx((-table["loss"]).corr(table["min_kpp_20"], method="spearman"))
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Contamination signals" in report and "suspicions, not proof" in report
    assert (tmp_path / "report" / "min_kpp_20_hist.png").stat().st_size > 1000
