"""The generic adapter's column mapping, spelled one way everywhere: the audit config's
``benchmark.columns`` and `curate init --columns` take the same mapping (question, choices,
answer, ...), checked by the same schema fragment (``schemas/audit.schema.json``, ``$defs.columns``).

On the command line the mapping is a YAML or JSON file, or the same written inline:
``--columns '{question: goal, choices: [sol1, sol2], answer: label}'``.
"""
from __future__ import annotations

from pathlib import Path

import schemas
from curate.core import strict_yaml
from curate.core.errors import InputError
from curate.core.reading import CONFIG_LIMIT, read_text


def read_columns(value: str, *, where: str = "--columns") -> dict:
    """The mapping ``value`` names: a file holding it, else the mapping written inline."""
    path = Path(value)
    is_file = path.suffix.lower() in (".yaml", ".yml", ".json") or path.is_file()
    text = read_text(path, CONFIG_LIMIT, "a column mapping", missing="file not found") if is_file else value
    origin = str(path) if is_file else where
    mapping = strict_yaml.load_named(text, origin)
    check_columns(mapping, where=origin)
    return mapping


def check_columns(mapping, *, where: str) -> None:
    """Refuse a mapping the audit config would refuse, naming the key at fault."""
    document = schemas.load("audit")
    checker = schemas.compiled({"$defs": document["$defs"], "$ref": "#/$defs/columns"})
    problems = schemas.problems(checker, mapping)
    if problems:
        field, _, message = problems[0].partition(": ")
        raise InputError(message, path=where, field=None if field == "<root>" else field.replace("/", "."))


def adapter_keywords(columns: dict | None) -> dict:
    """The generic adapter's keywords for a mapping: its keys are the adapter's field names,
    lists of columns become tuples."""
    if not columns:
        return {}
    options = {"name": "generic", **columns}
    for key in ("choices", "ids"):
        if key in options:
            value = options[key]
            options[key] = (value,) if isinstance(value, str) else tuple(value)
    return options
