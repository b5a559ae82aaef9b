"""Evaluating one condition to a boolean per item (in row order).

Each kind of condition (see ``schemas/rules.schema.json``) is one small function from its spec
and the run's ``Inputs`` to a boolean array; ``evaluate`` dispatches on the kind and handles the
combinators. Nothing here writes anything.
"""
from __future__ import annotations

import numpy as np
from rapidfuzz import fuzz

from curate.errors import CurateError
from curate.filter import features
from curate.filter.inputs import Inputs


def evaluate(cond: dict, inputs: Inputs) -> np.ndarray:
    (kind, spec), = cond.items()
    if kind == "all":
        return np.logical_and.reduce([evaluate(c, inputs) for c in spec])
    if kind == "any":
        return np.logical_or.reduce([evaluate(c, inputs) for c in spec])
    if kind == "not":
        return ~evaluate(spec, inputs)
    return KINDS[kind](spec, inputs)


# --- annotations ---------------------------------------------------------------------------

def _per_record(spec: dict, inputs: Inputs, round: int, test) -> np.ndarray:
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


def labels(spec: dict, inputs: Inputs) -> np.ndarray:
    wanted = set(spec.get("any") or spec["all"])
    if "any" in spec:
        return _per_record(spec, inputs, 1, lambda r, _: bool(wanted & set(r["labels"])))
    return _per_record(spec, inputs, 1, lambda r, _: wanted <= set(r["labels"]))


#: Round-2 questions, as tests of (result, gold index).
ANSWERS = {
    "best_not_gold": lambda r, g: r["best"] != g,
    "equally_good": lambda r, g: any(j != g for j in r["equally_good"]),
    "all_implausible": lambda r, g: bool(r["all_implausible"]),
    "worst_is_gold": lambda r, g: r["worst"] == g,
}


def answer(spec: dict, inputs: Inputs) -> np.ndarray:
    return _per_record(spec, inputs, 2, ANSWERS[spec["is"]])


def status(spec: dict, inputs: Inputs) -> np.ndarray:
    rounds = [spec["round"]] if "round" in spec else [1, 2]
    out = np.zeros(len(inputs.item_ids), dtype=bool)
    for rnd in rounds:
        records = inputs.annotations(spec["annotator"], rnd)
        if spec["is"] == "missing":
            out |= np.array([i not in records for i in inputs.item_ids])
        else:
            out |= np.array([records.get(i, (None,))[0] == spec["is"] for i in inputs.item_ids])
    return out


# --- lengths -------------------------------------------------------------------------------

def _lengths(spec: dict, inputs: Inputs) -> np.ndarray:
    return inputs.lengths(spec["unit"], spec["over"], spec["mode"], spec.get("tokenizer"))


def length_spread(spec: dict, inputs: Inputs) -> np.ndarray:
    return features.in_range(features.relative_spread(_lengths(spec, inputs)), spec)


def gold_longest(spec: dict, inputs: Inputs) -> np.ndarray:
    return features.gold_is_longest(_lengths(spec, inputs), inputs.gold, strict=spec.get("strict", False))


# --- scores --------------------------------------------------------------------------------

def correct(spec: dict, inputs: Inputs) -> np.ndarray:
    preds = inputs.predictions(spec["models"], spec["mode"], spec["normalization"], spec.get("formulation"))
    gold = dict(zip(inputs.item_ids, inputs.gold.tolist()))
    counts = features.correct_counts(preds, gold, spec["models"], inputs.item_ids)
    bounds = {"ge": spec.get("at_least"), "le": spec.get("at_most")}
    return features.in_range(counts, {k: v for k, v in bounds.items() if v is not None})


def seeds_correct(spec: dict, inputs: Inputs) -> np.ndarray:
    counts = inputs.seeds_right(spec).sum(axis=1)
    bounds = {"ge": spec.get("at_least"), "le": spec.get("at_most")}
    return features.in_range(counts, {k: v for k, v in bounds.items() if v is not None})


def rotated_correct(spec: dict, inputs: Inputs) -> np.ndarray:
    right, total = inputs.rotation_counts(spec["models"], spec["mode"], spec["normalization"])
    bounds = {"ge": spec.get("at_least"), "le": spec.get("at_most")}
    return features.in_range(right / total, {k: v for k, v in bounds.items() if v is not None})


# --- item text and fields ------------------------------------------------------------------

SCORERS = {"ratio": fuzz.ratio, "token_sort_ratio": fuzz.token_sort_ratio,
           "token_set_ratio": fuzz.token_set_ratio, "partial_ratio": fuzz.partial_ratio}


def near_duplicate_options(spec: dict, inputs: Inputs) -> np.ndarray:
    scorer = SCORERS[spec.get("scorer", "ratio")]
    sims = features.max_pair_similarity([it["options"] for it in inputs.items], scorer)
    return sims >= spec["threshold"]


def field(spec: dict, inputs: Inputs) -> np.ndarray:
    """A misspelt field name or value would match nothing and keep every item: both refused,
    as ``ids`` refuses ids that are not items (null still means "the item lacks the field")."""
    name, wanted = spec["name"], spec["in"]
    key = "split_type" if name == "split_type" else name.removeprefix("native_ids.")
    native = name == "split_type" or name.startswith("native_ids.")
    if native and inputs.items and not any(key in it["native_ids"] for it in inputs.items):
        have = sorted({k for it in inputs.items for k in it["native_ids"]})
        raise CurateError(f"field: no item has {name!r} (their native_ids hold: {', '.join(have) or 'nothing'})")
    values = [it["native_ids"].get(key) if native else it.get(name) for it in inputs.items]
    seen = set(values)
    unknown = [v for v in wanted if v is not None and v not in seen]
    if unknown:
        present = sorted({str(v) for v in values if v is not None})
        raise CurateError(f"field: {name} is never {unknown[0]!r} in this workspace (its values: "
                          f"{', '.join(present[:10])}{', ...' if len(present) > 10 else ''})")
    return np.array([v in wanted for v in values])


def ids(spec: dict, inputs: Inputs) -> np.ndarray:
    key, wanted = next(iter(spec.items()))
    have = [it[key] for it in inputs.items]
    unknown = sorted(set(wanted) - set(have), key=str)
    if unknown:
        raise CurateError(f"ids: {len(unknown)} listed {key} values are not items of this workspace "
                          f"(first: {unknown[0]})")
    wanted = set(wanted)
    return np.array([v in wanted for v in have])


KINDS = {"labels": labels, "answer": answer, "status": status, "length_spread": length_spread,
         "gold_longest": gold_longest, "correct": correct, "seeds_correct": seeds_correct,
         "rotated_correct": rotated_correct,
         "near_duplicate_options": near_duplicate_options,
         "field": field, "ids": ids}
