"""Predictions in the rotated letters formulations (``letters`` and ``letters+rK``: the options
listed in every cyclic order, see ``curate.items.formulations``): which rotation each prediction came
from, what the model saw, and per item how many rotations were scored and answered right.

Next to the scores because two layers read them: the report's position audit
(``curate.analyses.position``) and the filter's ``rotated_correct`` condition.
"""
from __future__ import annotations

import pandas as pd

from curate.core.errors import CurateError
from curate.items.formulations import parse
from scoring.normalize import with_formulation


def rotated(preds: pd.DataFrame, n_options: pd.Series) -> pd.DataFrame:
    """The predictions of rotated letters formulations, with ``rotation``, ``n_options`` and
    ``shown`` (the position of the picked option in the list the model saw)."""
    preds = with_formulation(preds)
    base = preds["formulation"].map(lambda f: _rotation(f))
    out = preds[base.notna()].assign(rotation=base[base.notna()].astype(int))
    out = out.assign(n_options=out["item_id"].map(n_options).astype(int))
    return out.assign(shown=(out["pred"] + out["rotation"]) % out["n_options"])


def _rotation(formulation: str):
    try:
        kind, k = parse(formulation)
    except CurateError:  # an imported or unknown formulation: not a rotation
        return None
    return k if kind == "letters" else None


def item_rotation_counts(preds: pd.DataFrame, n_options: pd.Series) -> pd.DataFrame:
    """Per model x mode x normalization x item: rotations scored, rotations right, and whether
    every rotation of the item was scored (``complete``)."""
    r = rotated(preds, n_options)
    keys = ["model", "mode", "normalization", "item_id"] if "normalization" in r else ["model", "mode", "item_id"]
    out = r.groupby(keys, sort=True).agg(rotations=("rotation", "nunique"), right=("correct", "sum"),
                                         n_options=("n_options", "first")).reset_index()
    return out.assign(complete=out["rotations"] == out["n_options"])
