"""Per-item measurements the conditions compare with thresholds. Pure functions of their inputs.

Option lengths, their spread and "gold is longest" are measured in ``curate.items.lengths``, which the
report's length section uses too.
"""
from __future__ import annotations

from itertools import combinations
from typing import Callable, Sequence

import numpy as np


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
