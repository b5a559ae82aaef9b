"""Per-item statistics across models: how hard an item is, how well it separates strong from weak
models, its 2PL IRT parameters and fit, and whether it is too easy to tell models apart.

Definitions (docs/item-validity.md has them with formulas):

- ``difficulty``: the share of models answering the item right (classical test theory's p;
  higher = easier); a model that only answers counts with the share of its answers that are
  right, one that did not answer the item not at all.
- ``discrimination``: the corrected item-total point-biserial correlation, the Pearson
  correlation over models between being right on the item and the number of *other* items the
  model gets right; negative when weaker models get it right more often than stronger ones (a
  mis-keyed item's signature). NaN when every model is right, or every model wrong.
- ``irt_a``, ``irt_b`` (with standard errors), ``infit``, ``outfit``: the 2PL fit of
  ``curate.validity.irt.fit_2pl``, with at least ``IRT_MIN_MODELS`` models; NaN with fewer.
- ``easy``: every model right, each with probability >= ``EASY_CONFIDENCE`` on the gold option
  (SMART filtering's "easy" criterion, Gupta et al. 2025: all models right with high confidence);
  a model that only answers: right in every answer.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from curate.validity.irt import fit_2pl
from curate.validity.responses import Responses

#: The probability on the gold option every model must reach for an item to count as easy.
EASY_CONFIDENCE = 0.8
#: Fewer models than this get no 2PL fit: an item's two parameters would rest on fewer right/wrong
#: answers than that, so the priors, not the models, would decide them (with two models b ran
#: from -26 to 27 before the bound held at the end too).
IRT_MIN_MODELS = 5
IRT_COLUMNS = ("irt_a", "irt_b", "irt_a_se", "irt_b_se", "infit", "outfit")


def item_statistics(responses: Responses) -> pd.DataFrame:
    """One row per item (in the responses' order) with the columns the module docstring names."""
    correct = responses.correct
    if len(correct) >= IRT_MIN_MODELS:
        fit = fit_2pl(correct)
        irt = {"irt_a": fit.a, "irt_b": fit.b, "irt_a_se": fit.a_se, "irt_b_se": fit.b_se,
               "infit": fit.infit, "outfit": fit.outfit}
    else:
        irt = dict.fromkeys(IRT_COLUMNS, np.full(correct.shape[1], np.nan))
    return pd.DataFrame({
        "item_id": responses.item_ids,
        "difficulty": np.nanmean(np.asarray(correct, dtype=float), axis=0),
        "discrimination": corrected_item_total(correct),
        **irt,
        "easy": easy_items(responses),
    })


def irt_note(n_models: int) -> str | None:
    """Why the statistics hold no 2PL fit, for the report and the export; None when they do."""
    if n_models >= IRT_MIN_MODELS:
        return None
    return (f"no 2PL IRT fit: {n_models} model{'s' * (n_models != 1)}, and a fit needs at least {IRT_MIN_MODELS} "
            "(with fewer, each item's two parameters rest on fewer right/wrong answers than that, and the priors "
            "decide them); irt_a, irt_b, infit and outfit are empty")


def corrected_item_total(correct: np.ndarray) -> np.ndarray:
    """Per item, corr over models of (right on the item, share right on the other items). NaN
    cells (a model that did not answer the item) are left out of that item's correlation and of
    the model's share; shares of answers right (an answer-only model's runs) count as they are."""
    x = np.asarray(correct, dtype=float)
    seen = ~np.isnan(x)
    x0 = np.where(seen, x, 0.0)
    others = seen.sum(axis=1, keepdims=True) - seen
    rest = np.divide(x0.sum(axis=1, keepdims=True) - x0, others, out=np.zeros_like(x0), where=others > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        n = seen.sum(axis=0)
        xc = np.where(seen, x0 - x0.sum(axis=0) / n, 0.0)
        rc = np.where(seen, rest - (rest * seen).sum(axis=0) / n, 0.0)
        denom = np.sqrt((xc**2).sum(axis=0) * (rc**2).sum(axis=0))
        return np.where(denom > 0, (xc * rc).sum(axis=0) / denom, np.nan)


#: Items per block of the pairwise isotonic R^2 (memory: a few blocks x items floats).
ISOTONIC_BLOCK = 512


def signed_isotonic_r2(correct: np.ndarray) -> np.ndarray:
    """The signed isotonic R^2 of Hardy, Gilbert and Domingue (2026), per item averaged over the
    other items: for two items, the largest share of one's variance over the models that a
    monotone function of the other explains, signed by their association (Kendall's tau). On
    right/wrong answers that is sign(phi) * phi^2, phi their correlation over the models that
    answered both (a model answering several times counts as right where most of its answers
    are); pairs where either item does not vary are left out, NaN for an item with none. Low
    (negative) where an item goes against the rest of the test. Quadratic in the items (about 3 s
    for 10042 items here), so it is measured beside the other signals (benchmarks/real_errors.py)
    rather than computed for every report."""
    x = np.asarray(correct, dtype=float)
    seen = (~np.isnan(x)).astype(np.float32)
    right = np.where(seen > 0, (np.nan_to_num(x) >= 0.5), 0).astype(np.float32)
    out = np.full(x.shape[1], np.nan)
    for start in range(0, x.shape[1], ISOTONIC_BLOCK):
        rows = slice(start, start + ISOTONIC_BLOCK)
        n = np.maximum(seen[:, rows].T @ seen, 1)   # block x items: models that answered both
        pi = (right[:, rows].T @ seen) / n          # share right on i, over the models that answered both
        pj = (seen[:, rows].T @ right) / n
        cov = (right[:, rows].T @ right) / n - pi * pj
        var = (pi * (1 - pi)) * (pj * (1 - pj))
        valid = var > 1e-9
        valid[np.arange(valid.shape[0]), np.arange(start, start + valid.shape[0])] = False
        r2 = np.where(valid, cov * np.abs(cov) / np.where(valid, var, 1), 0)
        counted = valid.sum(axis=1)
        out[rows] = np.where(counted > 0, r2.sum(axis=1) / np.maximum(counted, 1), np.nan)
    return out


def easy_items(responses: Responses, confidence: float = EASY_CONFIDENCE) -> np.ndarray:
    """Items every model answers right with probability >= ``confidence`` on the gold; a model
    that only answers (no probability to read) must be right in every answer it gave, and one
    that did not answer the item does not count."""
    on_gold = gold_probabilities(responses)
    answers = responses.answer_only
    correct = np.asarray(responses.correct, dtype=float)
    sure = (correct == 1) & (on_gold >= confidence)
    sure[answers] = (correct[answers] == 1) | np.isnan(correct[answers])
    return sure.all(axis=0)


def gold_probabilities(responses: Responses) -> np.ndarray:
    """models x items: each model's probability of the gold option."""
    cols = np.arange(len(responses.gold))
    return responses.probs[:, cols, responses.gold]
