"""label_error: the gold label is likely wrong: the named models' pooled evidence favours another
option (``curate.validity.suspects``' label_error_score: log-odds over models, plus negative
discrimination and misfit)."""
from __future__ import annotations

import math

import numpy as np

from curate.filter.kinds import _validity
from curate.filter.kinds._validity import needs  # noqa: F401 (the kind's needs)

#: Odds of 9 to 1 that another option is the right one: the report's and the review queue's cut too.
DEFAULT_ABOVE = math.log(9)
SCHEMA = _validity.cut_schema("The item's label-error score under the named models (log-odds, pooled over the "
                              "models, that an option other than the gold is right).", DEFAULT_ABOVE)


def evaluate(spec: dict, inputs) -> np.ndarray:
    return _validity.above_cut(_validity.table(spec, inputs)["label_error_score"], spec, DEFAULT_ABOVE)
