"""rotated_correct: the share of option orders in which the named models pick the gold option."""
from __future__ import annotations

import numpy as np

from curate.filter.kinds._common import scores_schema, within
from curate.formulations import ALL_ROTATIONS

SCHEMA = scores_schema(
    "The share of (model, rotation) pairs in which the named models pick the gold option when the options are "
    "listed in every cyclic order (letters formulation; score with --formulations letters+rotations): at_least "
    "and/or at_most, between 0 and 1. Low shares mark items a model answers only in some orders.",
    at_least={"type": "number", "minimum": 0, "maximum": 1}, at_most={"type": "number", "minimum": 0, "maximum": 1})


def needs(spec: dict, **_) -> list[tuple[str, tuple]]:
    return [("scores", (model, spec["mode"], spec["normalization"], ALL_ROTATIONS)) for model in spec["models"]]


def evaluate(spec: dict, inputs) -> np.ndarray:
    right, total = inputs.rotation_counts(spec["models"], spec["mode"], spec["normalization"])
    return within(right / total, spec)
