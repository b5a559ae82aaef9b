"""Accuracy per model x mode x formulation x normalization, overall and by source, with Wilson
intervals; extended and worst-option accuracy against round-2 annotations.

Inputs are the frames the stores return (``scoring.store.read_scores``,
``annotate.store.read_annotations``) and the items' gold indices; nothing here touches the
database.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from curate.analyses.stats import INTERVAL, wilson
from scoring.normalize import CONDITION, option_values, predictions, present, with_formulation

KEYS = CONDITION + ["item_id", "row_index", "source"]


def all_predictions(scores: pd.DataFrame, gold: pd.Series) -> pd.DataFrame:
    """Predictions under every normalization each (model, mode, formulation) has values of (an
    item lacking one left out, as ``predictions`` does), with ``gold`` (a Series item_id -> gold
    index) and ``correct``; one row per (model, mode, formulation, normalization, item)."""
    frames = []
    for _, group in with_formulation(scores).groupby(CONDITION, sort=True):
        for norm in present(group):
            frames.append(predictions(group, norm).assign(normalization=norm))
    if not frames:
        return pd.DataFrame(columns=KEYS + ["normalization", "pred", "gold", "correct"])
    out = pd.concat(frames, ignore_index=True)
    out["gold"] = out["item_id"].map(gold).astype(int)
    out["correct"] = out["pred"] == out["gold"]
    return out


def accuracy_table(preds: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Accuracy with a Wilson interval per model x mode x formulation x normalization, for all
    items ("all") and for each source ("source=<name>")."""
    rows = []
    for (model, mode, formulation, norm), group in with_formulation(preds).groupby(
            CONDITION + ["normalization"], sort=True):
        subsets = [("all", group)] + [(f"source={s}", g) for s, g in group.groupby(group["source"].fillna("(none)"))]
        for subset, g in subsets:
            rows.append(_acc_row(g["correct"], alpha) | {"model": model, "mode": mode, "formulation": formulation,
                                                         "normalization": norm, "subset": subset})
    cols = ["model", "mode", "formulation", "normalization", "subset", "n", "correct", "accuracy", "ci_low",
            "ci_high", "interval"]
    return pd.DataFrame(rows, columns=cols)


def _acc_row(correct, alpha) -> dict:
    n, k = int(len(correct)), int(np.sum(correct))
    low, high = wilson(k, n, alpha)
    return {"n": n, "correct": k, "accuracy": k / n if n else float("nan"), "ci_low": low, "ci_high": high,
            "interval": INTERVAL}


def own_rows(table: pd.DataFrame, normalizations: dict[str, str]) -> pd.DataFrame:
    """The rows of ``table`` (with model and normalization columns) under each model's own
    normalization (``scoring.normalize.model_normalizations``)."""
    return table[table["normalization"] == table["model"].map(normalizations)]


def worst_by_model(scores: pd.DataFrame, normalizations: dict[str, str]) -> pd.DataFrame:
    """``worst_predictions`` of each model under its own normalization."""
    frames = [worst_predictions(group, normalizations[model]) for model, group in scores.groupby("model", sort=True)]
    return pd.concat(frames, ignore_index=True) if frames else worst_predictions(scores, "sum")


def worst_predictions(scores: pd.DataFrame, normalization: str) -> pd.DataFrame:
    """The least likely option per (model, mode, formulation, item) (ties: lowest option index),
    column ``worst_pred``; items with a missing option value are left out as in ``predictions``."""
    scores = with_formulation(scores)
    frame = scores[KEYS + ["option_index"]].copy()
    frame["value"] = option_values(scores, normalization).to_numpy()
    missing = frame["value"].isna().groupby([frame[k] for k in CONDITION + ["item_id"]]).transform("any")
    frame = frame[~missing.to_numpy()].sort_values(CONDITION + ["row_index", "value", "option_index"],
                                                   kind="stable")
    best = frame.drop_duplicates(CONDITION + ["item_id"], keep="first")
    return best[KEYS + ["option_index"]].rename(columns={"option_index": "worst_pred"}).reset_index(drop=True)


def round2_accuracy(preds: pd.DataFrame, worst: pd.DataFrame, round2: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Plain, extended and worst-option accuracy per annotator x model x mode x formulation on
    the items with a valid round-2 annotation.

    extended: the prediction is the gold or an option the annotator called equally good.
    worst: the model's least likely option is the annotator's worst option.
    """
    valid = round2[round2["status"] == "valid"]
    rows = []
    for annotator, ann in valid.groupby("annotator", sort=True):
        equally = dict(zip(ann["item_id"], (set(r["equally_good"]) for r in ann["result"])))
        worst_ann = dict(zip(ann["item_id"], (r["worst"] for r in ann["result"])))
        for (model, mode, formulation, norm), group in with_formulation(preds).groupby(
                CONDITION + ["normalization"], sort=True):
            g = group[group["item_id"].isin(equally)]
            extended = g["correct"].to_numpy() | np.array([p in equally[i] for p, i in zip(g["pred"], g["item_id"])],
                                                          dtype=bool)
            w = with_formulation(worst)
            w = w[(w["model"] == model) & (w["mode"] == mode) & (w["formulation"] == formulation)
                  & w["item_id"].isin(worst_ann)]
            hits = w["worst_pred"].to_numpy() == w["item_id"].map(worst_ann).to_numpy()
            base = {"annotator": annotator, "model": model, "mode": mode, "formulation": formulation,
                    "normalization": norm}
            for measure, values in (("accuracy", g["correct"]), ("extended", extended), ("worst", hits)):
                row = _acc_row(values, alpha)
                rows.append(base | {"measure": measure, "n": row["n"], "correct": row["correct"],
                                    "value": row["accuracy"], "ci_low": row["ci_low"], "ci_high": row["ci_high"],
                                    "interval": INTERVAL})
    cols = ["annotator", "model", "mode", "formulation", "normalization", "measure", "n", "correct", "value", "ci_low",
            "ci_high", "interval"]
    return pd.DataFrame(rows, columns=cols)
