"""rotated_correct: the share of option orders in which the named models pick the gold option."""
from __future__ import annotations

import numpy as np

from curate.core.errors import CurateError
from curate.filter.kinds._common import scores_schema, within
from curate.items.formulations import ALL_ROTATIONS

SCHEMA = scores_schema(
    "The share of (model, rotation) pairs in which the named models pick the gold option when the options are "
    "listed in every cyclic order (letters formulation; score with --formulations letters+rotations): at_least "
    "and/or at_most, between 0 and 1. Low shares mark items a model answers only in some orders.",
    at_least={"type": "number", "minimum": 0, "maximum": 1}, at_most={"type": "number", "minimum": 0, "maximum": 1})


def needs(spec: dict, **_) -> list[tuple[str, tuple]]:
    shots = (spec["fewshot"],) if "fewshot" in spec else ()  # 0-shot unless named
    return [("scores", (model, spec["mode"], spec["normalization"], ALL_ROTATIONS, *shots)) for model in spec["models"]]


def evaluate(spec: dict, inputs) -> np.ndarray:
    fewshot = spec.get("fewshot", 0)
    right, total = inputs.cached(("rotated_correct", tuple(spec["models"]), spec["mode"], spec["normalization"], fewshot),
                                 lambda: rotation_counts(inputs, spec["models"], spec["mode"], spec["normalization"],
                                                         fewshot))
    return within(right / total, spec)


def rotation_counts(inputs, models: list[str], mode: str, normalization: str,
                    fewshot: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per item (in row order): how many (model, rotation) pairs pick the gold option, and how
    many there are, over every cyclic rotation of the lettered list; every model must have
    every rotation of every item."""
    import pandas as pd

    from curate.items.formulations import rotations
    from scoring.rotations import item_rotation_counts

    right, total = np.zeros(len(inputs.item_ids)), np.zeros(len(inputs.item_ids))
    sizes = pd.Series({it["item_id"]: len(it["options"]) for it in inputs.items})
    wanted = sorted({f for it in inputs.items for f in rotations(len(it["options"]))})
    gold = dict(zip(inputs.item_ids, inputs.gold.tolist()))
    for model in models:
        preds = inputs.predictions_in(model, mode, normalization, wanted, complete=False, fewshot=fewshot)
        counts = item_rotation_counts(preds.assign(correct=preds["pred"] == preds["item_id"].map(gold)),
                                      sizes).set_index("item_id").reindex(inputs.item_ids)
        lacking = counts.index[~counts["complete"].fillna(False).astype(bool)]
        if len(lacking):
            raise CurateError(f"model {model!r}, mode {mode!r}: {len(lacking)} of {len(inputs.item_ids)} items lack "
                              f"scores in some rotation of their options (first: {lacking[0]}); score them with "
                              f"curate score --formulations letters+rotations")
        right += counts["right"].to_numpy(float)
        total += counts["rotations"].to_numpy(float)
    return right, total
