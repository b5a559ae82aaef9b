"""The response matrix: every model's answer to every item, as arrays, for item statistics, IRT
and label-error suspects (``curate.validity.item_stats``, ``irt``, ``suspects``).

``response_matrix`` reads a ``scoring.store.read_scores`` frame and the workspace's items. Which
option a model picks is ``scoring.normalize.predictions`` under one normalization for all its
models (a chosen one, or the one most of them share), so ``correct`` here is the report's
accuracy item by item. With no models named, the matrix holds the models that can be read
together, and names the others as set apart (``Responses.set_apart``) rather than letting them
shrink everyone's items: a model without the shared normalization, and a model scored on fewer
than ``COVERAGE`` of the items the best-covered model was (``covering``).

``probs`` is a softmax over each item's options of the option values divided by a per-model
temperature ``T``. For sums of log-probabilities (``sum``, ``study_sum``) ``T = 1``: they are the
model's own log-probabilities. The other normalizations are *means* per token, char or byte (the
study's ``seq_mean`` is a mean over the whole sequence), whose softmax is nearly uniform
(differences of a few hundredths); for them ``T`` is fitted per model by maximum likelihood of
the gold labels (temperature scaling, Guo et al. 2017): one number per model, which keeps each
model's ranking of the options and makes "how confident" comparable across models.

Models that only answer (``scoring.answers``: ``curate generate``'s parsed replies, imported
Inspect logs, lm-eval generate samples, tables of choices) join the matrix with ``join_answers``,
after the models with probabilities, one row each (``Responses.sources`` says where each row comes
from). Such a model's ``runs`` count how many of its answers to an item chose each option (several
seeds, shuffles or samples: its agreement with itself) and ``unparsed`` the replies that could not
be read. Its ``correct`` is the share of its answers that chose the gold, an unreadable reply
counting as not correct (as the generation analyses count it); its ``probs`` are a noisy channel
of its answers: the option it chose has probability ``acc`` (its accuracy over the answers it gave
that could be read), each other option ``(1 - acc) / (n - 1)``, mixed over its runs by their
shares (``channel_probs``). So a model that answers right 87% of the time is read as 87% sure of
each answer, and one at chance carries nothing. Items it did not answer are NaN.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

from curate.core.errors import CurateError
from scoring.normalize import (CONDITION, model_normalizations, most_shared, option_values, predictions,
                               primary_normalization, with_formulation)

#: Normalizations whose values are the model's log-probabilities themselves (softmax at T = 1).
LOG_PROBABILITIES = ("sum", "study_sum")
#: A model scored on fewer than this share of the items the best-covered model was scored on is
#: set apart from item-level analyses (item validity, the zero-prompt core) instead of shrinking
#: them to its items: the study's ten models on 10042 items and one model run with --limit 20
#: would otherwise give a 20-item analysis.
COVERAGE = 0.9
#: ``Responses.sources`` of a model read from its log-likelihood scores.
PROBABILITIES = "scores"


def covering(item_counts: dict[str, int]) -> tuple[list[str], dict[str, str]]:
    """(the models kept, {model set apart: why}) by ``COVERAGE`` of the largest item count."""
    most = max(item_counts.values(), default=0)
    kept = sorted(m for m, n in item_counts.items() if n >= COVERAGE * most)
    apart = {m: f"scored on {n} of {most} items" for m, n in sorted(item_counts.items())
             if m not in kept}
    return kept, apart


@dataclasses.dataclass(frozen=True)
class Responses:
    """Models x items arrays. ``logprobs`` holds the normalization's option values (NaN past an
    item's last option); ``probs`` their softmax per item at each model's ``temperature``;
    ``correct`` whether the model's argmax is ``gold``. ``left_out``: items of the workspace
    that some chosen model has no complete scores for (named, not in the arrays)."""
    item_ids: np.ndarray
    models: list[str]
    gold: np.ndarray
    n_options: np.ndarray
    logprobs: np.ndarray
    probs: np.ndarray
    correct: np.ndarray
    normalization: str
    mode: str
    formulation: str
    fewshot: int = 0
    temperature: np.ndarray = dataclasses.field(default_factory=lambda: np.ones(0))
    left_out: tuple = ()
    set_apart: tuple = ()   # (model, why) of the models scored here but not read together with these
    #: Per model: ``PROBABILITIES`` (its scores), or where its answers come from (``scoring.answers``
    #: sources, joined by ``+``); empty: every model has probabilities.
    sources: tuple = ()
    #: models x items x width: how many of an answer-only model's answers chose each option (0 for
    #: the models with probabilities); None when no model only answers.
    runs: np.ndarray | None = None
    #: models x items: an answer-only model's replies that could not be read; None as ``runs``.
    unparsed: np.ndarray | None = None

    @property
    def answer_only(self) -> np.ndarray:
        """Per model: whether it joined from its answers alone (no probabilities)."""
        return np.array([s != PROBABILITIES for s in self.sources], dtype=bool) if self.sources else (
            np.zeros(len(self.models), dtype=bool))

    @property
    def probability_models(self) -> np.ndarray:
        """Indices of the models read from their probabilities."""
        return np.flatnonzero(~self.answer_only)

    @property
    def pred(self) -> np.ndarray:
        """Each model's chosen option per item (models x items; ties: lowest index); an answer-only
        model's most frequent readable answer, -1 where it gave none."""
        pred = np.nanargmax(np.where(np.isnan(self.logprobs), -np.inf, self.logprobs), axis=2)
        if self.runs is not None:
            answers = self.answer_only
            modal = self.runs[answers].argmax(axis=2)
            pred[answers] = np.where(self.runs[answers].sum(axis=2) > 0, modal, -1)
        return pred

    def with_gold(self, new_gold) -> "Responses":
        """A copy with other gold labels (planted gold moves): the scores and probabilities are
        reused, ``correct`` is recomputed (and the answer-only models' accuracy with it)."""
        new_gold = np.asarray(new_gold, dtype=int)
        if new_gold.shape != self.gold.shape:
            raise ValueError(f"new gold has shape {new_gold.shape}, expected {self.gold.shape}")
        if np.any((new_gold < 0) | (new_gold >= self.n_options)):
            bad = int(np.flatnonzero((new_gold < 0) | (new_gold >= self.n_options))[0])
            raise ValueError(f"item {self.item_ids[bad]}: gold {new_gold[bad]} is not one of its "
                             f"{self.n_options[bad]} options")
        if self.runs is None:
            return dataclasses.replace(self, gold=new_gold, correct=self.pred == new_gold[None, :])
        return _with_answer_rows(dataclasses.replace(self, gold=new_gold))


def response_matrix(scores: pd.DataFrame, items: list[dict], *, models=None, mode: str = "full",
                    formulation: str = "cloze", fewshot: int = 0, normalization: str | None = None) -> Responses:
    """The response matrix of ``models`` (default: the models scored in ``mode`` that can be read
    together, the others set apart) on ``items`` (the workspace's items, in row order) in one
    mode, formulation and shot count."""
    scores = _condition_rows(scores, mode=mode, formulation=formulation, fewshot=fewshot)
    scored = sorted(scores["model"].unique())
    chosen = scored if models is None else list(models)
    absent = [m for m in chosen if m not in scored]
    if absent:
        raise CurateError(f"no scores for model {absent[0]!r} in mode {mode!r}, formulation {formulation!r}, "
                          f"{fewshot}-shot; scored: {', '.join(scored) or 'none'}")
    scores = scores[scores["model"].isin(chosen)]
    apart: dict[str, str] = {}
    if models is None and scored:
        chosen, norm, apart = _readable_together(scores, normalization)
        scores = scores[scores["model"].isin(chosen)]
    else:
        norm = primary_normalization(scores, normalization)
    preds = predictions(scores, norm)
    counts = preds.groupby("item_id")["model"].nunique()
    complete = set(counts.index[counts == len(chosen)])
    keep = [it for it in items if it["item_id"] in complete]
    left_out = tuple(it["item_id"] for it in items if it["item_id"] not in complete)
    if not keep:
        raise CurateError(f"no item has complete {norm!r} scores from all of {', '.join(chosen)} in mode {mode!r}")
    item_ids = np.array([it["item_id"] for it in keep], dtype=object)
    gold = np.array([it["gold"] for it in keep], dtype=int)
    n_options = np.array([len(it["options"]) for it in keep], dtype=int)
    values = _value_array(scores, norm, chosen, item_ids, int(n_options.max()))
    picked = preds.pivot(index="model", columns="item_id", values="pred").loc[chosen, item_ids].to_numpy(int)
    temperature = np.array([1.0 if norm in LOG_PROBABILITIES else fit_temperature(v, gold) for v in values])
    return Responses(item_ids=item_ids, models=chosen, gold=gold, n_options=n_options, logprobs=values,
                     probs=softmax_options(values, temperature), correct=picked == gold[None, :],
                     normalization=norm, mode=mode, formulation=formulation, fewshot=fewshot,
                     temperature=temperature, left_out=left_out, set_apart=tuple(apart.items()))


def _readable_together(scores: pd.DataFrame, normalization: str | None) -> tuple[list[str], str, dict[str, str]]:
    """(models, their one normalization, {model set apart: why}): the normalization named, else
    the one most models have; then the models that cover the items (``covering``)."""
    own = model_normalizations(scores, normalization)
    norm = normalization or most_shared(own)
    apart = {m: f"no `{norm}` scores" for m, n in own.items() if n != norm}
    if len(apart) == len(own):
        raise CurateError(f"no model has `{norm}` scores on every option")
    with_norm = scores[~scores["model"].isin(apart)]
    values = option_values(with_norm, norm).notna().groupby(
        [with_norm["model"].to_numpy(), with_norm["item_id"].to_numpy()]).all()
    item_counts = values.groupby(level=0).sum().astype(int).to_dict()
    kept, thin = covering(item_counts)
    return kept, norm, {**apart, **thin}


def _condition_rows(scores: pd.DataFrame, *, mode, formulation, fewshot) -> pd.DataFrame:
    """The rows of one (mode, formulation, shot count); frames from before the formulation or the
    shot axis are cloze and 0-shot."""
    if "fewshot" in scores.columns:
        scores = scores[scores["fewshot"].fillna(0).astype(int) == int(fewshot)]
    elif fewshot:
        scores = scores.iloc[:0]
    scores = with_formulation(scores)
    return scores[(scores["mode"] == mode) & (scores["formulation"] == formulation)]


def _value_array(scores, norm, models, item_ids, width) -> np.ndarray:
    """models x items x width option values, NaN past each item's options."""
    frame = scores[CONDITION + ["item_id", "option_index"]].copy()
    frame["value"] = option_values(scores, norm).to_numpy()
    frame = frame[frame["item_id"].isin(set(item_ids))]
    out = np.full((len(models), len(item_ids), width), np.nan)
    m = pd.Index(models).get_indexer(frame["model"])
    i = pd.Index(item_ids).get_indexer(frame["item_id"])
    out[m, i, frame["option_index"].to_numpy(int)] = frame["value"].to_numpy(float)
    return out


def softmax_options(values: np.ndarray, temperature: np.ndarray) -> np.ndarray:
    """Softmax over each item's options (NaN padding stays NaN, probability 0 elsewhere)."""
    scaled = values / np.asarray(temperature, dtype=float)[:, None, None]
    out = np.exp(log_softmax(np.where(np.isnan(scaled), -np.inf, scaled), axis=2))
    return np.where(np.isnan(values), np.nan, out)


def fit_temperature(values: np.ndarray, gold: np.ndarray) -> float:
    """The temperature T maximising the likelihood of ``gold`` under softmax(values / T), one
    model's items x options values (temperature scaling)."""
    filled = np.where(np.isnan(values), -np.inf, values)
    rows = np.arange(len(gold))

    def loss(log_t):
        logp = log_softmax(filled / np.exp(log_t), axis=1)
        return -float(np.mean(logp[rows, gold]))

    spread = np.nanstd(values - np.nanmean(values, axis=1, keepdims=True)) or 1.0
    best = minimize_scalar(loss, bounds=(np.log(spread) - 8, np.log(spread) + 8), method="bounded")
    return float(np.exp(best.x))


def answer_mode(run: str, source: str) -> str:
    """The prompt mode an answer was given in: ``curate generate`` names it in its run
    (``scoring.answers.generate_run``); imported answers are answers to the full item."""
    if source == "generate":
        for part in str(run).split(","):
            if part.startswith("mode="):
                return part[len("mode="):]
    return "full"


def answer_modes(answers: pd.DataFrame) -> pd.Series:
    """Each answer's prompt mode (``answer_mode``), worked out once per distinct (run, source)."""
    pairs = answers[["run", "source"]].astype(str)
    codes, uniques = pd.MultiIndex.from_frame(pairs).factorize()
    modes = np.array([answer_mode(r, s) for r, s in uniques], dtype=object)
    return pd.Series(modes[codes] if len(codes) else [], index=answers.index, dtype=object)


def in_mode(answers: pd.DataFrame, mode: str) -> pd.DataFrame:
    """The answers given in prompt mode ``mode``."""
    return answers[(answer_modes(answers) == mode).to_numpy(bool)]


def join_answers(responses: Responses, answers: pd.DataFrame, *, coverage: bool = True) -> Responses:
    """``responses`` with the models that only answer (a ``scoring.answers.read_answers`` frame:
    model, item_id, choice, run, source) as more rows, after the models with probabilities. Read:
    the answers given in the responses' mode to its items. A model that has probabilities here
    is read from them, its answers set apart (one model, one voice), as is a model that answered
    none of these items or, with ``coverage`` (no models named by the caller), fewer than
    ``COVERAGE`` of them (as a model scored on a fraction of the items is: a handful of answers
    would weigh like a whole panel's on those items)."""
    if answers is None or answers.empty:
        return responses
    answers = in_mode(answers, responses.mode)
    apart = dict(responses.set_apart)
    for model in sorted(set(answers["model"]) & set(responses.models)):
        apart[f"{model} (answers)"] = "read from its probabilities"
    answers = answers[~answers["model"].isin(responses.models)]
    on_items = answers[answers["item_id"].isin(set(responses.item_ids))]
    for model in sorted(set(answers["model"]) - set(on_items["model"])):
        apart[f"{model} (answers)"] = f"no {responses.mode}-mode answer to these items"
    answered = on_items.groupby("model")["item_id"].nunique().to_dict()
    reference = {**answered, **({"": len(responses.item_ids)} if responses.models else {})}
    kept, thin = covering(reference) if coverage else (list(reference), {})
    apart.update({f"{m} (answers)": why.replace("scored on", "answered") for m, why in thin.items() if m})
    on_items = on_items[on_items["model"].isin(kept)]
    models = sorted(on_items["model"].unique())
    if not models:
        return dataclasses.replace(responses, set_apart=tuple(apart.items()))
    n_prob, width = len(responses.models), responses.logprobs.shape[2]
    runs = np.zeros((n_prob + len(models), len(responses.item_ids), width))
    unparsed = np.zeros(runs.shape[:2])
    m = pd.Index(models).get_indexer(on_items["model"]) + n_prob
    i = pd.Index(responses.item_ids).get_indexer(on_items["item_id"])
    choice = on_items["choice"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    read = ~np.isnan(choice)
    np.add.at(runs, (m[read], i[read], choice[read].astype(int)), 1)
    np.add.at(unparsed, (m[~read], i[~read]), 1)
    sources = on_items.groupby("model")["source"].agg(lambda s: "+".join(sorted(set(s))))
    pad = np.full((len(models),) + responses.logprobs.shape[1:], np.nan)
    joined = dataclasses.replace(
        responses, models=[*responses.models, *models],
        sources=(*(responses.sources or (PROBABILITIES,) * n_prob), *sources.loc[models]),
        logprobs=np.concatenate([responses.logprobs, pad]), probs=np.concatenate([responses.probs, pad]),
        temperature=np.concatenate([responses.temperature, np.full(len(models), np.nan)]),
        runs=runs, unparsed=unparsed, set_apart=tuple(apart.items()))
    return _with_answer_rows(joined)


def answers_matrix(answers: pd.DataFrame, items: list[dict], *, mode: str = "full", coverage: bool = True) -> Responses:
    """The response matrix of answers alone (no model with probabilities): the items any model
    answered in ``mode``, in row order."""
    answers = in_mode(answers, mode)
    answered = set(answers["item_id"])
    keep = [it for it in items if it["item_id"] in answered]
    if not keep:
        raise CurateError(f"no {mode}-mode answers to any item of the workspace")
    width = max(len(it["options"]) for it in keep)
    empty = Responses(item_ids=np.array([it["item_id"] for it in keep], dtype=object), models=[],
                      gold=np.array([it["gold"] for it in keep], dtype=int),
                      n_options=np.array([len(it["options"]) for it in keep], dtype=int),
                      logprobs=np.zeros((0, len(keep), width)), probs=np.zeros((0, len(keep), width)),
                      correct=np.zeros((0, len(keep))), normalization="answers", mode=mode, formulation="answers",
                      temperature=np.zeros(0),
                      left_out=tuple(it["item_id"] for it in items if it["item_id"] not in answered))
    return join_answers(empty, answers, coverage=coverage)


def answer_accuracy(runs: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Per answer-only model (runs: models x items x width): the share of its readable answers
    that chose the gold, over the items it gave one, with half an answer right and half wrong
    added (so a model right on all of a few items is not read as never wrong)."""
    cols = np.arange(len(gold))
    given = runs.sum(axis=2)
    answered = given > 0
    share = np.divide(runs[:, cols, gold], given, out=np.zeros_like(given), where=answered)
    return (share.sum(axis=1) + 0.5) / (answered.sum(axis=1) + 1.0)


def channel_probs(runs: np.ndarray, gold: np.ndarray, n_options: np.ndarray) -> np.ndarray:
    """An answer-only model's option probabilities from its answers (the module docstring): its
    accuracy on the chosen option, the rest spread evenly, mixed over its runs; at most chance
    accuracy reads as no preference. NaN past an item's options and where it gave no readable answer."""
    acc = answer_accuracy(runs, gold)[:, None, None]
    n = n_options[None, :, None].astype(float)
    acc = np.maximum(acc, 1.0 / n)
    given = runs.sum(axis=2, keepdims=True)
    share = np.divide(runs, given, out=np.zeros_like(runs), where=given > 0)
    probs = acc * share + (1 - acc) / np.maximum(n - 1, 1) * (1 - share)
    past = np.arange(runs.shape[2])[None, None, :] >= n
    return np.where(past | (given == 0), np.nan, probs)


def _with_answer_rows(r: Responses) -> Responses:
    """The answer-only rows' probabilities (``channel_probs``) and everyone's ``correct`` under
    ``r.gold``: 0/1 for the models with probabilities, the share of answers right for the others
    (NaN where a model gave no answer)."""
    answers = r.answer_only
    cols = np.arange(len(r.gold))
    probs, logprobs = r.probs.copy(), r.logprobs.copy()
    probs[answers] = channel_probs(r.runs[answers], r.gold, r.n_options)
    with np.errstate(divide="ignore"):
        logprobs[answers] = np.log(probs[answers])
    correct = (r.pred == r.gold[None, :]).astype(float)
    total = r.runs[answers].sum(axis=2) + r.unparsed[answers]
    correct[answers] = np.divide(r.runs[answers][:, cols, r.gold], total,
                                 out=np.full(total.shape, np.nan), where=total > 0)
    return dataclasses.replace(r, probs=probs, logprobs=logprobs, correct=correct)
