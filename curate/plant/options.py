"""The options of `curate plant` and `curate plant evaluate`, declared once: ``curate.core.options``
derives the click options and the defaults ``plant_workspace`` and ``evaluate_workspace`` take.
Re-scoring takes `curate score`'s own options (same defaults and ranges)."""
from __future__ import annotations

from dataclasses import replace

from curate.validity.item_options import FEWSHOT
from curate.items.canonical import MODES
from curate.core.options import Option, defaults, options_class
from curate.plant import KINDS
from scoring.normalize import NORMALIZATIONS
from scoring.options import SCORE


def _score(name: str, **changes) -> Option:
    return replace(next(o for o in SCORE if o.name == name), config=None, **changes)


def kinds_of(value) -> list[str]:
    """``"a,b"`` or ``["a", "b"]`` as a list of kinds (checked against ``KINDS`` where planted)."""
    parts = value.split(",") if isinstance(value, str) else list(value)
    return [str(k).strip() for k in parts if str(k).strip()]


PLANT = [
    Option("models", flag="--model", multiple=True, default=(),
           help="Local model that re-scores the changed options (as curate score --model; repeat for several)."),
    Option("kinds", default=",".join(KINDS), metavar="K1,K2", convert=kinds_of,
           help=f"Kinds of error to plant, comma-separated, from: {', '.join(KINDS)}."),
    Option("rate", float, 0.02, min=0, max=1, min_open=True, max_open=True,
           help="Share of the items planted with each kind (at least one item per kind; the kinds together "
                "leave at least one item unplanted, for evaluate to compare against)."),
    Option("seed", int, 0, help="Seed of the choice of items, options and donors."),
    Option("key", metavar="FILE", help="Where the key goes (default: TARGET.plant-key.json beside the new "
                                       "workspace; never inside it)."),
    Option("drop_unscored", bool, False,
           help="Leave out the models whose scores of changed items no --model re-scores (refused without it)."),
    _score("dtype"),
    _score("device", help="cpu, cuda, cuda:N or mps (re-scoring)."),
    _score("batch_tokens"),
    _score("self_check", help="Before storing anything, score N units also by the model's own plain forward "
                              "(0: skip)."),
    _score("quiet"),
]

EVALUATE = [
    Option("mode", default="full", choices=MODES, help="The scores' prompt mode the score detectors read."),
    Option("normalization", choices=NORMALIZATIONS,
           help="Normalization of the scores (default: the workspace's primary one)."),
    FEWSHOT,
    Option("json_output", bool, False, flag="--json", help="Print the table as JSON records."),
]

PlantOptions = options_class("PlantOptions", PLANT)
EVALUATE_DEFAULTS = defaults(EVALUATE)
