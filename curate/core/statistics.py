"""Statistics more than one layer uses: chance-corrected agreement of two raters, and the one
random-number scheme of every bootstrap (``bootstrap_rng``).

A foundation module (numpy and statsmodels only), so that annotator agreement
(``annotate.agreement``) and the report's mode agreement (``curate.analyses.agreement``) compute
kappa one way without the annotation layer importing the report's modules. The report's own
tests and intervals are in ``curate.analyses.stats``.
"""
from __future__ import annotations

import numpy as np


def cohens_kappa(pred_a, pred_b, n_categories: int) -> float:
    """Cohen's kappa of two raters' category codes (0..n_categories-1) over the same items,
    by statsmodels from their contingency table.

    Convention: kappa = (po - pe) / (1 - pe) wherever pe < 1, so two raters who each use one
    category, different ones, get 0 (po = pe = 0; sklearn's cohen_kappa_score agrees). Only
    when both put every item in one and the same category is pe = 1 and kappa undefined: NaN.
    """
    from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa

    table = np.zeros((n_categories, n_categories))
    np.add.at(table, (np.asarray(pred_a, int), np.asarray(pred_b, int)), 1)
    n = table.sum()
    if n == 0:
        return float("nan")
    chance = float((table.sum(0) / n) @ (table.sum(1) / n))
    if chance >= 1 - 1e-12:
        return float("nan")
    return float(sm_kappa(table, return_results=False))


def bootstrap_rng(seed: int, *names: str) -> np.random.Generator:
    """The generator of a bootstrap: numpy's ``default_rng`` seeded by ``seed`` and, where given,
    the ``names`` the resamples belong to (an annotator pair), so that those resamples do not
    change when other names are added. Without names it is ``default_rng(seed)`` itself
    (``default_rng([seed])`` draws the same numbers), the generator the report's bootstraps have
    always used, so one scheme serves both without changing any published interval."""
    if not names:
        return np.random.default_rng([seed])
    import hashlib

    digest = hashlib.sha256("\0".join(names).encode("utf-8")).digest()
    return np.random.default_rng([seed, *np.frombuffer(digest[:16], dtype=np.uint32).tolist()])
