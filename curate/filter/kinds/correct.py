"""correct: how many of the named models pick the gold option (log-likelihood scores)."""
from __future__ import annotations

import numpy as np

from curate.filter import features
from curate.filter.kinds._common import check_count_bounds, scores_schema, within

SCHEMA = scores_schema(
    "How many of the named models pick the gold option (argmax under the normalization) in the mode and formulation "
    "(default: the workspace's, lm-eval's choice for its benchmark): at_least and/or at_most.",
    formulation={"description": "cloze, letters or a rotation letters+rK.", "type": "string",
                 "pattern": "^(cloze|letters(\\+r[1-9][0-9]*)?)$"},
    at_least={"type": "integer", "minimum": 0}, at_most={"type": "integer", "minimum": 0})


def fill(spec: dict, defaults: dict) -> None:
    check_count_bounds(spec, spec["models"], "models")


def needs(spec: dict, *, default_formulation: str) -> list[tuple[str, tuple]]:
    formulation = spec.get("formulation", default_formulation)
    shots = (spec["fewshot"],) if "fewshot" in spec else ()  # 0-shot unless named
    return [("scores", (model, spec["mode"], spec["normalization"], formulation, *shots)) for model in spec["models"]]


def evaluate(spec: dict, inputs) -> np.ndarray:
    preds = inputs.predictions(spec["models"], spec["mode"], spec["normalization"], spec.get("formulation"),
                               fewshot=spec.get("fewshot", 0))
    gold = dict(zip(inputs.item_ids, inputs.gold.tolist()))
    return within(features.correct_counts(preds, gold, spec["models"], inputs.item_ids), spec)
