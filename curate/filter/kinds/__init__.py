"""Filter condition kinds: one module each, found here by name.

A rules file's condition is a mapping with one key, its kind (``labels``, ``length_spread``,
...), or a combinator (``all``, ``any``, ``not``: see ``curate.filter.conditions``). Each kind is
the module of that name in this package, which holds everything about it:

- ``SCHEMA`` (required): the JSON Schema of its spec; the rules schema is built from these
  (``rules_schema``), and ``schemas/rules.schema.json`` is that schema written out.
- ``evaluate(spec, inputs) -> bool array`` (required): one boolean per item, in row order, read
  through ``curate.filter.inputs.Inputs``.
- ``fill(spec, defaults)`` (optional): fills the rules' ``defaults`` (annotator, tokenizer) into
  ``spec`` (a copy) and refuses what the schema cannot say, raising ``SpecError``.
- ``needs(spec, *, default_formulation) -> [(kind, what)]`` (optional): what it reads, for the
  audit's plan check (``curate.audit.plan``): ``("annotation", (annotator, rounds))`` (records in
  one of the rounds will do), ``("scores", (model, mode, normalization, formulation[, fewshot]))``
  (fewshot: the shot count when the spec names one, 0-shot without; item validity's kinds give
  ``curate.validity.item_options.ByRule`` for their default),
  ``("generations", (model, mode))``, ``("answers", (model,))`` (the model's stored answers,
  ``scoring.answers``), ``("tokenizer", (name,))``, ``("duplicates", ())`` (a duplicate search's
  pairs). The plan checks that what the workspace holds or a planned stage provides has each
  (``curate.audit.needs``).
- ``DEFS`` (optional): further named schema parts its ``SCHEMA`` refers to (``#/$defs/NAME``).

Adding a kind is adding its module here; modules whose name starts with ``_`` are helpers.
"""
from __future__ import annotations

import copy
from functools import cache

from curate.core.registry import Registry
from curate.filter.kinds._common import DEFS as SHARED_DEFS
from curate.filter.kinds._common import SpecError

__all__ = ["KINDS", "SpecError", "rules_schema", "rules_validator", "refresh"]

#: A condition's combinators; every other key of a condition is a kind.
COMBINATORS = ("all", "any", "not")

#: The rules schema around the conditions: the file's keys, its stages, and the combinators.
FRAME = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://benchcurate.dev/schemas/rules.schema.json",
    "title": "Filter rules",
    "description": "Ordered filter stages. An item leaves at the first stage whose condition it matches; every "
                   "stage is still evaluated on every item so the table can say how many items each stage "
                   "matched. A condition is a mapping with exactly one key naming its kind (one module each in "
                   "curate/filter/kinds/, which this schema is built from).",
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "stages"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "description": {"type": "string"},
        "defaults": {
            "description": "Values used by every condition that leaves them out; `curate filter "
                           "--annotator/--tokenizer` override them.",
            "type": "object",
            "additionalProperties": False,
            "properties": {"annotator": {"type": "string", "minLength": 3},
                           "tokenizer": {"type": "string", "minLength": 1}},
        },
        "stages": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/stage"}},
    },
    "$defs": {
        "stage": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "when"],
            "properties": {"name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_.-]*$"},
                           "description": {"type": "string"},
                           "when": {"$ref": "#/$defs/condition"}},
        },
        "condition": {
            "type": "object",
            "minProperties": 1,
            "maxProperties": 1,
            "additionalProperties": False,
            "properties": {"all": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/condition"}},
                           "any": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/condition"}},
                           "not": {"$ref": "#/$defs/condition"}},
        },
    },
}


#: Every condition kind, by name (its module's name), in name order (``curate.core.registry``).
KINDS = Registry(__name__, what="condition kind", required=("SCHEMA", "evaluate"), reserved=COMBINATORS)


@cache
def rules_schema() -> dict:
    """The rules schema: the frame, each kind's ``SCHEMA`` under its name, and the named parts."""
    schema = copy.deepcopy(FRAME)
    defs = schema["$defs"]
    defs.update(copy.deepcopy(SHARED_DEFS))
    kinds = KINDS.modules
    for name, module in kinds.items():
        for part, fragment in getattr(module, "DEFS", {}).items():
            if defs.setdefault(part, fragment) != fragment or part in kinds:
                raise TypeError(f"{module.__file__}: schema part {part!r} is defined twice, differently")
    for name, module in kinds.items():
        defs["condition"]["properties"][name] = {"$ref": f"#/$defs/{name}"}
        defs[name] = module.SCHEMA
    return schema


@cache
def rules_validator():
    """The compiled rules schema (``schemas.compiled``: an integer is an int, never 1.0)."""
    import schemas
    return schemas.compiled(rules_schema())


def refresh() -> None:
    """Forget the kinds found so far (after this package's ``__path__`` changed: tests)."""
    KINDS.refresh()
    for found in (rules_schema, rules_validator):
        found.cache_clear()
