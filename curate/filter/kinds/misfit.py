"""misfit: the item behaves against the named models' ability: negative discrimination (weaker
models right more often than stronger ones, a mis-keyed item's signature) and/or a 2PL outfit
mean square above a bound (``curate.validity.item_stats``)."""
from __future__ import annotations

import numpy as np

from curate.validity.item_stats import IRT_MIN_MODELS
from curate.core.errors import CurateError
from curate.filter.kinds import _validity
from curate.filter.kinds._validity import needs  # noqa: F401 (the kind's needs)

DEFAULT_DISCRIMINATION_BELOW = 0.0
SCHEMA = _validity.schema(
    "The corrected item-total discrimination is below `discrimination_below` (default 0: stronger models right "
    "less often), or the 2PL outfit mean square is above `outfit_above` (when given). An item where every model "
    "is right, or every model wrong, has no discrimination and does not match it.",
    discrimination_below={"type": "number", "minimum": -1, "maximum": 1},
    outfit_above={"type": "number", "exclusiveMinimum": 0})


def evaluate(spec: dict, inputs) -> np.ndarray:
    t = _validity.table(spec, inputs)
    below = spec.get("discrimination_below", DEFAULT_DISCRIMINATION_BELOW)
    flagged = (t["discrimination"] < below).fillna(False).to_numpy(dtype=bool)
    if "outfit_above" in spec:
        if len(spec["models"]) < IRT_MIN_MODELS:  # no fit: every outfit is empty, and nothing would match
            raise CurateError(f"misfit: outfit_above reads the 2PL fit, which needs at least {IRT_MIN_MODELS} models; "
                              f"{len(spec['models'])} named ({', '.join(spec['models'])})")
        flagged |= (t["outfit"] > spec["outfit_above"]).to_numpy(dtype=bool)
    return flagged
