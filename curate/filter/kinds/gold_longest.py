"""gold_longest: the gold option is the longest of the item's options."""
from __future__ import annotations

import numpy as np

from curate.filter.kinds._common import fill_length, length_needs, lengths
from curate.items.lengths import gold_is_longest

SCHEMA = {
    "description": "The gold option is the longest (ties count unless strict).",
    "allOf": [{"$ref": "#/$defs/length_unit"}],
    "unevaluatedProperties": False,
    "properties": {"strict": {"type": "boolean"}},
}

fill = fill_length
needs = length_needs


def evaluate(spec: dict, inputs) -> np.ndarray:
    return gold_is_longest(lengths(spec, inputs), inputs.gold, strict=spec.get("strict", False))
