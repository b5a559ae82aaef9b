"""seeds_correct: how many seeds of a model's generated answers pick the gold option."""
from __future__ import annotations

import numpy as np

from curate.core.errors import CurateError
from curate.filter.kinds._common import AT_LEAST_OR_MOST, MODE, check_count_bounds, within

SCHEMA = {
    "description": "How many seeds of the model's generated answers (curate generate) pick the gold option in the "
                   "mode: at_least and/or at_most. An unparsed reply counts as not correct. template and settings "
                   "('t=T,p=P,n=N') may be left out when the model has generations under one of each in this mode; "
                   "seeds default to every seed stored, and every item must be answered under each.",
    "type": "object",
    "additionalProperties": False,
    "required": ["model", "mode"],
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "mode": MODE,
        "template": {"type": "string", "minLength": 1},
        "settings": {"type": "string", "minLength": 1},
        "seeds": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "integer", "minimum": 0}},
        "at_least": {"type": "integer", "minimum": 0},
        "at_most": {"type": "integer", "minimum": 0},
    },
    "anyOf": AT_LEAST_OR_MOST,
}


def fill(spec: dict, defaults: dict) -> None:
    check_count_bounds(spec, spec.get("seeds"), "seeds")


def needs(spec: dict, **_) -> list[tuple[str, tuple]]:
    return [("generations", (spec["model"], spec["mode"]))]


def evaluate(spec: dict, inputs) -> np.ndarray:
    key = ("seeds_correct", spec["model"], spec["mode"], spec.get("template"), spec.get("settings"),
           tuple(spec.get("seeds") or ()))
    return within(inputs.cached(key, lambda: seeds_right(spec, inputs)).sum(axis=1), spec)


def seeds_right(spec: dict, inputs) -> np.ndarray:
    """Items x seeds: whether the model's generated answer is the gold (unparsed: not), in item
    order. Every item must be answered under every seed asked for."""
    model, mode = spec["model"], spec["mode"]
    gens = inputs.generations(model, mode)
    if gens.empty:
        raise CurateError(f"seeds_correct: no generations of model {model!r} in mode {mode!r} in this workspace "
                          f"(curate generate)")
    for field in ("template", "settings"):
        present = sorted(gens[field].unique())
        if spec.get(field) is None and len(present) > 1:
            raise CurateError(f"seeds_correct: model {model!r} in mode {mode!r} has generations under "
                              f"{field}s {', '.join(present)}; name one with '{field}:'")
        wanted = spec.get(field) or present[0]
        if wanted not in present:
            raise CurateError(f"seeds_correct: no generations of {model!r} in mode {mode!r} under {field} "
                              f"{wanted!r} (present: {', '.join(present)})")
        gens = gens[gens[field] == wanted]
    seeds = list(spec.get("seeds") or sorted(gens["seed"].unique()))
    right = gens.assign(right=gens["correct"].fillna(False).astype(bool)).pivot(
        index="item_id", columns="seed", values="right").reindex(index=inputs.item_ids, columns=seeds)
    missing = right.isna().any(axis=1)
    if missing.any():
        first = right.index[missing.to_numpy()][0]
        raise CurateError(f"seeds_correct: {int(missing.sum())} of {len(inputs.item_ids)} items lack a generation "
                          f"of {model!r} in mode {mode!r} for some of seeds {seeds} (first: {first}); "
                          f"generate them or name the seeds to use")
    inputs.note_generations(gens[gens["seed"].isin(seeds)], seeds)
    return right.to_numpy(bool)
