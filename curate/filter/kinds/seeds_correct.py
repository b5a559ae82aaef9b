"""seeds_correct: how many seeds of a model's generated answers pick the gold option."""
from __future__ import annotations

import numpy as np

from curate.filter.kinds._common import AT_LEAST_OR_MOST, MODE, check_count_bounds, within

SCHEMA = {
    "description": "How many seeds of the model's generated answers (curate generate) pick the gold option in the "
                   "mode: at_least and/or at_most. An unparsed reply counts as not correct. template and settings "
                   "('t=T,p=P,n=N') may be left out when the model has generations under one of each in this mode; "
                   "seeds default to every seed stored, and every item must be answered under each.",
    "type": "object",
    "additionalProperties": False,
    "required": ["model", "mode"],
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "mode": MODE,
        "template": {"type": "string", "minLength": 1},
        "settings": {"type": "string", "minLength": 1},
        "seeds": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "integer", "minimum": 0}},
        "at_least": {"type": "integer", "minimum": 0},
        "at_most": {"type": "integer", "minimum": 0},
    },
    "anyOf": AT_LEAST_OR_MOST,
}


def fill(spec: dict, defaults: dict) -> None:
    check_count_bounds(spec, spec.get("seeds"), "seeds")


def needs(spec: dict, **_) -> list[tuple[str, tuple]]:
    return [("generations", (spec["model"], spec["mode"]))]


def evaluate(spec: dict, inputs) -> np.ndarray:
    return within(inputs.seeds_right(spec).sum(axis=1), spec)
