"""The condition tree: its one walk, and the three things done with it.

A condition is ``{kind: spec}`` for a kind in ``curate.filter.kinds`` (one module each), or a
combinator over conditions: ``{"all": [...]}``, ``{"any": [...]}``, ``{"not": {...}}``. ``fold``
is the only code that walks the tree; ``fill`` (defaults, when the rules are loaded), ``needs``
(what the audit's plan check looks for) and ``evaluate`` (one boolean per item) each give it what
to do at a kind's condition and how to join a combinator's results. Nothing here writes anything.
"""
from __future__ import annotations

import copy
from typing import Callable

import numpy as np

from curate.filter.kinds import KINDS, SpecError


def fold(cond: dict, leaf: Callable[[str, dict, str], object], join: Callable[[str, list], object],
         where: str = "when"):
    """``leaf(kind, spec, path)`` at each kind's condition, ``join(combinator, results)`` at each
    all/any/not (``not`` joins a list of one); ``path`` names the condition's key in the rules
    file (``stages/3/when/all/0/labels``), starting from ``where``."""
    (kind, spec), = cond.items()
    if kind in ("all", "any"):
        return join(kind, [fold(c, leaf, join, f"{where}/{kind}/{i}") for i, c in enumerate(spec)])
    if kind == "not":
        return join(kind, [fold(spec, leaf, join, f"{where}/not")])
    return leaf(kind, spec, f"{where}/{kind}")


def _rebuild(kind: str, parts: list) -> dict:
    return {kind: parts[0] if kind == "not" else parts}


class FillError(ValueError):
    """A condition the defaults cannot complete, at ``field`` (the path of the key at fault)."""

    def __init__(self, message: str, field: str):
        self.field = field
        super().__init__(message)


def fill(cond: dict, defaults: dict, where: str) -> dict:
    """A copy of ``cond`` with the rules' defaults filled into every condition (each kind's
    ``fill``); raises ``FillError`` naming the path of a condition that cannot work."""
    kinds = KINDS.modules

    def leaf(kind, spec, path):
        spec = copy.deepcopy(spec)
        try:
            getattr(kinds[kind], "fill", lambda *_: None)(spec, defaults)
        except SpecError as exc:
            raise FillError(str(exc), f"{path}/{exc.key}" if exc.key else path) from None
        return {kind: spec}
    return fold(cond, leaf, _rebuild, where)


def needs(cond: dict, *, default_formulation: str = "cloze") -> list[tuple[str, tuple]]:
    """What a filled condition reads, as (input kind, what) pairs (see ``curate.filter.kinds``);
    a score read in no named formulation is in ``default_formulation``."""
    kinds = KINDS.modules

    def leaf(kind, spec, _):
        found = getattr(kinds[kind], "needs", None)
        return list(found(spec, default_formulation=default_formulation)) if found else []
    return fold(cond, leaf, lambda _, parts: [n for part in parts for n in part])


#: How each combinator joins its conditions' matches.
JOINS = {"all": lambda parts: np.logical_and.reduce(parts), "any": lambda parts: np.logical_or.reduce(parts),
         "not": lambda parts: ~parts[0]}


def evaluate(cond: dict, inputs) -> np.ndarray:
    """One boolean per item (in row order): whether it matches the filled condition ``cond``."""
    kinds = KINDS.modules
    return fold(cond, lambda kind, spec, _: kinds[kind].evaluate(spec, inputs),
                lambda kind, parts: JOINS[kind](parts))
