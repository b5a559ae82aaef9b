"""labels: round-1 labels an annotator gave (``any`` listed, or ``all`` of them)."""
from __future__ import annotations

import numpy as np

import schemas
from curate.filter.kinds._common import ANNOTATOR, fill_annotator, per_record

SCHEMA = {
    "description": "Round-1 labels: `any` matches when at least one listed label was given, `all` when every one was.",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "annotator": ANNOTATOR,
        "any": {"$ref": "#/$defs/label_list"},
        "all": {"$ref": "#/$defs/label_list"},
        "if_missing": {"$ref": "#/$defs/if_missing"},
    },
    "oneOf": [{"required": ["any"]}, {"required": ["all"]}],
}
#: The labels an annotation record may carry (the annotation schema's).
DEFS = {"label_list": {"type": "array", "minItems": 1, "uniqueItems": True,
                       "items": {"enum": schemas.load("annotation")["$defs"]["label"]["enum"]}}}

fill = fill_annotator


def needs(spec: dict, **_) -> list[tuple[str, tuple]]:
    return [("annotation", (spec["annotator"], (1,)))]


def evaluate(spec: dict, inputs) -> np.ndarray:
    wanted = set(spec.get("any") or spec["all"])
    if "any" in spec:
        return per_record(spec, inputs, 1, lambda r, _: bool(wanted & set(r["labels"])))
    return per_record(spec, inputs, 1, lambda r, _: wanted <= set(r["labels"]))
