"""field: an item field (source, split_type, benchmark, split, native_ids.NAME) is one of the values."""
from __future__ import annotations

import numpy as np

from curate.core.errors import CurateError

SCHEMA = {
    "description": "An item field is one of the values: source, split_type, benchmark, split, or native_ids.NAME.",
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "in"],
    "properties": {
        "name": {"type": "string", "pattern": "^(source|split_type|benchmark|split|native_ids\\.[A-Za-z0-9_]+)$"},
        "in": {"type": "array", "minItems": 1, "items": {"type": ["string", "integer", "null"]}},
    },
}


def evaluate(spec: dict, inputs) -> np.ndarray:
    """A misspelt field name or value would match nothing and keep every item: both refused,
    as ``ids`` refuses ids that are not items (null still means "the item lacks the field")."""
    name, wanted = spec["name"], spec["in"]
    key = "split_type" if name == "split_type" else name.removeprefix("native_ids.")
    native = name == "split_type" or name.startswith("native_ids.")
    if native and inputs.items and not any(key in it["native_ids"] for it in inputs.items):
        have = sorted({k for it in inputs.items for k in it["native_ids"]})
        raise CurateError(f"field: no item has {name!r} (their native_ids hold: {', '.join(have) or 'nothing'})")
    values = [it["native_ids"].get(key) if native else it.get(name) for it in inputs.items]
    seen = set(values)
    unknown = [v for v in wanted if v is not None and v not in seen]
    if unknown:
        present = sorted({str(v) for v in values if v is not None})
        raise CurateError(f"field: {name} is never {unknown[0]!r} in this workspace (its values: "
                          f"{', '.join(present[:10])}{', ...' if len(present) > 10 else ''})")
    return np.array([v in wanted for v in values])
