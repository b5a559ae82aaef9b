"""status: the status of an annotator's record (refused, invalid, or missing)."""
from __future__ import annotations

import numpy as np

from curate.filter.kinds._common import ANNOTATOR, fill_annotator

SCHEMA = {
    "description": "The status of the annotator's record: refused, invalid, or missing (no record). Without `round`, "
                   "any round counts.",
    "type": "object",
    "additionalProperties": False,
    "required": ["is"],
    "properties": {
        "annotator": ANNOTATOR,
        "round": {"type": "integer", "enum": [1, 2]},
        "is": {"enum": ["refused", "invalid", "missing"]},
    },
}

fill = fill_annotator


def needs(spec: dict, **_) -> list[tuple[str, tuple]]:
    """The rounds named (both by default); records in one of them will do."""
    return [("annotation", (spec["annotator"], (spec["round"],) if "round" in spec else (1, 2)))]


def evaluate(spec: dict, inputs) -> np.ndarray:
    rounds = [spec["round"]] if "round" in spec else [1, 2]
    out = np.zeros(len(inputs.item_ids), dtype=bool)
    for rnd in rounds:
        records = inputs.annotations(spec["annotator"], rnd)
        if spec["is"] == "missing":
            out |= np.array([i not in records for i in inputs.item_ids])
        else:
            out |= np.array([records.get(i, (None,))[0] == spec["is"] for i in inputs.item_ids])
    return out
