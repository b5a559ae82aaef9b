"""The zero-prompt core: items that many models answer correctly without the context.

An item that k of N models get right with the context removed (zero mode) tests little
beyond the options themselves. For each k = 1..N the curve gives the share of items that at
least k models answer correctly; ``core_items`` lists every item with its count, so the ids
behind any k can be read off.
"""
from __future__ import annotations

import json

import pandas as pd


def correct_counts(preds: pd.DataFrame, mode: str) -> pd.DataFrame:
    """Per item: how many models answer it correctly in ``mode`` (predictions of one
    normalization with column ``correct``), and which (a JSON list: labels may hold any
    character). Only items every model scored count."""
    sub = preds[preds["mode"] == mode]
    models = sorted(sub["model"].unique())
    wide = sub.pivot(index="item_id", columns="model", values="correct").dropna().astype(bool)
    where = sub.drop_duplicates("item_id").set_index("item_id")[["row_index", "source"]]
    out = where.loc[wide.index].assign(
        n_correct=wide.sum(axis=1).astype(int),
        models_correct=[json.dumps([m for m, ok in zip(models, row) if ok]) for row in wide[models].to_numpy()])
    return out.reset_index().sort_values("row_index").reset_index(drop=True)


def core_curve(counts: pd.DataFrame, n_models: int) -> pd.DataFrame:
    """For k = 1..n_models: items answered correctly by at least k models, count and share."""
    total = len(counts)
    rows = []
    for k in range(1, n_models + 1):
        hit = int((counts["n_correct"] >= k).sum())
        rows.append({"k": k, "items": hit, "share": hit / total if total else float("nan")})
    return pd.DataFrame(rows, columns=["k", "items", "share"])


def core_ids(counts: pd.DataFrame, k: int) -> list[str]:
    """Ids of the items that at least ``k`` models answer correctly, in row order."""
    return counts.loc[counts["n_correct"] >= k, "item_id"].tolist()
