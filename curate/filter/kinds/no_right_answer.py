"""no_right_answer: no option stands out for the stronger of the named models
(``curate.validity.suspects``' no_right_answer_score: the normalized entropy of their mean
probabilities, 1 = spread evenly)."""
from __future__ import annotations

import numpy as np

from curate.filter.kinds import _validity
from curate.filter.kinds._validity import needs  # noqa: F401 (the kind's needs)

DEFAULT_ABOVE = 0.95
SCHEMA = _validity.cut_schema("No option stands out: the normalized entropy of the stronger models' mean "
                              "probabilities over the options (1: all equally likely).", DEFAULT_ABOVE)


def evaluate(spec: dict, inputs) -> np.ndarray:
    return _validity.above_cut(_validity.table(spec, inputs)["no_right_answer_score"], spec, DEFAULT_ABOVE)
