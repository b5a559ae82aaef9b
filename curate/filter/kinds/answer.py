"""answer: what an annotator answered in round 2, against the gold option."""
from __future__ import annotations

import numpy as np

from curate.filter.kinds._common import ANNOTATOR, fill_annotator, per_record

#: Round-2 questions, as tests of (result, gold index).
ANSWERS = {
    "best_not_gold": lambda r, g: r["best"] != g,
    "equally_good": lambda r, g: any(j != g for j in r["equally_good"]),
    "all_implausible": lambda r, g: bool(r["all_implausible"]),
    "worst_is_gold": lambda r, g: r["worst"] == g,
}

SCHEMA = {
    "description": "Round-2 answers: best_not_gold (the best option is not the gold one), equally_good (other "
                   "options as good as the gold one), all_implausible, worst_is_gold.",
    "type": "object",
    "additionalProperties": False,
    "required": ["is"],
    "properties": {
        "annotator": ANNOTATOR,
        "is": {"enum": list(ANSWERS)},
        "if_missing": {"$ref": "#/$defs/if_missing"},
    },
}

fill = fill_annotator


def needs(spec: dict, **_) -> list[tuple[str, tuple]]:
    return [("annotation", (spec["annotator"], (2,)))]


def evaluate(spec: dict, inputs) -> np.ndarray:
    return per_record(spec, inputs, 2, ANSWERS[spec["is"]])
