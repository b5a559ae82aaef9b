"""length_spread: the relative spread of an item's option lengths, against thresholds."""
from __future__ import annotations

import math

import numpy as np

from curate.filter import features
from curate.filter.kinds._common import SpecError, fill_length, length_needs, lengths
from curate.items.lengths import relative_spread

SCHEMA = {
    "description": "Relative spread (longest - shortest) / longest of an item's option lengths, compared with "
                   "thresholds (all given must hold).",
    "allOf": [{"$ref": "#/$defs/length_unit"}],
    "unevaluatedProperties": False,
    "properties": {"gt": {"type": "number"}, "ge": {"type": "number"}, "lt": {"type": "number"},
                   "le": {"type": "number"}},
    "anyOf": [{"required": ["gt"]}, {"required": ["ge"]}, {"required": ["lt"]}, {"required": ["le"]}],
}

needs = length_needs


def fill(spec: dict, defaults: dict) -> None:
    fill_length(spec, defaults)
    check_bounds(spec)


def check_bounds(spec: dict) -> None:
    """Bounds that no spread can meet (NaN, infinite, contradictory, outside [0, 1]) would
    silently match nothing; they are refused instead."""
    for key in ("gt", "ge", "lt", "le"):
        if key in spec and not math.isfinite(spec[key]):
            raise SpecError(f"{key} {spec[key]} is not a finite number", key=key)
    lower = max(((spec[k], k) for k in ("gt", "ge") if k in spec), default=(-math.inf, "ge"))
    upper = min(((spec[k], k) for k in ("lt", "le") if k in spec), default=(math.inf, "le"))
    strict = lower[1] == "gt" or upper[1] == "lt"
    if lower[0] > upper[0] or (lower[0] == upper[0] and strict):
        raise SpecError(f"{lower[1]} {lower[0]} and {upper[1]} {upper[0]} leave no value between them")
    if lower[0] > 1 or (lower[0] == 1 and lower[1] == "gt") or upper[0] < 0 or (upper[0] == 0 and upper[1] == "lt"):
        raise SpecError("a relative spread lies between 0 and 1; these bounds leave none of it")


def evaluate(spec: dict, inputs) -> np.ndarray:
    return features.in_range(relative_spread(lengths(spec, inputs)), spec)
