"""Each statistic against a case small enough to compute by hand, and against scipy/statsmodels."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize

from curate.core import statistics
from curate.analyses import stats

Z = sps.norm.ppf(0.975)


def paired(both, only_a, only_b, neither):
    a = [1] * both + [1] * only_a + [0] * only_b + [0] * neither
    b = [1] * both + [0] * only_a + [1] * only_b + [0] * neither
    return np.array(a, bool), np.array(b, bool)


def test_wilson_matches_the_closed_form():
    for k, n in ((5, 10), (0, 10), (37, 50)):
        p = k / n
        centre = (p + Z ** 2 / (2 * n)) / (1 + Z ** 2 / n)
        half = Z * math.sqrt(p * (1 - p) / n + Z ** 2 / (4 * n ** 2)) / (1 + Z ** 2 / n)
        assert stats.wilson(k, n) == pytest.approx((centre - half, centre + half), abs=1e-12)
    assert stats.wilson(0, 10)[1] == pytest.approx(Z ** 2 / (10 + Z ** 2))  # 0 of n: upper = z^2/(n+z^2)
    assert all(math.isnan(x) for x in stats.wilson(0, 0))


def test_exact_mcnemar_by_hand_and_against_statsmodels_and_scipy():
    a, b = paired(both=3, only_a=9, only_b=1, neither=2)
    two = stats.mcnemar_exact(a, b)
    # 10 discordant pairs, 1 on the smaller side: p = 2 * P(X <= 1 | n=10, 1/2) = 2 * 11 / 1024.
    assert two["p"] == pytest.approx(22 / 1024)
    assert two["p"] == pytest.approx(mcnemar([[3, 9], [1, 2]], exact=True).pvalue)
    assert (two["only_a"], two["only_b"], two["n"], two["difference"]) == (9, 1, 15, pytest.approx(8 / 15))
    greater = stats.mcnemar_exact(a, b, alternative="greater")
    assert greater["p"] == pytest.approx(11 / 1024)  # P(X >= 9)
    assert greater["p"] == pytest.approx(sps.binomtest(9, 10, 0.5, alternative="greater").pvalue)
    assert stats.mcnemar_exact(a, b, alternative="less")["p"] == pytest.approx(1 - 1 / 1024)
    # No discordant pair: nothing to test, p = 1 both ways.
    same = np.array([1, 0, 1], bool)
    assert stats.mcnemar_exact(same, same)["p"] == 1.0
    assert stats.mcnemar_exact(same, same, alternative="greater")["p"] == 1.0
    with pytest.raises(ValueError):
        stats.mcnemar_exact(a, b, alternative="bigger")


def test_corrections_by_hand_and_against_statsmodels():
    adj = stats.corrected([0.01, 0.04, 0.03])
    assert adj["bonferroni"] == pytest.approx([0.03, 0.12, 0.09])
    # Holm: sorted 0.01*3, 0.03*2, 0.04*1 -> 0.03, 0.06, max(0.06, 0.04) = 0.06.
    assert adj["holm"] == pytest.approx([0.03, 0.06, 0.06])
    assert stats.corrected([]) == {"holm": [], "bonferroni": []}


def test_intersection_union_is_the_largest_p():
    assert stats.intersection_union([0.01, 0.04, 0.002]) == 0.04
    with pytest.raises(ValueError):
        stats.intersection_union([])


def test_cohens_kappa_by_hand_and_against_statsmodels():
    # Table [[20, 5], [10, 15]]: po = 0.7, pe = (25*30 + 25*20) / 50^2 = 0.5, kappa = 0.4.
    a = [0] * 25 + [1] * 25
    b = [0] * 20 + [1] * 5 + [0] * 10 + [1] * 15
    assert statistics.cohens_kappa(a, b, 2) == pytest.approx(0.4)
    assert statistics.cohens_kappa(a, b, 4) == pytest.approx(0.4)  # unused options change nothing
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 4, 300), rng.integers(0, 4, 300)
    table = np.zeros((4, 4))
    np.add.at(table, (x, y), 1)
    assert statistics.cohens_kappa(x, y, 4) == pytest.approx(sm_kappa(table, return_results=False))


def test_paired_bootstrap_by_hand_and_against_scipy():
    ones, zeros = np.ones(50), np.zeros(50)
    same = stats.paired_bootstrap(ones, ones, n_resamples=500)
    assert (same["difference"], same["ci_low"], same["ci_high"], same["p"]) == (0, 0, 0, 1.0)
    apart = stats.paired_bootstrap(ones, zeros, n_resamples=500)
    assert (apart["ci_low"], apart["ci_high"]) == (1, 1)
    assert apart["p"] == pytest.approx(2 / 501)  # no resample reaches 0: (0 + 1) / (500 + 1), two-sided
    rng = np.random.default_rng(7)
    a, b = rng.random(800) < 0.6, rng.random(800) < 0.5
    ours = stats.paired_bootstrap(a, b, n_resamples=1000, seed=11)
    ref = sps.bootstrap((a.astype(float), b.astype(float)), lambda x, y, axis=-1: x.mean(axis) - y.mean(axis),
                        paired=True, vectorized=True, n_resamples=1000, method="percentile",
                        rng=np.random.default_rng(11))
    # Same generator, same seed: scipy draws the same resamples, so the intervals agree closely.
    assert (ours["ci_low"], ours["ci_high"]) == pytest.approx(
        (ref.confidence_interval.low, ref.confidence_interval.high), abs=2e-3)
    assert ours == stats.paired_bootstrap(a, b, n_resamples=1000, seed=11)  # seeded: reproducible
    with pytest.raises(ValueError):
        stats.paired_bootstrap(a, b[:-1])


def test_paired_bootstrap_keeps_the_numbers_of_its_own_draws():
    """scipy's bootstrap draws what the hand-written one drew (numpy's default_rng(seed), items
    resampled in batches of 250): the intervals agree to rounding and the p-value exactly; one
    pair (which scipy cannot resample) still gets its interval."""
    rng = np.random.default_rng(7)
    a, b = rng.random(300) < 0.6, rng.random(300) < 0.5
    diff = a.astype(float) - b.astype(float)
    draws = np.random.default_rng(11)
    dist = np.concatenate([diff[draws.integers(0, diff.size, size=(min(250, 1000 - done), diff.size))].mean(axis=1)
                           for done in range(0, 1000, 250)])
    ours = stats.paired_bootstrap(a, b, n_resamples=1000, seed=11)
    assert (ours["ci_low"], ours["ci_high"]) == pytest.approx(tuple(np.quantile(dist, [0.025, 0.975])), abs=1e-12)
    hits = min(int((dist <= 0).sum()), int((dist >= 0).sum()))
    assert ours["p"] == min(1.0, 2 * (hits + 1) / 1001)
    one = stats.paired_bootstrap(np.array([1.0]), np.array([0.0]), n_resamples=100)
    assert (one["ci_low"], one["ci_high"], one["p"]) == (1.0, 1.0, 2 / 101)


def test_every_bootstrap_draws_from_one_scheme():
    """bootstrap_rng(seed) is default_rng(seed); with an annotator pair's names it is the pair's
    generator as agreement has always seeded it (sha256 of the names)."""
    import hashlib

    assert (statistics.bootstrap_rng(5).integers(0, 10**9, 4) == np.random.default_rng(5).integers(0, 10**9, 4)).all()
    words = np.frombuffer(hashlib.sha256(b"a\0b").digest()[:16], dtype=np.uint32).tolist()
    want = np.random.default_rng([3, *words]).integers(0, 10**9, 4)
    assert (statistics.bootstrap_rng(3, "a", "b").integers(0, 10**9, 4) == want).all()
    assert (statistics.bootstrap_rng(3, "a", "b").integers(0, 10**9, 4) == want).all()


def test_fisher_one_sided_by_hand():
    # 3/3 vs 0/3: the one table at least this extreme has probability 1 / C(6, 3) = 1/20.
    assert stats.fisher_greater(3, 3, 0, 3) == pytest.approx(0.05)
    assert stats.fisher_greater(0, 3, 3, 3) == pytest.approx(1.0)


def test_minimum_detectable_difference_round_trips_through_statsmodels():
    n, base = 1000, 0.6
    mdd = stats.mdd_independent(n, base)
    h = proportion_effectsize(base + mdd, base)
    assert h == pytest.approx((Z + sps.norm.ppf(0.8)) * math.sqrt(2 / n), rel=1e-3)  # normal approximation
    assert NormalIndPower().power(effect_size=h, nobs1=n, alpha=0.05) == pytest.approx(0.8, abs=1e-3)
    assert stats.mdd_independent(4 * n, base) < mdd  # more items, smaller detectable difference
    # The paired formula (Connor 1987) is checked in tests/test_reliability_stats.py.
