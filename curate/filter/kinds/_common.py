"""What several condition kinds share: schema parts, filling defaults, reading records and lengths.

Not a kind itself (its name starts with ``_``); see ``curate.filter.kinds``.
"""
from __future__ import annotations

import numpy as np

from curate.core.errors import CurateError
from curate.filter import features
from curate.items.canonical import MODES


class SpecError(ValueError):
    """A condition's spec that the schema accepts but that cannot work (no annotator to read,
    bounds nothing meets). ``key``: the spec's key at fault, if one is; the rules loader names
    the file and the path of the condition."""

    def __init__(self, message: str, key: str | None = None):
        self.key = key
        super().__init__(message)


# --- schema parts ----------------------------------------------------------------------------

MODE = {"enum": list(MODES)}
#: scoring.normalize.NORMALIZATIONS (written out: importing scoring pulls in pandas; a test ties them).
NORMALIZATION = {"enum": ["sum", "token", "char", "byte", "seq_mean", "study_sum", "study_byte_mean"]}
MODELS = {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string", "minLength": 1}}
ANNOTATOR = {"type": "string", "minLength": 3}
#: The shot count whose scores are read (curate score --fewshot; default 0).
FEWSHOT = {"description": "Read the scores made after this many shots (curate score --fewshot K); default 0.",
           "type": "integer", "minimum": 0}
#: A count or share condition gives at_least, at_most or both.
AT_LEAST_OR_MOST = [{"required": ["at_least"]}, {"required": ["at_most"]}]


def scores_schema(description: str, **bounds) -> dict:
    """The schema of a kind reading the named models' scores in a mode and normalization and
    comparing a count or share with ``bounds`` (at_least, at_most, and any other keys)."""
    return {"description": description, "type": "object", "additionalProperties": False,
            "required": ["models", "mode", "normalization"],
            "properties": {"models": MODELS, "mode": MODE, "normalization": NORMALIZATION, "fewshot": FEWSHOT,
                           **bounds},
            "anyOf": AT_LEAST_OR_MOST}

#: Named schema parts that kinds refer to as ``#/$defs/NAME``.
DEFS = {
    "if_missing": {
        "description": "What an item with no record from the annotator in that round counts as: an error (default), "
                       "a match, or no match. Refused and invalid records never match label or answer conditions; "
                       "use a `status` condition for them.",
        "enum": ["error", "match", "no_match"],
    },
    "length_unit": {
        "type": "object",
        "properties": {
            "unit": {"enum": ["chars", "bytes", "tokens"]},
            "tokenizer": {"description": "tokens only: a built-in model name, a local folder or a Hub id.",
                          "type": "string", "minLength": 1},
            "over": {"description": "options: the option texts alone; context+option: the prompt-mode context, "
                                    "a space, the option.",
                     "enum": ["options", "context+option"]},
            "mode": {"description": "Prompt mode whose context is used with over: context+option (default full).",
                     **MODE},
        },
        "required": ["unit", "over"],
    },
}


# --- annotations -----------------------------------------------------------------------------

def fill_annotator(spec: dict, defaults: dict) -> None:
    """The annotator a condition reads: its own, else the rules' default (or --annotator)."""
    spec.setdefault("annotator", defaults.get("annotator"))
    if not spec["annotator"]:
        raise SpecError("no annotator named here and no defaults.annotator (or --annotator)")


def per_record(spec: dict, inputs, round: int, test) -> np.ndarray:
    """``test(result, gold)`` for each item's valid record; refused/invalid records do not
    match; an item without a record follows ``if_missing`` (an error by default)."""
    records = inputs.annotations(spec["annotator"], round)
    if_missing = spec.get("if_missing", "error")
    missing = [i for i in inputs.item_ids if i not in records]
    if missing and if_missing == "error":
        raise CurateError(f"{len(missing)} of {len(inputs.item_ids)} items have no round-{round} record from "
                          f"annotator {spec['annotator']!r} (first: {missing[0]}); annotate them, or set "
                          f"if_missing: match / no_match on this condition")
    out = np.zeros(len(inputs.item_ids), dtype=bool)
    for i, (item_id, gold) in enumerate(zip(inputs.item_ids, inputs.gold.tolist())):
        record = records.get(item_id)
        if record is None:
            out[i] = if_missing == "match"
        elif record[0] == "valid":
            out[i] = test(record[1], gold)
    return out


# --- lengths ---------------------------------------------------------------------------------

def fill_length(spec: dict, defaults: dict) -> None:
    """The prompt mode (default full) and, for token counts, the tokenizer: its own, else the
    rules' default (or --tokenizer); a tokenizer with another unit is refused."""
    spec.setdefault("mode", "full")
    if spec["unit"] == "tokens":
        spec.setdefault("tokenizer", defaults.get("tokenizer"))
        if not spec["tokenizer"]:
            raise SpecError("unit 'tokens' needs a tokenizer here, in defaults.tokenizer or --tokenizer")
    elif "tokenizer" in spec:
        raise SpecError(f"a tokenizer only applies to unit 'tokens', not {spec['unit']!r}", key="tokenizer")


def length_needs(spec: dict, **_) -> list[tuple[str, tuple]]:
    """Token counts need their tokenizer; other units need nothing."""
    return [("tokenizer", (spec["tokenizer"],))] if spec["unit"] == "tokens" else []


def lengths(spec: dict, inputs) -> np.ndarray:
    return inputs.lengths(spec["unit"], spec["over"], spec["mode"], spec.get("tokenizer"))


# --- counts and shares -----------------------------------------------------------------------

def check_count_bounds(spec: dict, named: list | None, what: str) -> None:
    """at_least above the number of things counted, or above at_most, can match nothing."""
    lo, hi = spec.get("at_least"), spec.get("at_most")
    if lo is not None and named and lo > len(named):
        raise SpecError(f"at_least {lo} exceeds the {len(named)} {what} named", key="at_least")
    if lo is not None and hi is not None and lo > hi:
        raise SpecError(f"at_least {lo} is above at_most {hi}")


def within(values: np.ndarray, spec: dict) -> np.ndarray:
    """``values`` between the spec's at_least and at_most (each inclusive, either optional)."""
    bounds = {"ge": spec.get("at_least"), "le": spec.get("at_most")}
    return features.in_range(values, {k: v for k, v in bounds.items() if v is not None})

