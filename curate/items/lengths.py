"""Option lengths, measured one way for the filter's conditions and the report's length section.

A length is counted in ``chars``, ``bytes`` (UTF-8) or ``tokens`` (of a tokenizer the caller
loads with ``scoring.models.tokenizer``, special tokens left out), over one of two texts: each
option alone, or the text scored in a prompt mode (``curate.items.formulations.Scored.texts``: the
context, the delimiter and the option; an item with per-option contexts, Winogrande, counts each
option's whole sentence). The relative spread and "gold is longest" are computed here too, so the
rules and the report measure the same thing.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

UNITS = ("chars", "bytes", "tokens")


def texts(items: Sequence[dict], over: str, mode: str) -> list[list[str]]:
    """The texts whose lengths are compared, one list per item: each option alone (``options``)
    or the text scored in ``mode`` (``context+option``)."""
    from curate.items.formulations import scored

    if over == "options":
        return [list(it["options"]) for it in items]
    return [scored(it, mode).texts() for it in items]


def count(flat: list[str], unit: str, tokenizer=None) -> np.ndarray:
    """Length of each text in ``unit``; ``tokens`` needs the ``tokenizer``."""
    if unit == "chars":
        return np.array([len(s) for s in flat], dtype=int)
    if unit == "bytes":
        return np.array([len(s.encode("utf-8")) for s in flat], dtype=int)
    if unit == "tokens":
        return np.array([len(ids) for ids in tokenizer(flat, add_special_tokens=False)["input_ids"]], dtype=int)
    raise ValueError(f"unknown unit {unit!r}")


def measure(rows: list[list[str]], unit: str, tokenizer=None) -> np.ndarray:
    """Lengths as a matrix, one row per item and one column per option (items with fewer options
    padded with NaN), so spreads and "gold is longest" are vectorized."""
    values = count([s for row in rows for s in row], unit, tokenizer) if rows else np.array([])
    out = np.full((len(rows), max((len(r) for r in rows), default=0)), np.nan)
    pos = 0
    for i, row in enumerate(rows):
        out[i, : len(row)] = values[pos: pos + len(row)]
        pos += len(row)
    return out


def relative_spread(lengths: np.ndarray) -> np.ndarray:
    """(longest - shortest) / longest per item (0 when every option is empty)."""
    longest = np.nanmax(lengths, axis=1)
    shortest = np.nanmin(lengths, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        spread = (longest - shortest) / longest
    return np.where(longest > 0, spread, 0.0)


def gold_is_longest(lengths: np.ndarray, gold: np.ndarray, *, strict: bool = False) -> np.ndarray:
    """Whether the gold option is the longest; a tie for longest counts unless ``strict``."""
    rows = np.arange(len(gold))
    gold_len = lengths[rows, gold]
    others = lengths.copy()
    others[rows, gold] = np.nan
    with np.errstate(invalid="ignore"):
        other_max = np.nanmax(others, axis=1)
    return gold_len > other_max if strict else gold_len >= other_max
