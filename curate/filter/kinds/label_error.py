"""label_error: the models prefer another option than the key: the named models' pooled evidence
(``curate.validity.suspects``' label_error_score: log-odds over the models, those in ``answers``
read from their answers alone, less the item's discrimination, plus its preference
discrimination). A preference to review, not proof of a wrong key."""
from __future__ import annotations

import math

import numpy as np

from curate.filter.kinds import _validity
from curate.filter.kinds._validity import needs  # noqa: F401 (the kind's needs)

#: Odds of 9 to 1 that another option is the right one: the report's and the review queue's cut too.
DEFAULT_ABOVE = math.log(9)
SCHEMA = _validity.cut_schema("Models prefer another option: the item's label-error score under the named models "
                              "(log-odds, pooled over the models and the answer-only models in `answers`, that they "
                              "prefer an option other than the gold).", DEFAULT_ABOVE)


def evaluate(spec: dict, inputs) -> np.ndarray:
    return _validity.above_cut(_validity.table(spec, inputs)["label_error_score"], spec, DEFAULT_ABOVE)
