"""Items whose gold label is likely wrong, from how many models answer them, with the evidence.

``label_error_score`` (docs/item-validity.md has the formula and the measured precision):

    L_j = max over options k != gold g of  sum_m w_m (log p_m(k) - log p_m(g)) / sum_m w_m
    label_error_score_j = L_j - DISCRIMINATION_WEIGHT * discrimination_j

p_m are each model's temperature-calibrated option probabilities (``responses.probs``), so a
confident model counts more than a hesitant one; w_m = ((acc_m - chance) / (acc_best - chance))
** ABILITY_POWER weights models by how far above chance they are, steeply: weak models agree with
each other on wrong options often enough that equal weights (naive Bayes) rank hard items above
mis-keyed ones (AUROC 0.92 against 0.98, benchmarks/detectors_gold_moves.py). The
``suspected_option`` is the k of L_j. ``discrimination`` is the corrected item-total correlation
(NaN counts as 0): on a mis-keyed item the models "right" are the ones that guessed the wrong key,
so it turns negative; an item that separates strong from weak models well is unlikely to be
mis-keyed. Outfit (misfit) was tried too and adds nothing on top of these two (logistic
regression weight about 0 on planted HellaSwag errors), so it is shown as evidence, not scored.

``several_correct_score``: the strong models' mean probabilities q sorted, q(2) - q(3): two
options share the mass and the rest have little. ``no_right_answer_score``: the normalized
entropy of q (1 = the strong models spread their probability evenly: no option stands out).
The scores give only relative probabilities across options, so "every option improbable" is
read as "no option preferred". Strong models: those at or above the median accuracy.

``two_best_baseline``: the simple detector to beat: the two most accurate models both prefer a
non-gold option (score: the smaller of their margins p(best non-gold) - p(gold)).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from curate.validity.item_stats import gold_probabilities, item_statistics
from curate.validity.responses import Responses

#: How steeply a model's weight falls with its accuracy (see the module docstring).
ABILITY_POWER = 16
#: Weight of the corrected item-total discrimination subtracted from the pooled log-odds.
DISCRIMINATION_WEIGHT = 4.0
#: Models listed in an item's evidence: those preferring the suspected option, strongest first.
EVIDENCE_MODELS = 10


def suspects(responses: Responses, stats: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per item, sorted by ``label_error_score`` descending (ties: the responses' order)."""
    stats = item_statistics(responses) if stats is None else stats
    log_odds, suspected = pooled_log_odds(responses, ability_weights(responses))
    score = log_odds - DISCRIMINATION_WEIGHT * np.nan_to_num(stats["discrimination"].to_numpy(float), nan=0.0)
    q = strong_mean_probs(responses)
    out = pd.DataFrame({
        "item_id": responses.item_ids,
        "label_error_score": score,
        "suspected_option": suspected,
        "several_correct_score": several_correct(q),
        "no_right_answer_score": flatness(q, responses.n_options),
        "evidence": evidence(responses, suspected, log_odds, stats),
    })
    return out.sort_values("label_error_score", ascending=False, kind="stable").reset_index(drop=True)


def ability_weights(responses: Responses) -> np.ndarray:
    """w_m = ((acc_m - chance) / (acc_best - chance)) ** ABILITY_POWER, 0 at or below chance."""
    acc = model_accuracy(responses)
    chance = float(np.mean(1.0 / responses.n_options))
    above = np.clip(acc - chance, 0, None)
    if not above.max() > 0:
        return np.ones(len(acc))
    return (above / above.max()) ** ABILITY_POWER


def pooled_log_odds(responses: Responses, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per item: max over non-gold k of the weighted mean over models of log p_m(k) - log p_m(gold),
    and that k."""
    logp = np.log(np.clip(np.nan_to_num(responses.probs, nan=0.0), 1e-12, None))
    total = np.tensordot(weights / weights.sum(), logp, axes=1)  # items x options
    cols = np.arange(len(responses.gold))
    diff = total - total[cols, responses.gold][:, None]
    width = diff.shape[1]
    invalid = (np.arange(width)[None, :] >= responses.n_options[:, None]) | (
        np.arange(width)[None, :] == responses.gold[:, None])
    diff = np.where(invalid, -np.inf, diff)
    best = diff.argmax(axis=1)
    return diff[cols, best], best


def model_accuracy(responses: Responses) -> np.ndarray:
    return responses.correct.mean(axis=1)


def strong_models(responses: Responses) -> np.ndarray:
    """Indices of the models at or above the median accuracy."""
    acc = model_accuracy(responses)
    return np.flatnonzero(acc >= np.median(acc))


def strong_mean_probs(responses: Responses) -> np.ndarray:
    """items x options: the strong models' mean probability of each option (0 past the last)."""
    return np.nan_to_num(responses.probs[strong_models(responses)], nan=0.0).mean(axis=0)


def several_correct(q: np.ndarray) -> np.ndarray:
    """q(2) - q(3) of each item's sorted mean probabilities (q(3) = 0 for two-option items): at
    most 0.5, when two options share all the mass."""
    ordered = -np.sort(-q, axis=1)
    third = ordered[:, 2] if q.shape[1] > 2 else np.zeros(len(q))
    return ordered[:, 1] - third


def flatness(q: np.ndarray, n_options: np.ndarray) -> np.ndarray:
    """Entropy of q over each item's options divided by log(number of options)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.nansum(np.where(q > 0, q * np.log(q), 0.0), axis=1)
        return np.where(n_options > 1, ent / np.log(np.maximum(n_options, 2)), 0.0)


def evidence(responses: Responses, suspected: np.ndarray, log_odds: np.ndarray, stats: pd.DataFrame) -> list[dict]:
    """Per item: the suspected option, the pooled log-odds, discrimination and outfit, and the
    models preferring the suspected option (strongest first) with their probabilities of it and
    of the gold."""
    order = np.argsort(-model_accuracy(responses), kind="stable")
    cols = np.arange(len(responses.gold))
    backs = responses.pred[order] == suspected[None, :]  # models strongest first x items
    p_sus = responses.probs[:, cols, suspected]
    p_gold = gold_probabilities(responses)
    disc, outfit = stats["discrimination"].to_numpy(float), stats["outfit"].to_numpy(float)
    out = []
    for j in cols:
        backers = order[np.flatnonzero(backs[:, j])[:EVIDENCE_MODELS]]
        out.append({
            "gold": int(responses.gold[j]), "suspected_option": int(suspected[j]),
            "log_odds": round(float(log_odds[j]), 3),
            "discrimination": None if np.isnan(disc[j]) else round(float(disc[j]), 3),
            "outfit": None if np.isnan(outfit[j]) else round(float(outfit[j]), 3),
            "models": [{"model": responses.models[m], "p_suspected": round(float(p_sus[m, j]), 3),
                        "p_gold": round(float(p_gold[m, j]), 3)} for m in backers],
        })
    return out


def two_best_baseline(responses: Responses) -> pd.Series:
    """item_id -> min over the two most accurate models of p(best non-gold option) - p(gold):
    positive exactly when both prefer a non-gold option."""
    top = np.argsort(-model_accuracy(responses), kind="stable")[:2]
    probs = np.nan_to_num(responses.probs[top], nan=-1.0)
    cols = np.arange(len(responses.gold))
    on_gold = probs[:, cols, responses.gold]
    others = probs.copy()
    others[:, cols, responses.gold] = -1.0
    margin = others.max(axis=2) - on_gold
    return pd.Series(margin.min(axis=0), index=pd.Index(responses.item_ids, name="item_id"),
                     name="two_best_baseline")
