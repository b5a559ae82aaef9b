"""easy: every named model answers right, each with high confidence on the gold
(``curate.validity.item_stats``' SMART-filtering criterion): the item cannot tell them apart."""
from __future__ import annotations

import numpy as np

from curate.filter.kinds import _validity
from curate.filter.kinds._validity import needs  # noqa: F401 (the kind's needs)

SCHEMA = _validity.schema("Every named model picks the gold option with probability at least 0.8 "
                          "(curate.validity.item_stats.EASY_CONFIDENCE): too easy to tell the models apart.")


def evaluate(spec: dict, inputs) -> np.ndarray:
    return _validity.table(spec, inputs)["easy"].fillna(False).to_numpy(dtype=bool)
