"""Rules files: UTF-8 YAML read safely (a key written twice is refused), checked against the
rules schema (built from the condition kinds, ``curate.filter.kinds``; written out as
``schemas/rules.schema.json``), defaults applied.

A rules file is data, never code: conditions are mappings of a known kind (see the schema), so a
rules file cannot run anything. Errors name the file and the path of the bad key
(``stages/3/when/labels/any/0``).
"""
from __future__ import annotations

from pathlib import Path

import yaml

import schemas
from curate.core import strict_yaml
from curate.core.errors import InputError
from curate.filter import conditions
from curate.filter.kinds import rules_validator
from curate.items.canonical import sha256_text
from curate.core.reading import CONFIG_LIMIT, read_text


def load_rules(path: str | Path, *, annotator: str | None = None, tokenizer: str | None = None) -> dict:
    """The rules in ``path`` with defaults filled into every condition.

    Returns ``{"name", "description", "stages", "text", "sha256", "path", "defaults"}``; ``text``
    is the file exactly as read (what releases record), ``stages`` the resolved stages.
    ``annotator``/``tokenizer`` override the file's ``defaults``.
    """
    path = Path(path)
    text = read_text(path, CONFIG_LIMIT, "a rules file")
    try:
        doc = strict_yaml.load(text)
    except strict_yaml.DuplicateKey as exc:
        raise InputError(str(exc), path=str(path), field=exc.key) from None
    except strict_yaml.TooComplex as exc:
        raise InputError(f"refused: {exc}", path=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputError(f"not valid YAML{where}: {getattr(exc, 'problem', exc)}", path=str(path)) from None
    problems = schemas.problems(rules_validator(), doc)
    if problems:
        field, _, message = problems[0].partition(": ")
        raise InputError(message, path=str(path), field=field)
    names = [s["name"] for s in doc["stages"]]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise InputError(f"stage name {name!r} is used twice", path=str(path), field=f"stages/{i}/name")
    defaults = dict(doc.get("defaults") or {})
    if annotator:
        defaults["annotator"] = annotator
    if tokenizer:
        defaults["tokenizer"] = tokenizer
    stages = [{"name": s["name"], "description": s.get("description", s["name"]),
               "when": _fill(s["when"], defaults, f"stages/{i}/when", path)}
              for i, s in enumerate(doc["stages"])]
    return {"name": doc["name"], "description": doc.get("description", ""), "stages": stages,
            "defaults": defaults, "text": text, "sha256": sha256_text(text), "path": str(path)}



def _fill(cond: dict, defaults: dict, where: str, path: Path) -> dict:
    """A copy of ``cond`` with the defaults filled in; a condition they cannot complete is
    refused naming the file and the path of the key."""
    try:
        return conditions.fill(cond, defaults, where)
    except conditions.FillError as exc:
        raise InputError(str(exc), path=str(path), field=exc.field) from None
