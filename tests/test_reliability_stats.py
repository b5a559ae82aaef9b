"""Reliability, statistics (issue 14, item 11): each fix against an independent reference.

References: sklearn's cohen_kappa_score; Connor (1987)'s paired sample-size formula and its
worked figure (0.1730 at n = 50, 20% discordant); a Monte Carlo simulation of the McNemar z
test; statsmodels' power solver and McNemar test; Gwet's AC1 formulas (irrCAC's, for any
number of raters) written out here and checked on Gwet's published 4-rater example.
"""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize

from annotate.agreement import METRICS, agreement, gwet_ac1
from conftest import HELLASWAG, run_cli
from curate.core import statistics
from curate.analyses import stats

Z_A, Z_B = sps.norm.ppf(0.975), sps.norm.ppf(0.8)


def test_kappa_is_zero_when_each_annotator_uses_one_different_category():
    a, b = np.zeros(12, int), np.ones(12, int)
    # po = 0 and pe = 1*0 + 0*1 = 0, so kappa = (0 - 0) / (1 - 0) = 0; sklearn says the same.
    assert cohen_kappa_score(a, b) == 0.0
    assert statistics.cohens_kappa(a, b, 2) == 0.0
    assert METRICS["cohen_kappa"](a, b, 2) == 0.0
    # Undefined only when both use one and the same category (pe = 1): NaN, as sklearn gives.
    assert math.isnan(statistics.cohens_kappa(a, a, 2)) and math.isnan(METRICS["cohen_kappa"](a, a, 2))
    with pytest.warns(UserWarning):
        assert math.isnan(cohen_kappa_score(a, a))


def test_paired_mdd_uses_the_null_variance_connor_1987():
    # Connor (1987): n = (z_a sqrt(psi) + z_b sqrt(psi - d^2))^2 / d^2; at n = 50, psi = 0.2: d = 0.1730.
    d = stats.mdd_paired(50, 0.2)
    assert round(d, 4) == 0.1730
    for n, psi in ((50, 0.2), (300, 0.1), (3963, 0.25)):
        d = stats.mdd_paired(n, psi)
        # rel 1e-5: the power also counts the far tail (rejecting the wrong way, at most 1e-6 here),
        # which Connor's formula drops and which makes the power alpha at d = 0 for any alpha.
        assert (Z_A * math.sqrt(psi) + Z_B * math.sqrt(psi - d * d)) ** 2 / d ** 2 == pytest.approx(n, rel=1e-5)
    # The old formula (the alternative variance in both terms) gave 0.1647.
    es = (Z_A + Z_B) / math.sqrt(50)
    assert round(es * math.sqrt(0.2 / (1 + es ** 2)), 4) == 0.1647 != round(stats.mdd_paired(50, 0.2), 4)
    # Independent check by simulation: the two-sided McNemar z test rejects in about 80% of
    # samples drawn with that difference (n = 400, psi = 0.2, 20000 simulated studies).
    n, psi = 400, 0.2
    d = stats.mdd_paired(n, psi)
    rng = np.random.default_rng(0)
    counts = rng.multinomial(n, [(psi + d) / 2, (psi - d) / 2, 1 - psi], size=20000)
    z = (counts[:, 0] - counts[:, 1]) / np.sqrt(counts[:, 0] + counts[:, 1])
    assert np.mean(np.abs(z) > Z_A) == pytest.approx(0.8, abs=0.015)
    # Nothing detectable: the largest possible difference (psi) falls short -> None; no discordance -> NaN.
    assert stats.mdd_paired(10, 0.05) is None
    assert math.isnan(stats.mdd_paired(50, 0.0))


def test_independent_mdd_is_none_where_no_gain_is_detectable():
    # 20 items at 95%: even 100% accuracy is h = 2 asin(1) - 2 asin(sqrt(.95)) = 0.45 < the 0.89 needed.
    needed = NormalIndPower().solve_power(effect_size=None, nobs1=20, alpha=0.05, power=0.8, ratio=1.0)
    assert proportion_effectsize(1.0, 0.95) < needed
    assert stats.mdd_independent(20, 0.95) is None
    mdd = stats.mdd_independent(1000, 0.6)     # detectable: round trip through statsmodels
    assert NormalIndPower().power(effect_size=proportion_effectsize(0.6 + mdd, 0.6), nobs1=1000,
                                  alpha=0.05) == pytest.approx(0.8, abs=1e-4)


def test_nan_predictions_do_not_count_as_correct_in_paired_counts():
    a = np.array([1, 1, 0, np.nan, 1, 0, np.nan, 1], float)
    b = np.array([1, 0, 1, 1, np.nan, 0, np.nan, 0], float)
    counts = stats.paired_counts(a, b)
    assert counts == {"both": 1, "only_a": 2, "only_b": 1, "neither": 1, "missing": 3}
    test = stats.mcnemar_exact(a, b)
    assert test["n"] == 5
    assert test["p"] == pytest.approx(mcnemar([[1, 2], [1, 1]], exact=True).pvalue)  # complete pairs only
    boot = stats.paired_bootstrap(a, b, n_resamples=200)
    assert boot["n"] == 5 and boot["difference"] == pytest.approx((2 - 1) / 5)


def _records(annotator, labels_by_item):
    return [{"annotator": annotator, "round": 1, "item_id": f"i{j}", "status": "valid",
             "result": {"labels": labels}} for j, labels in enumerate(labels_by_item)]


def test_pair_intervals_do_not_change_when_a_third_annotator_is_added():
    rng = np.random.default_rng(5)
    items = 80
    draw = lambda p: [["nonsense_prompt"] if x else ["high_quality"] for x in rng.random(items) < p]  # noqa: E731
    golds, n_options = {f"i{j}": 0 for j in range(items)}, {f"i{j}": 4 for j in range(items)}
    two = pd.DataFrame(_records("ann-a", draw(0.3)) + _records("ann-b", draw(0.35)))
    three = pd.concat([two, pd.DataFrame(_records("ann-0", draw(0.5)))], ignore_index=True)
    before = agreement(two, golds, n_options, 1, n_boot=100, seed=3)
    after = agreement(three, golds, n_options, 1, n_boot=100, seed=3)
    pair = after[(after.annotator_a == "ann-a") & (after.annotator_b == "ann-b")].reset_index(drop=True)
    pd.testing.assert_frame_equal(pair, before)
    assert pair["cohen_kappa_lo"].notna().any()


def ac1_reference(ratings: list[list]) -> dict:
    """Gwet's AC1 for any number of raters with missing ratings (None), written from the
    formulas of Gwet (2014, ch. 2) as the irrCAC package states them: r_ik raters putting
    subject i in category k; pa over subjects with 2+ ratings; pi_k the mean over subjects of
    r_ik / r_i; pe = sum_k pi_k (1 - pi_k) / (q - 1)."""
    cats = sorted({x for row in ratings for x in row if x is not None})
    r = np.array([[sum(x == k for x in row) for k in cats] for row in ratings], float)
    ri = r.sum(axis=1)
    two = ri >= 2
    pa = np.mean((r[two] * (r[two] - 1)).sum(axis=1) / (ri[two] * (ri[two] - 1)))
    pi = np.mean(r / ri[:, None], axis=0)
    pe = (pi * (1 - pi)).sum() / (len(cats) - 1)
    return {"pa": pa, "pe": pe, "ac1": (pa - pe) / (1 - pe)}


def test_gwet_ac1_against_gwets_published_example_and_formulas():
    # Gwet (2014), 12 subjects rated by 4 raters into 5 categories, some ratings missing
    # (irrCAC's raw_4raters); published: pa = 0.8182, pe = 0.1903, AC1 = 0.7754.
    n = None
    gwet_4raters = [[1, 1, n, 1], [2, 2, 3, 2], [3, 3, 3, 3], [3, 3, 3, 3], [2, 2, 2, 2], [1, 2, 3, 4],
                    [4, 4, 4, 4], [1, 1, 2, 1], [2, 2, 2, 2], [n, 5, 5, 5], [n, n, 1, 1], [n, n, 3, n]]
    ref = ac1_reference(gwet_4raters)
    assert (round(ref["pa"], 4), round(ref["pe"], 4), round(ref["ac1"], 4)) == (0.8182, 0.1903, 0.7754)
    # Ours (two raters, every item rated by both) against that reference.
    rng = np.random.default_rng(11)
    for q, size in ((2, 60), (4, 200), (5, 37)):
        a = rng.integers(0, q, size)
        b = np.where(rng.random(size) < 0.6, a, rng.integers(0, q, size))
        if len(set(a) | set(b)) < q:
            continue
        assert gwet_ac1(a, b, q) == pytest.approx(ac1_reference(np.column_stack([a, b]).tolist())["ac1"], abs=1e-12)
    # By hand, 2 categories: 10 items, agreement 7/10, pi = (9/20, 11/20) -> pe = 2 * .45 * .55 = .495.
    a = np.array([0, 0, 1, 1, 0, 1, 0, 0, 1, 0])
    b = np.array([0, 1, 1, 1, 0, 0, 0, 0, 1, 1])
    assert gwet_ac1(a, b, 2) == pytest.approx((0.7 - 0.495) / (1 - 0.495))


def test_report_defines_seq_mean_and_says_which_scores_were_imported(tmp_path):
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from scoring.store import add_run, open_scores, write_scores

    ws = Ingest(tmp_path / "ws", IngestOptions(data=str(HELLASWAG), limit=60), get_adapter("hellaswag")).run()
    rng = np.random.default_rng(0)
    with open_scores(ws) as w:
        items = w.items()
        with w.transaction():
            for model, origin in (("org/imported-model", "imported:study-csv"), ("local-model", "scored")):
                add_run(w, run_id=f"run-{model}", model=model, origin=origin, info={})
                write_scores(w, [{"model": model, "mode": "full", "item_id": it["item_id"], "option_index": j,
                                  "seq_mean": float(rng.normal()), "content_hash": it["content_hash"],
                                  "run_id": f"run-{model}"} for it in items for j in range(4)])
    run_cli("analyze", ws, "--out", tmp_path / "report")
    md = (tmp_path / "report" / "report.md").read_text()
    assert "`seq_mean` is the mean log-probability over every predicted token of context" in md
    assert "were imported (study-csv), not computed by benchcurate: org/imported-model" in md
    assert "computed here: local-model" in md
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_text())
    assert {r["origin"] for r in metrics["provenance"]["score_runs"]} == {"imported:study-csv", "scored"}


def synthetic_ws(tmp_path, models, *, items=60, missing=None):
    """A 60-item HellaSwag workspace with seeded random full- and zero-mode seq_mean scores for
    ``models`` (labels as a user might type them). ``missing``: (model, mode, row) whose first
    option gets no value."""
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from scoring.store import add_run, open_scores, write_scores

    ws = Ingest(tmp_path / "ws", IngestOptions(data=str(HELLASWAG), limit=items), get_adapter("hellaswag")).run()
    rng = np.random.default_rng(1)
    with open_scores(ws) as w:
        rows = w.items()
        with w.transaction():
            for n, model in enumerate(models):
                for mode in ("full", "zero"):
                    run_id = f"run-{n}-{mode}"
                    add_run(w, run_id=run_id, model=model, origin="imported:test", info={})
                    write_scores(w, [{"model": model, "mode": mode, "item_id": it["item_id"], "option_index": j,
                                      "seq_mean": None if (model, mode, r, j) == (*(missing or ()), 0)
                                      else float(rng.normal()),
                                      "content_hash": it["content_hash"], "run_id": run_id}
                                     for r, it in enumerate(rows) for j in range(4)])
    return ws


LABELS = ["cost $\\foo$", "orgA/same", "orgB/same", "<script>alert(1)</script>", "x\ny", "`tick",
          "[click](javascript:alert(1))", "a;b"]


def test_report_keeps_any_model_label_literal_and_states_its_confidence_level(tmp_path):
    """Model labels are user text: a matplotlib math string, two labels that end alike, HTML,
    a line break, a backtick and a Markdown link all show as typed, in the plot, report.md and
    report.html. --alpha 0.1 gives 90% intervals (statsmodels' Wilson at alpha 0.1), and every
    text about them says 90%, the bootstrap's included."""
    import html as html_lib

    from statsmodels.stats.proportion import proportion_confint

    from curate.analyses import plots
    ws = synthetic_ws(tmp_path, LABELS)
    out = tmp_path / "report"
    proc = run_cli("analyze", ws, "--out", out, "--alpha", "0.1", "--bootstrap", "200")
    assert "Traceback" not in proc.stderr and (out / "accuracy.png").stat().st_size > 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["accuracy"]["confidence"] == pytest.approx(0.9)
    for r in m["accuracy"]["rows"]:
        assert (r["ci_low"], r["ci_high"]) == pytest.approx(
            proportion_confint(r["correct"], r["n"], alpha=0.1, method="wilson"), abs=1e-12)
    family = m["comparisons"]["modes"]["families"][0]
    assert family["confidence"] == pytest.approx(0.9) and "(90%)" in family["test"]
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert "90% Wilson score intervals" in md and "95%" not in md
    assert "<script>" not in md and "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert not re.search(r"(?<!\\)\]\(javascript", md) and "\\[click\\](javascript:alert(1))" in md
    assert "x\\\\ny" in md and "\\`tick" in md and "cost $\\\\foo$" in md
    assert not any(line.startswith("y |") for line in md.splitlines())  # a label's line break splits no row
    assert "<script>" not in page and html_lib.escape("`tick") in page and "<code>tick" not in page
    # In the plot: the two labels ending in "same" keep their prefixes; no label is shortened.
    assert plots._names(["orgA/same", "orgB/same"]) == {"orgA/same": "orgA/same", "orgB/same": "orgB/same"}
    assert plots._names(["org/a", "b"]) == {"org/a": "a", "b": "b"}
    counts = pd.read_csv(out / "core_items.csv")
    assert all(set(json.loads(v)) <= set(LABELS) for v in counts["models_correct"])


def test_one_model_has_no_paired_difference_and_typos_are_refused(tmp_path):
    """With one model there is no pair to compare: the paired detectable difference is 'n/a
    (one model)', never 'not detectable' or 'None'. A --model, --mode or --core-mode that the
    workspace does not have is an error naming what it has, not a smaller report."""
    ws = synthetic_ws(tmp_path, ["solo", "other"])
    out = tmp_path / "report"
    run_cli("analyze", ws, "--out", out, "--model", "solo", "--bootstrap", "200")
    row = json.loads((out / "metrics.json").read_text())["comparisons"]["detectable_difference"][0]
    assert row["model_pairs"] == 0 and row["mdd_paired"] is None and row["mdd_independent"] is not None
    table = [line for line in (out / "report.md").read_text().splitlines() if "n/a (one model)" in line]
    assert table[0].startswith("| all | 60 |") and len(table) == len(row_ := json.loads(
        (out / "metrics.json").read_text())["comparisons"]["detectable_difference"]) == 2, (table, row_)
    for line in table:  # median discordance and paired difference: nothing to compare
        assert line.count("n/a (one model)") == 2 and "None" not in line and "not detectable" not in line
    for args, message in ((["--model", "solo", "--model", "sol"], "for --model 'sol' (the workspace has: other, solo)"),
                          (["--mode", "zeros"], "for --mode 'zeros' (the workspace has: full, zero)"),
                          (["--modes", "full,zeros"], "for --mode 'zeros' (the workspace has: full, zero)"),
                          # a mode the toolkit knows but this workspace has no scores in
                          (["--mode", "choice-only"], "for --mode 'choice-only' (the workspace has: full, zero)"),
                          (["--core-mode", "zeros"], "--core-mode 'zeros' is not a prompt mode")):
        proc = run_cli("analyze", ws, "--out", tmp_path / "typo", *args, check=False)
        last = proc.stderr.strip().splitlines()[-1]  # after the progress bar's lines
        assert proc.returncode == 2 and last.startswith("error: ") and message in last, proc.stderr
        assert "Traceback" not in proc.stderr
        assert not (tmp_path / "typo" / "metrics.json").exists()


def test_one_missing_value_is_named_with_its_count(tmp_path):
    """One option without a seq_mean leaves no normalization complete for every model: the report
    (issue 37: never refused whole) reads that model under its own normalization and names the
    model, mode and how many options lack the primary one, rather than asking to score whole
    pairs; a normalization no model has is still refused, naming what lacks it."""
    ws = synthetic_ws(tmp_path, ["m1", "m2"], missing=("m2", "zero", 5))
    run_cli("analyze", ws, "--out", tmp_path / "r")
    report = (tmp_path / "r" / "report.md").read_text()
    assert "left out of its predictions: m2: `seq_mean` missing for m2/zero/cloze (1 of 240 options)" in report
    acc = json.loads((tmp_path / "r" / "metrics.json").read_text())["accuracy"]["rows"]
    zero = {r["model"]: r["n"] for r in acc if r["mode"] == "zero" and r["subset"] == "all"}
    assert zero == {"m1": 60, "m2": 59}  # m2 is read on the items it has values for
    proc = run_cli("analyze", ws, "--out", tmp_path / "r2", "--normalization", "char", check=False)
    assert proc.returncode == 2 and "normalization 'char' is missing for m1/full/cloze (240 of 240" in proc.stderr
    proc = run_cli("analyze", ws, "--out", tmp_path / "r", "--model", "m1")
    assert proc.returncode == 0


def test_a_report_replaces_the_last_one_whole_and_writes_nowhere_else(tmp_path):
    """The report is built beside the old one and swapped in at the end: a failed run leaves the
    old report as it was, a finished one leaves no file of the old one it did not write again (a
    core curve after --core-mode none), and a killed run's staging folder is cleared. A release
    folder, a decisions folder or any folder of other files is refused before any work."""
    ws = synthetic_ws(tmp_path, ["m1", "m2"])
    out = tmp_path / "report"
    run_cli("analyze", ws, "--out", out, "--bootstrap", "200")
    assert {"core_curve.png", "core_items.csv", "metrics.json"} <= {p.name for p in out.iterdir()}
    before = (out / "metrics.json").read_bytes()
    proc = run_cli("analyze", ws, "--out", out, "--model", "m3", check=False)  # fails after the checks
    assert proc.returncode == 2 and (out / "metrics.json").read_bytes() == before
    assert not (out / ".analyze-staging").exists()
    (out / ".analyze-staging").mkdir()  # what a kill -9 during the analyses leaves
    (out / ".analyze-staging" / "accuracy.png").write_bytes(b"half")
    run_cli("analyze", ws, "--out", out, "--bootstrap", "200", "--core-mode", "none")
    names = {p.name for p in out.iterdir()}
    assert "core_curve.png" not in names and "core_items.csv" not in names and ".analyze-staging" not in names
    metrics = json.loads((out / "metrics.json").read_text())
    assert names == {"metrics.json", "report.md", "report.html", metrics["suspects"]["stats_file"], "suspects",
                     *metrics["plots"].values()}
    # A report killed while swapped in lacks metrics.json: it is still this command's to replace.
    (out / "metrics.json").unlink()
    run_cli("analyze", ws, "--out", out, "--bootstrap", "200")
    assert (out / "metrics.json").is_file()

    for folder, holds, message in (("release", "manifest.json", "is a release folder"),
                                   ("decisions", "summary.json", "is not an earlier `curate analyze` report"),
                                   ("notes", "todo.txt", "it holds todo.txt")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / holds).write_text("{}")
        proc = run_cli("analyze", ws, "--out", tmp_path / folder, check=False)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert [p.name for p in (tmp_path / folder).iterdir()] == [holds]
