"""Option scores under each normalization, and the predictions they imply.

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

import numpy as np
import pandas as pd

NORMALIZATIONS = ("sum", "token", "char", "byte", "seq_mean", "study_sum", "study_byte_mean")

#: The columns naming one set of predictions: which model, in which prompt mode and formulation.
CONDITION = ["model", "mode", "formulation"]


def with_formulation(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a formulation column (cloze, when a frame from before formulations has none)."""
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
