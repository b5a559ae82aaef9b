"""`analyze --alpha` anywhere in (0, 1) (issue 26): 0.8 raised a TypeError and 0.9 to 0.999999 a
scipy brentq ValueError, from the minimum detectable difference. Every interval and power figure
is checked at each alpha against a computation written here (scipy's normal quantiles, scipy's
bootstrap, statsmodels' power, a simulated McNemar test), on the study's released scores."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_confint, proportion_effectsize

from conftest import HELLASWAG, PAPER_SCORES, run_cli
from curate.analyses import accuracy, comparisons, stats

ALPHAS = (0.001, 0.05, 0.5, 0.8, 0.9, 0.99, 0.999999)
MODELS = ("EleutherAI--pythia-1b", "meta-llama--Llama-3.2-1B", "Qwen--Qwen2.5-1.5B")
ITEMS = 200
POWER = 0.8  # the report's power for detectable differences


@pytest.fixture(scope="module")
def study_ws(tmp_path_factory):
    """The first 200 HellaSwag validation items with the study's released seq_mean scores of
    three models in the full and zero modes."""
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from scoring.store import add_run, open_scores, write_scores

    ws = Ingest(tmp_path_factory.mktemp("alpha") / "ws", IngestOptions(data=str(HELLASWAG),
                                                                       limit=ITEMS), get_adapter("hellaswag")).run()
    with open_scores(ws) as w:
        items = w.items()
        with w.transaction():
            for stem in MODELS:
                for mode in ("full", "zero"):
                    values = pd.read_csv(PAPER_SCORES / f"{mode}_prompt" / f"{stem}.csv", nrows=ITEMS).to_numpy()
                    run = f"study-{stem}-{mode}"
                    add_run(w, run_id=run, model=stem.replace("--", "/"), origin="imported:test", info={})
                    write_scores(w, [{"model": stem.replace("--", "/"), "mode": mode, "item_id": it["item_id"],
                                      "option_index": j, "content_hash": it["content_hash"], "run_id": run,
                                      "seq_mean": float(values[r, j])} for r, it in enumerate(items) for j in range(4)])
    return ws


@pytest.fixture(scope="module")
def preds(study_ws):
    from scoring.store import open_scores, read_scores
    with open_scores(study_ws) as w:
        gold = pd.Series({it["item_id"]: it["gold"] for it in w.items()})
        return accuracy.all_predictions(read_scores(w), gold)


def wilson_by_hand(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Wilson (1927): (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), z = z_{1-alpha/2}."""
    z, p = sps.norm.ppf(1 - alpha / 2), k / n
    centre, half = p + z * z / (2 * n), z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


def paired_power_by_hand(n: int, psi: float, d: float, alpha: float) -> float:
    """Power of the two-sided McNemar z test, both rejection regions (Connor 1987's variances):
    null variance psi, alternative psi - d^2, shift sqrt(n) d."""
    z, s = sps.norm.ppf(1 - alpha / 2) * np.sqrt(psi), np.sqrt(psi - d * d)
    return sps.norm.cdf((np.sqrt(n) * d - z) / s) + sps.norm.cdf((-np.sqrt(n) * d - z) / s)


def paired_power_simulated(n: int, psi: float, d: float, alpha: float, rng) -> float:
    """Share of 20000 simulated studies in which the two-sided McNemar z test rejects at alpha:
    each item right under a only (psi + d) / 2, under b only (psi - d) / 2."""
    counts = rng.multinomial(n, [(psi + d) / 2, (psi - d) / 2, 1 - psi], size=20000)
    b, c = counts[:, 0], counts[:, 1]
    z = np.where(b + c > 0, (b - c) / np.sqrt(np.maximum(b + c, 1)), 0.0)
    return float(np.mean(np.abs(z) > sps.norm.ppf(1 - alpha / 2)))


@pytest.mark.parametrize("alpha", ALPHAS)
def test_every_interval_and_power_figure_is_right_at_any_alpha(preds, alpha):
    assert stats.level(alpha) == {0.001: "99.9%", 0.05: "95%", 0.5: "50%", 0.8: "20%", 0.9: "10%", 0.99: "1%",
                                  0.999999: "0.0001%"}[alpha]
    # Wilson intervals: the formula by hand, and statsmodels.
    acc = accuracy.accuracy_table(preds, alpha)
    assert len(acc) == 12  # 3 models x 2 modes, all items and source=activitynet (all of them)
    for r in acc.itertuples():
        assert (r.ci_low, r.ci_high) == pytest.approx(wilson_by_hand(r.correct, r.n, alpha), abs=1e-12)
        assert (r.ci_low, r.ci_high) == pytest.approx(proportion_confint(r.correct, r.n, alpha, "wilson"), abs=1e-12)
        assert r.ci_low <= r.accuracy <= r.ci_high
    # Paired bootstrap intervals of full - zero: scipy's percentile bootstrap (its own resamples,
    # so within resampling noise), and narrower as alpha grows.
    family = comparisons.mode_comparisons(preds, ["full", "zero"], alpha=alpha)["families"][0]
    assert family["confidence"] == pytest.approx(1 - alpha) and f"({stats.level(alpha)})" in family["test"]
    for row in family["rows"]:
        g = preds[preds["model"] == row["model"]].pivot(index="item_id", columns="mode", values="correct")
        diff = g["full"].astype(float).to_numpy() - g["zero"].astype(float).to_numpy()
        ref = sps.bootstrap((diff,), np.mean, confidence_level=1 - alpha, n_resamples=20000, method="percentile",
                            random_state=np.random.default_rng(1)).confidence_interval
        assert (row["boot_ci_low"], row["boot_ci_high"]) == pytest.approx((ref.low, ref.high), abs=0.025)
    # Minimum detectable differences: statsmodels' power at the independent one, the paired
    # z test's power written out above at the paired one (simulated in the next test); 0 once
    # alpha >= power (no difference at all is rejected with probability alpha).
    rows = comparisons.detectable_differences(preds, {"all": list(preds["item_id"].unique())}, "full", alpha=alpha)
    (row,) = rows
    n, base, psi = row["n"], row["baseline_accuracy"], row["median_discordant"]
    if alpha >= POWER:
        assert row["mdd_independent"] == 0 and row["mdd_paired"] == 0
        assert NormalIndPower().power(0, nobs1=n, alpha=alpha) == pytest.approx(alpha)
        assert paired_power_by_hand(n, psi, 0.0, alpha) == pytest.approx(alpha)
    else:
        h = proportion_effectsize(base + row["mdd_independent"], base)
        assert NormalIndPower().power(h, nobs1=n, alpha=alpha) == pytest.approx(POWER, abs=1e-6)
        if row["mdd_paired"] is None:  # not even the largest difference, psi, reaches the power
            assert paired_power_by_hand(n, psi, psi - 1e-12, alpha) < POWER
        else:
            assert paired_power_by_hand(n, psi, row["mdd_paired"], alpha) == pytest.approx(POWER, abs=1e-9)


def test_paired_power_is_alpha_with_no_difference_for_any_alpha():
    """The two-sided paired test's power at no difference is its size, alpha; Connor's one-tail
    formula gave alpha / 2 (0.45 at alpha 0.9, so a 'detectable' difference was solved for)."""
    rng = np.random.default_rng(0)
    for alpha in ALPHAS:
        assert stats.paired_power(1000, 0.2, 0.0, alpha=alpha) == pytest.approx(alpha, rel=1e-9)
    for alpha in (0.3, 0.6):  # between: the simulated test agrees at the solved difference
        d = stats.mdd_paired(1000, 0.2, alpha=alpha)
        assert 0 < d < 0.2 and paired_power_simulated(1000, 0.2, d, alpha, rng) == pytest.approx(POWER, abs=0.015)


def test_analyze_runs_at_alpha_0_8_and_states_its_level(study_ws, tmp_path):
    """The command end to end at 0.8, where it raised a TypeError (statsmodels' solve_power)."""
    out = tmp_path / "report"
    run_cli("analyze", study_ws, "--out", out, "--alpha", "0.8", "--bootstrap", "200")
    m = json.loads((out / "metrics.json").read_text())
    for r in m["accuracy"]["rows"]:
        assert (r["ci_low"], r["ci_high"]) == pytest.approx(wilson_by_hand(r["correct"], r["n"], 0.8), abs=1e-12)
    assert {(r["mdd_independent"], r["mdd_paired"]) for r in m["comparisons"]["detectable_difference"]} == {(0, 0)}
    assert "Intervals are 20% Wilson score intervals; tests use alpha = 0.8." in (out / "report.md").read_text()
