"""Statistics for comparing accuracies: intervals, paired tests, corrections, power.

Every test here is a call into scipy or statsmodels; this module only chooses the right one
and shapes its inputs. Comparisons on the same items are paired (exact McNemar on the
discordant pairs, or a paired bootstrap), never pooled across conditions, and a family of
comparisons is corrected with Holm and Bonferroni side by side.
"""
from __future__ import annotations

import numpy as np
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_confint

#: The interval method every accuracy in the report uses.
INTERVAL = "wilson"


def wilson(correct: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for ``correct`` of ``n`` (NaNs for n = 0)."""
    if n == 0:
        return float("nan"), float("nan")
    low, high = proportion_confint(int(correct), int(n), alpha=alpha, method="wilson")
    return float(low), float(high)


def paired_counts(a, b) -> dict:
    """Counts of the 2x2 paired table of two boolean vectors over the same items."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    if a.shape != b.shape:
        raise ValueError(f"paired vectors differ in length: {a.shape} vs {b.shape}")
    return {"both": int((a & b).sum()), "only_a": int((a & ~b).sum()),
            "only_b": int((~a & b).sum()), "neither": int((~a & ~b).sum())}


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
    n = sum(c.values())
    return {**c, "n": n, "difference": (c["only_a"] - c["only_b"]) / n if n else float("nan"),
            "alternative": alternative, "test": "exact McNemar", "p": float(p)}


def paired_bootstrap(a, b, *, n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95,
                     batch: int = 250) -> dict:
    """Percentile bootstrap of mean(a) - mean(b), resampling items with replacement (pairs
    kept together) from ``numpy.random.default_rng(seed)``.

    The p-value is two-sided: twice the smaller share of resampled differences on either
    side of zero, counted as (hits + 1) / (resamples + 1) so it is never 0 (capped at 1).
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"paired bootstrap needs two equal, non-empty vectors, got {a.shape} and {b.shape}")
    diff = a - b
    rng = np.random.default_rng(seed)
    dist = np.concatenate([diff[rng.integers(0, diff.size, size=(min(batch, n_resamples - done), diff.size))].mean(axis=1)
                           for done in range(0, n_resamples, batch)])
    tail = (1 - confidence) / 2
    low, high = np.quantile(dist, [tail, 1 - tail])
    hits = min(int((dist <= 0).sum()), int((dist >= 0).sum()))
    p = min(1.0, 2 * (hits + 1) / (n_resamples + 1))
    return {"difference": float(diff.mean()), "ci_low": float(low), "ci_high": float(high), "p": float(p),
            "n": int(diff.size), "n_resamples": n_resamples, "seed": seed, "test": "paired percentile bootstrap"}


def seed_bootstrap(values, *, n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95,
                   batch: int = 250) -> dict:
    """Percentile bootstrap of the mean of an items x seeds matrix (correctness, or a paired
    difference), resampling items and seeds with replacement, each resample from
    ``numpy.random.default_rng(seed)``. With one seed it resamples items only. The p-value is
    two-sided against a mean of 0, counted as in ``paired_bootstrap``."""
    m = np.asarray(values, float)
    if m.ndim != 2 or m.size == 0:
        raise ValueError(f"seed bootstrap needs a non-empty items x seeds matrix, got shape {m.shape}")
    n, s = m.shape
    rng = np.random.default_rng(seed)
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


def mdd_independent(n: int, baseline: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest accuracy gain over ``baseline`` that a two-sided test on two independent
    samples of ``n`` items each detects with ``power`` (Cohen's h, statsmodels)."""
    h = NormalIndPower().solve_power(effect_size=None, nobs1=n, alpha=alpha, power=power, ratio=1.0)
    target = np.arcsin(np.sqrt(baseline)) + h / 2
    return float(min(1.0, np.sin(min(target, np.pi / 2)) ** 2) - baseline)


def mdd_paired(n: int, discordant: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest accuracy difference that a paired test on ``n`` shared items detects with
    ``power``, when a share ``discordant`` of items is right under exactly one condition.

    Per item the paired difference is -1, 0 or +1 with variance discordant - d**2, so a
    one-sample test (statsmodels NormalIndPower with ratio=0) needs the standardized effect
    es = d / sqrt(discordant - d**2); solved for d.
    """
    if discordant <= 0:
        return float("nan")
    es = NormalIndPower().solve_power(effect_size=None, nobs1=n, alpha=alpha, power=power, ratio=0.0)
    return float(es * np.sqrt(discordant / (1 + es ** 2)))


def cohens_kappa(pred_a, pred_b, n_categories: int) -> float:
    """Cohen's kappa of two prediction vectors over the same items (statsmodels)."""
    from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa

    table = np.zeros((n_categories, n_categories))
    np.add.at(table, (np.asarray(pred_a, int), np.asarray(pred_b, int)), 1)
    if table.sum() == 0:
        return float("nan")
    return float(sm_kappa(table, return_results=False))
