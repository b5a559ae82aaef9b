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
