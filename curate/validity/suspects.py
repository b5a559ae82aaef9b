"""Items whose gold label is likely wrong, from how many models answer them, with the evidence.

``label_error_score`` (docs/item-validity.md has the formula and the measured precision):

    L_j = max over options k != gold g of  sum_m w_m (log p_m(k) - log p_m(g)) / sum_m w_m
    label_error_score_j = L_j - DISCRIMINATION_WEIGHT * discrimination_j
                              + PREFERENCE_WEIGHT * preference_discrimination_j

p_m are each model's temperature-calibrated option probabilities (``responses.probs``), so a
confident model counts more than a hesitant one; for a model that only answers (no
probabilities: ``curate.validity.responses.join_answers``) they are the noisy channel of its
answers, its accuracy on the option it chose. w_m = ((acc_m - chance) / (acc_best - chance)) **
ABILITY_POWER weights models by how far above chance they are, steeply: weak models agree with
each other on wrong options often enough that equal weights (naive Bayes) rank hard items above
mis-keyed ones (AUROC 0.92 against 0.98, benchmarks/detectors_gold_moves.py). The sums run over
the models that answered the item. The ``suspected_option`` is the k of L_j. ``discrimination``
is the corrected item-total correlation (NaN counts as 0): on a mis-keyed item the models "right"
are the ones that guessed the wrong key, so it turns negative; an item that separates strong from
weak models well is unlikely to be mis-keyed. ``preference_discrimination`` is its graded twin
over the models with probabilities (the classical key check of distractor analysis: an option
chosen more by the stronger examinees than the key is a likely key error): the correlation over
them of log p_m(k) - log p_m(g) with their accuracy. On a mis-keyed item the preference for k
grows with ability; on a merely hard one (a distractor every model likes) it does not. It breaks
the ties that answers leave (two strong models choosing k say nothing about how sure they are):
measured with the study's eight small models' probabilities plus the two 32B models' answers,
precision@k 0.38 without it, 0.49 with it (benchmarks/answers_evidence.py). Answer-only models
are left out of it: their channel preference is a step of their own accuracy, so the correlation
would be partly with itself. Outfit (misfit) was tried too and adds nothing on top of
these (logistic regression weight about 0 on planted HellaSwag errors), so it is shown as
evidence, not scored.

``several_correct_score``: the strong models' mean probabilities q sorted, q(2) - q(3): two
options share the mass and the rest have little. ``no_right_answer_score``: the normalized
entropy of q (1 = the strong models spread their probability evenly: no option stands out).
The scores give only relative probabilities across options, so "every option improbable" is
read as "no option preferred". Strong models: those at or above the median accuracy.

``unparsed_answers``: how many of the answer-only models' replies to the item could not be read
(no vote in the pooling; not correct in ``correct``).

``suspect_score`` (the default ranking: the suspects queue, the report, ``curate export WORKSPACE
item-stats`` and the filter kind ``suspect`` order items by it) is one of two combinations, chosen
from the panel (``choose_basis``; docs/item-validity.md has the measurements behind the rule):

- ``log-odds``: ``label_error_score`` itself, when the models' abilities are spread
  (``ability_spread`` >= ``ALIKE_SPREAD``): weak models then agree on wrong options often
  enough that only steep ability weights and the discrimination terms separate a wrong key from
  a merely attractive distractor (planted gold moves on HellaSwag, the study's ten models:
  AUROC 0.987 against 0.933 for votes).
- ``votes``: ``votes_against_key``, when the models are alike: every model is about as reliable,
  so each counts by its accuracy (the weighted-majority weight of a voter, ``vote_weights``)
  and a reply that names no option (a refusal, an explanation) counts against the key too. With
  models this alike, who gets an item right says nothing about ability, so the discrimination
  terms are noise (MMLU-Redux's expert labels, 20 frontier models: AUROC 0.75 against 0.69).

``two_best_baseline``: the simple detector to beat: the two most accurate models both prefer a
non-gold option (score: the smaller of their margins p(best non-gold) - p(gold)).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from curate.validity.item_stats import IRT_MIN_MODELS, gold_probabilities, item_statistics
from curate.validity.responses import Responses, answer_accuracy

#: How steeply a model's weight falls with its accuracy (see the module docstring).
ABILITY_POWER = 16
#: Weight of the corrected item-total discrimination subtracted from the pooled log-odds.
DISCRIMINATION_WEIGHT = 4.0
#: Weight of the preference discrimination added to it: the two discriminations weigh alike
#: (measured flat from 2 to 4 on planted HellaSwag errors, docs/item-validity.md).
PREFERENCE_WEIGHT = 4.0
#: Fewer models with probabilities than this give no preference discrimination (0): a correlation
#: over a handful of points is noise (four models ranked a 40-item test's suspects differently
#: under two normalizations), and an item-level IRT fit needs as many.
PREFERENCE_MIN_MODELS = IRT_MIN_MODELS
#: Models listed in an item's evidence: those preferring the suspected option, strongest first.
EVIDENCE_MODELS = 10
#: Below this ``ability_spread`` the models count as alike and ``suspect_score`` counts votes:
#: on planted HellaSwag gold moves, panels of spread 0.05-0.20 ranked better by votes and panels
#: of 0.29-0.74 by the pooled log-odds (at 0.23 they split: the log-odds with probabilities, votes
#: with answers); on MMLU-Redux's experts' labels (spread 0.10-0.15) votes did too
#: (benchmarks/panel_spread.py prints both per panel).
ALIKE_SPREAD = 0.25
#: A reply that names no option counts against the key this many times as much as an answer for
#: another option (it is counted as not right already; once more as a refusal): on MMLU-Redux's
#: dev split 13 of 15 items with two or more such replies among 20 frontier models are labelled errors.
REFUSAL_WEIGHT = 1.0
#: Where the votes against the key tie, the item whose dissenting votes agree on one option ranks
#: higher (a shared alternative is a likelier wrong key than scattered misses): a tie-break only.
CONCENTRATION_WEIGHT = 0.01
#: Each combination's own cut: an item above it is a ``suspect`` (the review queue ``suspects``, the
#: filter kind ``suspect`` by default, the report's count): odds of 9 to 1 for another option
#: (the label_error kind's cut), or a weighted majority of the answers against the key.
CUTS = {"log-odds": math.log(9), "votes": 0.5}
#: The combinations ``suspect_score`` is made with (``choose_basis``), in words for the export and the report.
BASES = {
    "log-odds": "label_error_score: the ability-weighted log-odds that the models prefer another option, less the "
                "item's discrimination, plus its preference discrimination",
    "votes": "the models' ability-weighted share of answers against the key, replies naming no option counted "
             "against it once more, ties broken by how many dissenting answers agree on one option",
}


def suspects(responses: Responses, stats: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per item, sorted by ``suspect_score`` descending (ties: the responses' order)."""
    stats = item_statistics(responses) if stats is None else stats
    log_odds, suspected = pooled_log_odds(responses, ability_weights(responses))
    graded = preference_discrimination(responses, suspected)
    score = (log_odds - DISCRIMINATION_WEIGHT * np.nan_to_num(stats["discrimination"].to_numpy(float), nan=0.0)
             + PREFERENCE_WEIGHT * graded)
    q = strong_mean_probs(responses)
    basis = choose_basis(responses)[0]
    suspect_score = score if basis == "log-odds" else votes_against_key(responses)
    out = pd.DataFrame({
        "item_id": responses.item_ids,
        "suspect_score": suspect_score,
        "suspect": suspect_score > CUTS[basis],
        "suspect_basis": basis,
        "label_error_score": score,
        "suspected_option": suspected,
        "preference_discrimination": graded,
        "unparsed_answers": (responses.unparsed.sum(axis=0).astype(int) if responses.unparsed is not None
                             else np.zeros(len(responses.item_ids), dtype=int)),
        "several_correct_score": several_correct(q),
        "no_right_answer_score": flatness(q, responses.n_options),
        "evidence": evidence(responses, suspected, log_odds, stats, graded),
    })
    return out.sort_values("suspect_score", ascending=False, kind="stable").reset_index(drop=True)


def ability_spread(responses: Responses) -> float:
    """(best accuracy - worst accuracy) / (best accuracy - chance) over the models read: 0 when
    they are equally good, near 1 when some are no better than chance."""
    acc = model_accuracy(responses)
    chance = float(np.mean(1.0 / responses.n_options))
    if not len(acc) or acc.max() <= chance:
        return 0.0
    return float((acc.max() - acc.min()) / (acc.max() - chance))


def choose_basis(responses: Responses) -> tuple[str, str]:
    """(``BASES`` key, why in words): the pooled log-odds for models of spread ability, votes for
    models alike (``ALIKE_SPREAD``)."""
    spread = ability_spread(responses)
    acc = model_accuracy(responses)
    span = f"accuracies {acc.min():.2f}-{acc.max():.2f}, spread {spread:.2f}" if len(acc) else "no models"
    if len(acc) > 1 and spread >= ALIKE_SPREAD:
        return "log-odds", (f"the {len(acc)} models differ in ability ({span} >= {ALIKE_SPREAD}): weak models' shared "
                            "mistakes are told from wrong keys by ability weights and discrimination")
    return "votes", (f"the {len(acc)} models are alike in ability ({span} < {ALIKE_SPREAD}): each answer counts by "
                     "its model's accuracy, and discrimination says little")


def vote_weights(responses: Responses) -> np.ndarray:
    """w_m = log(acc_m (n - 1) / (1 - acc_m)), the weight of an independent voter right with
    probability acc_m among n options (weighted majority voting); 0 at or below chance."""
    acc = model_accuracy(responses)
    n = float(np.mean(responses.n_options))
    acc = np.clip(acc, 1e-6, 1 - 1e-6)
    return np.clip(np.log(acc * (n - 1) / (1 - acc)), 0.0, None)


def votes_against_key(responses: Responses) -> np.ndarray:
    """Per item: the ``vote_weights``-weighted share, over the models that answered it, of their
    answers against the key (a model with probabilities: 1 - p(gold); a model that only answers:
    the share of its readable answers for other options), plus ``REFUSAL_WEIGHT`` times the share
    of replies naming no option, plus ``CONCENTRATION_WEIGHT`` times the weighted share of the
    most chosen other option."""
    cols = np.arange(len(responses.gold))
    shares = responses.probs.copy()
    answers = responses.answer_only
    if answers.any():
        runs = responses.runs[answers]
        given = runs.sum(axis=2, keepdims=True)
        shares[answers] = np.where(given > 0, runs / np.maximum(given, 1), np.nan)
    present = ~np.isnan(shares).all(axis=2)
    w = vote_weights(responses)[:, None] * present
    if not (w.sum(axis=0) > 0).all():  # every model at chance: count them alike
        w = present.astype(float)
    norm = np.maximum(w.sum(axis=0), 1e-12)
    filled = np.nan_to_num(shares)
    against = (w * (1 - filled[:, cols, responses.gold])).sum(axis=0) / norm
    others = filled.copy()
    others[:, cols, responses.gold] = 0
    concentration = (w[:, :, None] * others).sum(axis=0).max(axis=1) / norm
    return against + REFUSAL_WEIGHT * refusal_share(responses) + CONCENTRATION_WEIGHT * concentration


def refusal_share(responses: Responses) -> np.ndarray:
    """Per item: the share of the answer-only models' replies that name no option (0 without them)."""
    if responses.unparsed is None:
        return np.zeros(len(responses.gold))
    replies = responses.runs.sum(axis=2).sum(axis=0) + responses.unparsed.sum(axis=0)
    return np.divide(responses.unparsed.sum(axis=0), replies, out=np.zeros(len(responses.gold)), where=replies > 0)


def ability_weights(responses: Responses) -> np.ndarray:
    """w_m = ((acc_m - chance) / (acc_best - chance)) ** ABILITY_POWER, 0 at or below chance."""
    acc = model_accuracy(responses)
    chance = float(np.mean(1.0 / responses.n_options))
    above = np.clip(acc - chance, 0, None)
    if not above.max(initial=0) > 0:
        return np.ones(len(acc))
    return (above / above.max()) ** ABILITY_POWER


def pooled_log_odds(responses: Responses, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per item: max over non-gold k of the weighted mean, over the models that answered it, of
    log p_m(k) - log p_m(gold), and that k."""
    probs = responses.probs
    present = ~np.isnan(probs).all(axis=2)  # models x items: the model has probabilities for the item
    logp = np.log(np.clip(np.nan_to_num(probs, nan=0.0), 1e-12, None))
    w = weights[:, None] * present
    norm = w.sum(axis=0)
    total = np.einsum("mi,mio->io", w, logp) / np.where(norm > 0, norm, 1.0)[:, None]  # items x options
    cols = np.arange(len(responses.gold))
    diff = total - total[cols, responses.gold][:, None]
    width = diff.shape[1]
    invalid = (np.arange(width)[None, :] >= responses.n_options[:, None]) | (
        np.arange(width)[None, :] == responses.gold[:, None])
    diff = np.where(invalid, -np.inf, diff)
    best = diff.argmax(axis=1)
    return diff[cols, best], best


def preference_discrimination(responses: Responses, suspected: np.ndarray) -> np.ndarray:
    """Per item: the correlation, over the models with probabilities, of log p_m(suspected) -
    log p_m(gold) with the model's accuracy (0 with fewer than ``PREFERENCE_MIN_MODELS`` of them,
    or where either does not vary)."""
    rows = responses.probability_models
    if len(rows) < PREFERENCE_MIN_MODELS:
        return np.zeros(len(responses.gold))
    cols = np.arange(len(responses.gold))
    logp = np.log(np.clip(responses.probs[rows], 1e-12, None))
    pref = logp[:, cols, suspected] - logp[:, cols, responses.gold]
    acc = model_accuracy(responses)[rows]
    pc, ac = pref - pref.mean(axis=0), (acc - acc.mean())[:, None]
    denom = np.sqrt((pc**2).sum(axis=0) * (ac**2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 1e-12, (pc * ac).sum(axis=0) / denom, 0.0)


def model_accuracy(responses: Responses) -> np.ndarray:
    """Each model's accuracy: right/wrong for the models with probabilities; for a model that
    only answers, the share of its readable answers that chose the gold (``answer_accuracy``)."""
    acc = np.asarray(responses.correct, dtype=float).mean(axis=1) if len(responses.models) else np.zeros(0)
    answers = responses.answer_only
    if answers.any():
        acc[answers] = answer_accuracy(responses.runs[answers], responses.gold)
    return acc


def strong_models(responses: Responses) -> np.ndarray:
    """Indices of the models at or above the median accuracy."""
    acc = model_accuracy(responses)
    return np.flatnonzero(acc >= np.median(acc))


def strong_mean_probs(responses: Responses) -> np.ndarray:
    """items x options: the strong models' mean probability of each option (0 past the last)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an item no strong model answered: 0
        return np.nan_to_num(np.nanmean(responses.probs[strong_models(responses)], axis=0), nan=0.0)


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


def evidence(responses: Responses, suspected: np.ndarray, log_odds: np.ndarray, stats: pd.DataFrame,
             graded: np.ndarray | None = None) -> list[dict]:
    """Per item: the suspected option, the pooled log-odds, discrimination, preference
    discrimination and outfit; the models preferring the suspected option (strongest first), each
    with its source (``probabilities``, or ``answers`` and where they come from) and its
    probabilities of it and of the gold (an answer-only model's: its channel's); and every
    answer-only model's answers to the item (option -> how many runs chose it; unreadable replies
    counted apart)."""
    order = np.argsort(-model_accuracy(responses), kind="stable")
    cols = np.arange(len(responses.gold))
    backs = responses.pred[order] == suspected[None, :]  # models strongest first x items
    p_sus = responses.probs[:, cols, suspected]
    p_gold = gold_probabilities(responses)
    disc, outfit = stats["discrimination"].to_numpy(float), stats["outfit"].to_numpy(float)
    graded = np.zeros(len(cols)) if graded is None else graded
    answers = [m for m in order if responses.answer_only[m]]
    kind = ["answers" if a else "probabilities" for a in responses.answer_only]
    out = []
    for j in cols:
        backers = order[np.flatnonzero(backs[:, j])[:EVIDENCE_MODELS]]
        row = {
            "gold": int(responses.gold[j]), "suspected_option": int(suspected[j]),
            "log_odds": round(float(log_odds[j]), 3),
            "discrimination": None if np.isnan(disc[j]) else round(float(disc[j]), 3),
            "preference_discrimination": round(float(graded[j]), 3),
            "outfit": None if np.isnan(outfit[j]) else round(float(outfit[j]), 3),
            "models": [{"model": responses.models[m], "source": kind[m], "p_suspected": round(float(p_sus[m, j]), 3),
                        "p_gold": round(float(p_gold[m, j]), 3)} for m in backers],
        }
        if answers:
            row["answers"] = [_answers_of(responses, m, j) for m in answers
                              if responses.runs[m, j].sum() + responses.unparsed[m, j] > 0]
        out.append(row)
    return out


def _answers_of(responses: Responses, m: int, j: int) -> dict:
    """One answer-only model's answers to item j: option -> runs choosing it, unreadable replies."""
    runs = responses.runs[m, j]
    return {"model": responses.models[m], "from": responses.sources[m],
            "runs": {str(o): int(n) for o, n in enumerate(runs) if n}, "unparsed": int(responses.unparsed[m, j])}


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
