"""Per-item measurements the conditions compare with thresholds. Pure functions of their inputs.

Lengths are a matrix, one row per item and one column per option (items with fewer options
are padded with NaN), so spreads and "gold is longest" are vectorized.
"""
from __future__ import annotations

from itertools import combinations
from typing import Callable, Sequence

import numpy as np


def length_texts(items: Sequence[dict], over: str, mode: str) -> list[list[str]]:
    """The texts whose lengths are compared: each option alone (``options``) or the text scored
    in the prompt mode (``context+option``): the context, the delimiter and the option, or the
    option alone when the context is empty, as for many zero-mode WikiHow items; for items with
    per-option contexts (Winogrande) each option's whole sentence."""
    from curate.formulations import scored

    if over == "options":
        return [list(it["options"]) for it in items]
    return [scored(it, mode).texts() for it in items]


def measure(texts: list[list[str]], unit: str, count_tokens: Callable[[list[str]], list[int]] | None = None) -> np.ndarray:
    """Length of every text in ``unit`` (chars, bytes, or tokens counted by ``count_tokens``)."""
    width = max(len(t) for t in texts)
    flat = [s for row in texts for s in row]
    if unit == "chars":
        values = [len(s) for s in flat]
    elif unit == "bytes":
        values = [len(s.encode("utf-8")) for s in flat]
    elif unit == "tokens":
        values = count_tokens(flat)
    else:
        raise ValueError(f"unknown unit {unit!r}")
    out = np.full((len(texts), width), np.nan)
    pos = 0
    for i, row in enumerate(texts):
        out[i, : len(row)] = values[pos: pos + len(row)]
        pos += len(row)
    return out


def relative_spread(lengths: np.ndarray) -> np.ndarray:
    """(longest - shortest) / longest per item (0 when every option is empty)."""
    longest = np.nanmax(lengths, axis=1)
    shortest = np.nanmin(lengths, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        spread = (longest - shortest) / longest
    return np.where(longest > 0, spread, 0.0)


def gold_is_longest(lengths: np.ndarray, gold: np.ndarray, *, strict: bool = False) -> np.ndarray:
    """Whether the gold option is the longest; a tie for longest counts unless ``strict``."""
    rows = np.arange(len(gold))
    gold_len = lengths[rows, gold]
    others = lengths.copy()
    others[rows, gold] = np.nan
    with np.errstate(invalid="ignore"):
        other_max = np.nanmax(others, axis=1)
    return gold_len > other_max if strict else gold_len >= other_max


def max_pair_similarity(options: Sequence[Sequence[str]], scorer: Callable[[str, str], float]) -> np.ndarray:
    """The highest similarity (0-100) between any two options of each item."""
    return np.array([max((scorer(a, b) for a, b in combinations(opts, 2)), default=0.0) for opts in options])


def correct_counts(predictions, gold_by_item: dict[str, int], models: Sequence[str], item_ids: Sequence[str]) -> np.ndarray:
    """How many of ``models`` predict the gold option, per item (``predictions`` as returned by
    ``scoring.normalize.predictions``, one mode)."""
    frame = predictions[predictions["model"].isin(models)]
    right = frame["pred"].to_numpy() == frame["item_id"].map(gold_by_item).to_numpy()
    counts = frame.assign(right=right).groupby("item_id")["right"].sum()
    return counts.reindex(list(item_ids), fill_value=0).to_numpy()


def in_range(values: np.ndarray, spec: dict) -> np.ndarray:
    """``values`` within every bound the spec gives (gt, ge, lt, le)."""
    keep = np.ones(len(values), dtype=bool)
    for key, op in (("gt", np.greater), ("ge", np.greater_equal), ("lt", np.less), ("le", np.less_equal)):
        if key in spec:
            keep &= op(values, spec[key])
    return keep
