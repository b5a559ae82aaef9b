"""several_correct: two options both strongly preferred by the stronger of the named models
(``curate.validity.suspects``' several_correct_score: their mean probabilities' second minus third)."""
from __future__ import annotations

import numpy as np

from curate.filter.kinds import _validity
from curate.filter.kinds._validity import needs  # noqa: F401 (the kind's needs)

DEFAULT_ABOVE = 0.35
SCHEMA = _validity.cut_schema("Two options share the stronger models' probability: the second most probable "
                              "option's mean probability minus the third's.", DEFAULT_ABOVE)


def evaluate(spec: dict, inputs) -> np.ndarray:
    return _validity.above_cut(_validity.table(spec, inputs)["several_correct_score"], spec, DEFAULT_ABOVE)
