"""Option scores under each normalization, the predictions they imply, and which normalization
the analyses, the review and the filter use when none is named (``primary_normalization``).

A normalization turns the stored columns of one option into one number, higher = more likely:

==============  ==========================================  ==============================
name            value                                        lm-eval / study name
==============  ==========================================  ==============================
sum             logprob_sum                                  lm-eval ``acc``
token           logprob_sum / n_tokens
char            logprob_sum / n_chars                        lm-eval ``acc_norm``
byte            logprob_sum / n_bytes
seq_mean        mean log-prob over context + " " + option    the study's released scores
study_sum       the study's released ``sum_`` variant
study_byte_mean the study's released ``byte_mean_`` variant
==============  ==========================================  ==============================
"""
from __future__ import annotations

import pandas as pd

from curate.core.errors import CurateError

NORMALIZATIONS = ("sum", "token", "char", "byte", "seq_mean", "study_sum", "study_byte_mean")
#: The stored columns each normalization reads (``option_values``): a (model, mode) has a
#: normalization where every option has all of them.
INPUTS = {"sum": ("logprob_sum",), "token": ("logprob_sum", "n_tokens"), "char": ("logprob_sum", "n_chars"),
          "byte": ("logprob_sum", "n_bytes"), "seq_mean": ("seq_mean",), "study_sum": ("study_sum",),
          "study_byte_mean": ("study_byte_mean",)}

#: The columns naming one set of predictions: which model, in which prompt mode and formulation.
CONDITION = ["model", "mode", "formulation"]

#: Which normalization drives agreement, the core and length analyses when none is named:
#: the study's own score first, then lm-eval's acc_norm, then the rest.
PREFERENCE = ("seq_mean", "char", "sum", "token", "byte", "study_sum", "study_byte_mean")


def with_formulation(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a formulation column (cloze, when a frame from before formulations has none).
    Every reader grouping by ``CONDITION`` passes through here, so a frame that mixes shot counts
    is refused: 0-shot and k-shot scores of one condition must never be pooled (split them by
    ``fewshot`` first, as the few-shot report section does)."""
    if "fewshot" in frame.columns and frame["fewshot"].nunique() > 1:
        raise CurateError(f"scores of several shot counts ({', '.join(map(str, sorted(frame['fewshot'].unique())))}) "
                         "in one frame; select one shot count (read_scores(fewshots=[K])) first")
    return frame if "formulation" in frame.columns else frame.assign(formulation="cloze")


def option_values(scores: pd.DataFrame, normalization: str) -> pd.Series:
    """One value per score row under ``normalization`` (NaN where the inputs are missing)."""
    if normalization == "sum":
        return scores["logprob_sum"].astype(float)
    if normalization in ("token", "char", "byte"):
        denom = scores[{"token": "n_tokens", "char": "n_chars", "byte": "n_bytes"}[normalization]]
        return scores["logprob_sum"].astype(float) / denom.astype(float)
    if normalization in ("seq_mean", "study_sum", "study_byte_mean"):
        return scores[normalization].astype(float)
    raise ValueError(f"unknown normalization {normalization!r}; known: {', '.join(NORMALIZATIONS)}")


def available(scores: pd.DataFrame) -> list[str]:
    """The normalizations every row of ``scores`` has a value for."""
    return [n for n in NORMALIZATIONS if len(scores) and option_values(scores, n).notna().all()]


def present(scores: pd.DataFrame) -> list[str]:
    """The normalizations some row of ``scores`` has a value for (``predictions`` leaves out the
    items that lack one)."""
    return [n for n in NORMALIZATIONS if len(scores) and option_values(scores, n).notna().any()]


def groups_available(scores: pd.DataFrame) -> dict[tuple[str, str, str], list[str]]:
    """The normalizations each (model, mode, formulation) has values for on every option."""
    return {key: available(group) for key, group in with_formulation(scores).groupby(CONDITION, sort=True)}


def model_normalizations(scores: pd.DataFrame, requested: str | None = None) -> dict[str, str]:
    """Each model's normalization, so that a workspace mixing sources (the study's CSVs hold only
    ``seq_mean``, lm-eval's samples no ``seq_mean``) is analysed whole: ``requested`` for every
    model that has it on every option (refused when no model has it); else the one normalization all
    models have (the first of
    ``PREFERENCE``), when there is one; else each model's own first of ``PREFERENCE`` that all its
    (mode, formulation) have (failing that, the one it lacks on the fewest options: those items
    are left out of its predictions). The report says which model used which."""
    if requested is not None and requested not in NORMALIZATIONS:
        raise CurateError(f"unknown normalization {requested!r}; known: {', '.join(NORMALIZATIONS)}")
    groups = groups_available(scores)
    if not groups:
        raise CurateError("the workspace has no scores; import or score some first (curate import-scores)")
    by_model: dict[str, set[str]] = {}
    for (model, _, _), norms in groups.items():
        by_model[model] = by_model.get(model, set(norms)) & set(norms)
    if requested is not None and not any(requested in norms for norms in by_model.values()):
        raise CurateError(f"normalization {requested!r} is missing for {_listed(_gaps(scores, requested))}")
    common = set.intersection(*by_model.values())
    shared = next((n for n in PREFERENCE if n in common), None)
    out = {}
    for model, norms in sorted(by_model.items()):
        if requested in norms:
            out[model] = requested
        elif shared is not None and requested is None:
            out[model] = shared
        else:
            mine = scores[scores["model"] == model]
            out[model] = next((n for n in PREFERENCE if n in norms), None) or min(
                PREFERENCE, key=lambda n: int(option_values(mine, n).isna().sum()))
    return out


def lacking(scores: pd.DataFrame, model: str, normalization: str) -> str:
    """Where ``model`` lacks ``normalization``: 'model/mode/formulation (k of n options)', listed."""
    return _listed(_gaps(scores[scores["model"] == model], normalization))


def most_shared(normalizations: dict[str, str]) -> str:
    """The normalization most models use (ties: the first of ``PREFERENCE``): the report's primary."""
    counts = {n: list(normalizations.values()).count(n) for n in set(normalizations.values())}
    return min(counts, key=lambda n: (-counts[n], PREFERENCE.index(n)))


def predictions_by_model(scores: pd.DataFrame, normalizations: dict[str, str]) -> pd.DataFrame:
    """``predictions`` of each model under its own normalization (``model_normalizations``), with
    a ``normalization`` column."""
    frames = [predictions(group, normalizations[model]).assign(normalization=normalizations[model])
              for model, group in scores.groupby("model", sort=True) if model in normalizations]
    return pd.concat(frames, ignore_index=True) if frames else predictions(scores.iloc[:0], "sum").assign(
        normalization=pd.Series(dtype=str))


def primary_normalization(scores: pd.DataFrame, requested: str | None = None) -> str:
    """The one normalization every (model, mode, formulation) in ``scores`` has (``requested``
    if given)."""
    groups = groups_available(scores)
    if not groups:
        raise CurateError("the workspace has no scores; import or score some first (curate import-scores)")
    common = set.intersection(*(set(v) for v in groups.values()))
    if requested is not None:
        if requested not in NORMALIZATIONS:
            raise CurateError(f"unknown normalization {requested!r}; known: {', '.join(NORMALIZATIONS)}")
        lacking = _gaps(scores, requested)
        if lacking:
            raise CurateError(f"normalization {requested!r} is missing for {_listed(lacking)}")
        return requested
    for norm in PREFERENCE:
        if norm in common:
            return norm
    closest = min((n for n in PREFERENCE if any(n in v for v in groups.values())),
                  key=lambda n: len(_gaps(scores, n)), default=None)
    hint = f"; {closest!r} comes closest, missing for {_listed(_gaps(scores, closest))}" if closest else ""
    raise CurateError("no normalization has a value on every option of every (model, mode, formulation)" + hint +
                      ". Score or import the missing values, or name a normalization those models have")


def _gaps(scores: pd.DataFrame, norm: str) -> list[str]:
    """'model/mode/formulation (k of n options)' for each condition lacking ``norm`` values."""
    out = []
    for key, group in with_formulation(scores).groupby(CONDITION, sort=True):
        missing = int(option_values(group, norm).isna().sum())
        if missing:
            out.append(f"{'/'.join(key)} ({missing} of {len(group)} options)")
    return out


def _listed(names: list[str], most: int = 5) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def predictions(scores: pd.DataFrame, normalization: str) -> pd.DataFrame:
    """Argmax option per (model, mode, formulation, item): columns model, mode, formulation,
    item_id, row_index, source, pred. Ties go to the lowest option index (as numpy/lm-eval's
    argmax). Items with any missing option value are left out rather than guessed."""
    scores = with_formulation(scores)
    keys = CONDITION + ["item_id", "row_index", "source"]
    frame = scores[keys + ["option_index"]].copy()
    frame["value"] = option_values(scores, normalization).to_numpy()
    missing = frame["value"].isna().groupby([frame[k] for k in CONDITION + ["item_id"]]).transform("any")
    frame = frame[~missing.to_numpy()]
    # Highest value first, lowest option index first among equals; keep the first per item.
    frame = frame.sort_values(CONDITION + ["row_index", "value", "option_index"],
                              ascending=[True, True, True, True, False, True], kind="stable")
    best = frame.drop_duplicates(CONDITION + ["item_id"], keep="first")
    out = best[keys + ["option_index"]].rename(columns={"option_index": "pred"})
    return out.reset_index(drop=True)
