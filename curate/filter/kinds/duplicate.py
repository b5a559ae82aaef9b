"""duplicate: the item has a copy (`curate duplicates`): in the workspace, in another split of
its benchmark, or in another benchmark."""
from __future__ import annotations

import numpy as np

from curate.items.duplicates import store
from curate.items.duplicates.detect import THRESHOLD
from curate.core.errors import CurateError

SCOPES = ["within", "split", "cross"]

SCHEMA = {
    "description": "The item is in a pair found by the last `curate duplicates` search of these scopes (within: both "
                   "items in the workspace; split: the copy is in another split of the benchmark; cross: in another "
                   "benchmark) and fields (both: a copy of question and options; question: the same question with "
                   "other options), at least min_similarity similar. Within the workspace the first item of each "
                   "group of copies (by row) is kept unless keep is none.",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "scope": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": SCOPES}},
        "field": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": ["both", "question"]}},
        "min_similarity": {"type": "number", "minimum": 0.5, "maximum": 1},
        "keep": {"enum": ["first", "none"]},
    },
}


def needs(spec: dict, *, default_formulation: str) -> list[tuple[str, tuple]]:
    """A duplicate search's pairs (``curate duplicates``)."""
    return [("duplicates", ())]


def evaluate(spec: dict, inputs) -> np.ndarray:
    if "duplicate_pairs" not in inputs.ws.tables() or inputs.ws.meta("duplicates") is None:
        raise CurateError(f"duplicate: {inputs.ws.root} has no duplicate search; run `curate duplicates "
                          f"{inputs.ws.root}` first")
    scopes, fields = set(spec.get("scope", SCOPES)), set(spec.get("field", ["both"]))
    least = spec.get("min_similarity", THRESHOLD)
    row = {item_id: n for n, item_id in enumerate(inputs.item_ids)}
    matched = np.zeros(len(row), dtype=bool)
    within: list[tuple[str, str]] = []
    for r in store.records(inputs.ws):
        scope = store.scope_of(r)
        if scope not in scopes or r["field"] not in fields or r["similarity"] < least:
            continue
        if scope == "within":
            within.append((r["item_a"], r["item_b"]))
            continue
        mine = r["item_a"] if r["collection_a"] == "workspace" else r["item_b"]
        matched[row[mine]] = True
    for a, b in within:
        if spec.get("keep", "first") == "none":
            matched[row[a]] = matched[row[b]] = True
    if spec.get("keep", "first") == "first":
        matched |= _all_but_first(within, row)
    return matched


def _all_but_first(pairs: list[tuple[str, str]], row: dict[str, int]) -> np.ndarray:
    """Every item of each group of copies (connected by ``pairs``) but the one of lowest row."""
    parent = {k: k for pair in pairs for k in pair}

    def root(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for a, b in pairs:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb, key=row.get)] = min(ra, rb, key=row.get)
    out = np.zeros(len(row), dtype=bool)
    for k in parent:
        out[row[k]] = root(k) != k
    return out
