"""ids: an explicit list of items, by row index or item id."""
from __future__ import annotations

import numpy as np

from curate.core.errors import CurateError

SCHEMA = {
    "description": "An explicit list of items, by row index or item id.",
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "maxProperties": 1,
    "properties": {
        "row_index": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "integer", "minimum": 0}},
        "item_id": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string"}},
    },
}


def evaluate(spec: dict, inputs) -> np.ndarray:
    """Ids that are not items of the workspace are refused (a typo would silently match nothing)."""
    key, wanted = next(iter(spec.items()))
    have = [it[key] for it in inputs.items]
    unknown = sorted(set(wanted) - set(have), key=str)
    if unknown:
        raise CurateError(f"ids: {len(unknown)} listed {key} values are not items of this workspace "
                          f"(first: {unknown[0]})")
    wanted = set(wanted)
    return np.array([v in wanted for v in have])
