"""Statistics for comparing accuracies: intervals, paired tests, corrections, power.

Every test here is a call into scipy or statsmodels; this module only chooses the right one
and shapes its inputs. Comparisons on the same items are paired (exact McNemar on the
discordant pairs, or a paired bootstrap), never pooled across conditions, and a family of
comparisons is corrected with Holm and Bonferroni side by side.
"""
from __future__ import annotations

import decimal

import numpy as np
import pandas as pd
from scipy import optimize
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_confint

from curate.core.statistics import bootstrap_rng

#: The interval method every accuracy in the report uses.
INTERVAL = "wilson"


def level(alpha: float) -> str:
    """The confidence level of intervals at ``alpha``, as the report states it ("95%"), exact
    for any 0 < alpha < 1: decimal arithmetic on alpha as typed, so 0.07 reads 93% (not
    93.00000000000001%) and 1e-9 reads 99.9999999% (six significant digits said 100%)."""
    with decimal.localcontext(prec=400):  # enough digits for 1 - the smallest float
        return f"{((1 - decimal.Decimal(repr(alpha))) * 100).normalize():f}%"


def wilson(correct: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for ``correct`` of ``n`` (NaNs for n = 0). The bound at 0 of 0
    right (1 of all right) is exactly 0 (1), not the rounding residue of the formula."""
    if n == 0:
        return float("nan"), float("nan")
    low, high = proportion_confint(int(correct), int(n), alpha=alpha, method="wilson")
    return (0.0 if correct == 0 else float(low)), (1.0 if correct == n else float(high))


def paired_outcomes(a, b) -> tuple[np.ndarray, np.ndarray, int]:
    """Two right/wrong vectors over the same items as booleans, without the pairs where either
    side is missing (NaN or None: no prediction, which is neither right nor wrong), and how many
    pairs were left out."""
    a, b = (np.asarray(pd.array(list(x), dtype="boolean")) for x in (a, b))
    if a.shape != b.shape:
        raise ValueError(f"paired vectors differ in length: {a.shape} vs {b.shape}")
    known = ~(pd.isna(a) | pd.isna(b))
    return a[known].astype(bool), b[known].astype(bool), int((~known).sum())


def paired_counts(a, b) -> dict:
    """Counts of the 2x2 paired table of two right/wrong vectors over the same items; pairs
    with a missing value on either side are counted in ``missing`` and nowhere else."""
    a, b, missing = paired_outcomes(a, b)
    return {"both": int((a & b).sum()), "only_a": int((a & ~b).sum()),
            "only_b": int((~a & b).sum()), "neither": int((~a & ~b).sum()), "missing": missing}


def mcnemar_exact(a, b, alternative: str = "two-sided") -> dict:
    """Exact McNemar test of "a and b are right equally often" on paired boolean vectors.

    two-sided: statsmodels' exact McNemar. greater / less (a better / worse than b): the
    same exact binomial test on the discordant pairs, one-sided, via scipy's binomtest.
    """
    c = paired_counts(a, b)
    discordant = c["only_a"] + c["only_b"]
    if alternative == "two-sided":
        p = mcnemar([[c["both"], c["only_a"]], [c["only_b"], c["neither"]]], exact=True).pvalue
    elif alternative in ("greater", "less"):
        p = sps.binomtest(c["only_a"], discordant, 0.5, alternative=alternative).pvalue if discordant else 1.0
    else:
        raise ValueError(f"alternative must be two-sided, greater or less, not {alternative!r}")
    n = c["both"] + c["only_a"] + c["only_b"] + c["neither"]
    return {**c, "n": n, "difference": (c["only_a"] - c["only_b"]) / n if n else float("nan"),
            "alternative": alternative, "test": "exact McNemar", "p": float(p)}


def paired_bootstrap(a, b, *, n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95,
                     batch: int = 250) -> dict:
    """Percentile bootstrap of mean(a) - mean(b), resampling items with replacement (pairs
    kept together): ``scipy.stats.bootstrap`` on the per-item differences, its resamples drawn
    from ``curate.core.statistics.bootstrap_rng(seed)`` (numpy's ``default_rng(seed)``) in batches of
    ``batch``. Pairs with a missing side are left out, as in ``paired_counts``.

    The p-value is two-sided: twice the smaller share of resampled differences on either
    side of zero, counted as (hits + 1) / (resamples + 1) so it is never 0 (capped at 1).
    """
    if np.shape(a) != np.shape(b) or np.ndim(a) != 1:
        raise ValueError(f"paired bootstrap needs two equal vectors, got {np.shape(a)} and {np.shape(b)}")
    a, b, _ = paired_outcomes(a, b)
    a, b = a.astype(float), b.astype(float)
    if a.size == 0:
        raise ValueError(f"paired bootstrap needs two equal, non-empty vectors, got {a.shape} and {b.shape}")
    diff = a - b
    if diff.size == 1:  # every resample is the one difference (scipy needs two observations)
        dist = np.full(n_resamples, diff[0])
        low, high = np.quantile(dist, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    else:
        res = sps.bootstrap((diff,), np.mean, n_resamples=n_resamples, batch=batch, vectorized=True,
                            confidence_level=confidence, method="percentile", rng=bootstrap_rng(seed))
        dist, (low, high) = res.bootstrap_distribution, res.confidence_interval
    hits = min(int((dist <= 0).sum()), int((dist >= 0).sum()))
    p = min(1.0, 2 * (hits + 1) / (n_resamples + 1))
    return {"difference": float(diff.mean()), "ci_low": float(low), "ci_high": float(high), "p": float(p),
            "n": int(diff.size), "n_resamples": n_resamples, "seed": seed, "test": "paired percentile bootstrap"}


def seed_bootstrap(values, *, n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95,
                   batch: int = 250) -> dict:
    """Percentile bootstrap of the mean of an items x seeds matrix (correctness, or a paired
    difference), resampling items and seeds with replacement, each resample from
    ``curate.core.statistics.bootstrap_rng(seed)`` (numpy's ``default_rng(seed)``). With one seed it
    resamples items only. The p-value is two-sided against a mean of 0, counted as in
    ``paired_bootstrap``.

    Not ``scipy.stats.bootstrap``: scipy resamples the observations of one axis (or several
    samples, each on its own), while this is a two-level bootstrap: every resample draws the
    seeds and, independently, the items, and weighs each drawn item by the drawn seeds. Its
    intervals would need a different statistic and other draws, and would change the published
    ones."""
    m = np.asarray(values, float)
    if m.ndim != 2 or m.size == 0:
        raise ValueError(f"seed bootstrap needs a non-empty items x seeds matrix, got shape {m.shape}")
    n, s = m.shape
    rng = bootstrap_rng(seed)
    dist = []
    for done in range(0, n_resamples, batch):
        size = min(batch, n_resamples - done)
        cols = rng.integers(0, s, size=(size, s))
        weights = np.stack([np.bincount(c, minlength=s) / s for c in cols])    # seed weights per resample
        rows = rng.integers(0, n, size=(size, n))
        per_item = m @ weights.T                                                # items x resamples
        dist.append(np.take_along_axis(per_item.T, rows, axis=1).mean(axis=1))
    dist = np.concatenate(dist)
    tail = (1 - confidence) / 2
    low, high = np.quantile(dist, [tail, 1 - tail])
    hits = min(int((dist <= 0).sum()), int((dist >= 0).sum()))
    return {"mean": float(m.mean()), "ci_low": float(low), "ci_high": float(high),
            "p": min(1.0, 2 * (hits + 1) / (n_resamples + 1)), "n_items": n, "seeds": s,
            "n_resamples": n_resamples, "seed": seed, "test": "percentile bootstrap over items and seeds"}


def sign_test(a, b, alternative: str = "two-sided") -> dict:
    """Exact sign test of "a and b are equally accurate" on paired per-item scores (e.g. accuracy
    averaged over seeds): the items where a is higher against those where b is, by scipy's
    binomtest at 0.5; ties carry no information. On 0/1 scores this is the exact McNemar test."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        raise ValueError(f"paired vectors differ in length: {a.shape} vs {b.shape}")
    a_better, b_better = int((a > b).sum()), int((a < b).sum())
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be two-sided, greater or less, not {alternative!r}")
    p = sps.binomtest(a_better, a_better + b_better, 0.5, alternative=alternative).pvalue if a_better + b_better else 1.0
    return {"n": int(a.size), "a_better": a_better, "b_better": b_better,
            "difference": float((a - b).mean()) if a.size else float("nan"), "alternative": alternative,
            "test": "exact sign test", "p": float(p)}


def corrected(pvalues, alpha: float = 0.05) -> dict:
    """Holm and Bonferroni adjusted p-values for one family of comparisons."""
    p = np.asarray(pvalues, float)
    if p.size == 0:
        return {"holm": [], "bonferroni": []}
    return {m: [float(x) for x in multipletests(p, alpha=alpha, method=m)[1]] for m in ("holm", "bonferroni")}


def intersection_union(pvalues) -> float:
    """p-value of the intersection-union test of "better in every setting".

    The claim holds at level alpha when every one-sided test rejects at alpha, so the IUT
    p-value is the largest one (no multiplicity correction is needed, or allowed).
    """
    p = np.asarray(pvalues, float)
    if p.size == 0:
        raise ValueError("intersection-union test of an empty family")
    return float(p.max())


def fisher_greater(correct_a: int, n_a: int, correct_b: int, n_b: int) -> float:
    """One-sided Fisher exact p that group a (disjoint items from b) is more accurate."""
    table = [[correct_a, n_a - correct_a], [correct_b, n_b - correct_b]]
    return float(sps.fisher_exact(table, alternative="greater").pvalue)


def mdd_independent(n: int, baseline: float, *, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Smallest accuracy gain over ``baseline`` that a two-sided test on two independent
    samples of ``n`` items each detects with ``power`` (Cohen's h, statsmodels).

    None when no gain is detectable: even an accuracy of 1 is less than the effect needed (a
    high baseline, or few items). Returning 1 - baseline there would claim a detectable gain.
    0 when ``alpha >= power`` (see ``smallest_detectable``).
    """
    start = np.arcsin(np.sqrt(baseline))
    h = smallest_detectable(lambda h: NormalIndPower().power(h, nobs1=n, alpha=alpha, ratio=1.0),
                            np.pi - 2 * start, power)  # the largest h: from baseline to an accuracy of 1
    if h is None or h == 0:  # 0 exactly, not sin(arcsin(x)) ** 2 - x's rounding residue
        return h
    return float(np.sin(start + h / 2) ** 2 - baseline)


def smallest_detectable(power_at, largest: float, power: float) -> float | None:
    """The smallest effect in [0, ``largest``] at which ``power_at(effect)`` reaches ``power``
    (None if even ``largest`` falls short).

    A two-sided test rejects with probability alpha when there is no effect at all, so when
    alpha >= power the answer is 0: any difference, none included, is "detected" that often.
    Solving for a positive effect there has no root (statsmodels' solve_power and brentq raise).
    """
    if power_at(0.0) >= power:
        return 0.0
    if power_at(largest) < power:
        return None
    return float(optimize.brentq(lambda e: power_at(e) - power, 0.0, largest, xtol=1e-12))


def paired_power(n: int, discordant: float, difference: float, *, alpha: float = 0.05) -> float:
    """Power of the two-sided paired (McNemar) z test on ``n`` items when a share ``discordant``
    of items is right under exactly one condition and the accuracies differ by ``difference``.

    Connor (1987): per item the paired difference has variance ``discordant`` under the null
    and ``discordant - difference**2`` under the alternative, so with s = sqrt(psi - d**2)
    power = Phi((sqrt(n) |d| - z sqrt(psi)) / s) + Phi((-sqrt(n) |d| - z sqrt(psi)) / s), z = z_{1-alpha/2}.
    Connor drops the second term (rejecting in the wrong direction), negligible at the usual
    alpha; kept here, the power at d = 0 is alpha, as it must be, for any alpha up to 1.
    """
    d, psi = abs(difference), discordant
    spread = np.sqrt(max(psi - d * d, 0.0))
    shift, critical = np.sqrt(n) * d, sps.norm.ppf(1 - alpha / 2) * np.sqrt(psi)
    if spread == 0:
        return 1.0 if shift > critical else 0.0
    return float(sps.norm.cdf((shift - critical) / spread) + sps.norm.cdf((-shift - critical) / spread))


def mdd_paired(n: int, discordant: float, *, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Smallest accuracy difference that a paired test on ``n`` shared items detects with
    ``power``, when a share ``discordant`` of items is right under exactly one condition:
    ``paired_power`` solved for the difference (0.1730 at n = 50, discordant = 0.2: Connor
    1987's sample-size formula inverted).

    NaN when no item is discordant (nothing to compare); None when no difference is detectable
    (the accuracies can differ by at most ``discordant``, and even that falls short of ``power``);
    0 when ``alpha >= power`` (see ``smallest_detectable``).
    """
    if discordant <= 0:
        return float("nan")
    return smallest_detectable(lambda d: paired_power(n, discordant, d, alpha=alpha), discordant, power)
