"""JSON Schemas for everything benchcurate reads or writes, and one way to validate against them.

Each schema lives beside this file as ``NAME.schema.json``; ``validator("item")`` returns a
compiled validator so hot loops do not re-parse the schema.
"""
from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import jsonschema

SCHEMA_DIR = Path(__file__).parent


@cache
def load(name: str) -> dict:
    """The schema document called ``name`` (e.g. ``"item"``)."""
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))


@cache
def validator(name: str) -> jsonschema.protocols.Validator:
    return compiled(load(name))


def compiled(schema: dict) -> jsonschema.protocols.Validator:
    """A validator of ``schema`` (a schema document, also one built in code: the rules')."""
    base = jsonschema.validators.validator_for(schema)
    base.check_schema(schema)
    # JSON Schema counts 1.0 as an integer; Python code does not (a limit of 3.0 fails in islice,
    # a round of 1.0 names a prompt file "round1.0"), so here an integer is an int, never a float.
    cls = jsonschema.validators.extend(base, type_checker=base.TYPE_CHECKER.redefine(
        "integer", lambda checker, value: isinstance(value, int) and not isinstance(value, bool)))
    return cls(schema, format_checker=base.FORMAT_CHECKER)


def errors(name: str, instance) -> list[str]:
    """Human-readable problems of ``instance`` against schema ``name``; empty when valid.

    Each message starts with the JSON path of the offending value, e.g. ``options/2: ...``.
    """
    return problems(validator(name), instance)


def problems(checker: jsonschema.protocols.Validator, instance) -> list[str]:
    """``errors`` against a compiled validator (``compiled``), most telling first."""
    # "Unevaluated properties" follows from any failed check in an allOf branch ("unit" is
    # unexpected because its value was wrong), and "not valid under any of the given schemas"
    # from any failed branch of a oneOf, so the errors that say what is wrong go first.
    found = sorted(checker.iter_errors(instance),
                   key=lambda e: (e.validator in ("unevaluatedProperties", "oneOf", "anyOf"),
                                  list(map(str, e.absolute_path))))
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in found]


def read_checked(path, name: str, *, missing: str = "file not found") -> dict:
    """The JSON document in ``path``, checked against schema ``name``. Raises InputError naming
    the file, and the field at fault, when it is absent, not JSON, or does not fit the schema."""
    from curate.core.errors import InputError
    from curate.core.reading import read_json

    document = read_json(path, f"a {name} file", missing=missing)  # bounded in size and depth
    problems = errors(name, document)
    if problems:
        field, _, message = problems[0].partition(": ")
        raise InputError(message, path=str(path), field=field)
    return document
