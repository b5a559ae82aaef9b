"""near_duplicate_options: two of the item's options are nearly the same text (rapidfuzz)."""
from __future__ import annotations

import numpy as np

from curate.filter import features

#: rapidfuzz.fuzz scorers a condition may name.
SCORERS = ("ratio", "token_sort_ratio", "token_set_ratio", "partial_ratio")

SCHEMA = {
    "description": "Some pair of the item's options has a rapidfuzz similarity (0-100) at or above the threshold.",
    "type": "object",
    "additionalProperties": False,
    "required": ["threshold"],
    "properties": {
        "threshold": {"type": "number", "minimum": 0, "maximum": 100},
        "scorer": {"enum": list(SCORERS)},
    },
}


def evaluate(spec: dict, inputs) -> np.ndarray:
    from rapidfuzz import fuzz

    scorer = getattr(fuzz, spec.get("scorer", "ratio"))
    sims = features.max_pair_similarity([it["options"] for it in inputs.items], scorer)
    return sims >= spec["threshold"]
