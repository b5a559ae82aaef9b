"""Rules files: UTF-8 YAML read safely (a key written twice is refused), checked against
``schemas/rules.schema.json``, defaults applied.

A rules file is data, never code: conditions are mappings of a known kind (see the schema), so a
rules file cannot run anything. Errors name the file and the path of the bad key
(``stages/3/when/labels/any/0``).
"""
from __future__ import annotations

import copy
from pathlib import Path

import yaml

import schemas
from curate import strict_yaml
from curate.errors import InputError
from curate.items import sha256_text

#: Condition kinds that read an annotator's records, and those that may count tokens.
ANNOTATION_KINDS = ("labels", "answer", "status")
LENGTH_KINDS = ("length_spread", "gold_longest")


def load_rules(path: str | Path, *, annotator: str | None = None, tokenizer: str | None = None) -> dict:
    """The rules in ``path`` with defaults filled into every condition.

    Returns ``{"name", "description", "stages", "text", "sha256", "path", "defaults"}``; ``text``
    is the file exactly as read (what releases record), ``stages`` the resolved stages.
    ``annotator``/``tokenizer`` override the file's ``defaults``.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read rules file: {exc.strerror}", path=str(path)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line} (save the file as UTF-8)",
                         path=str(path)) from None
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
    problems = schemas.errors("rules", doc)
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
    """A copy of ``cond`` with the annotator/tokenizer defaults filled in where needed."""
    (kind, spec), = cond.items()
    if kind in ("all", "any"):
        return {kind: [_fill(c, defaults, f"{where}/{kind}/{i}", path) for i, c in enumerate(spec)]}
    if kind == "not":
        return {kind: _fill(spec, defaults, f"{where}/not", path)}
    spec = copy.deepcopy(spec)
    if kind in ANNOTATION_KINDS:
        spec.setdefault("annotator", defaults.get("annotator"))
        if not spec["annotator"]:
            raise InputError("no annotator named here and no defaults.annotator (or --annotator)",
                             path=str(path), field=f"{where}/{kind}")
    if kind in LENGTH_KINDS:
        spec.setdefault("mode", "full")
        if spec["unit"] == "tokens":
            spec.setdefault("tokenizer", defaults.get("tokenizer"))
            if not spec["tokenizer"]:
                raise InputError("unit 'tokens' needs a tokenizer here, in defaults.tokenizer or --tokenizer",
                                 path=str(path), field=f"{where}/{kind}")
        elif "tokenizer" in spec:
            raise InputError(f"a tokenizer only applies to unit 'tokens', not {spec['unit']!r}",
                             path=str(path), field=f"{where}/{kind}/tokenizer")
    if kind == "length_spread":
        _check_spread_bounds(spec, path, f"{where}/{kind}")
    if kind in ("correct", "seeds_correct"):
        lo, hi = spec.get("at_least"), spec.get("at_most")
        named = spec.get("models") or spec.get("seeds")
        if lo is not None and named and lo > len(named):
            what = "models" if kind == "correct" else "seeds"
            raise InputError(f"at_least {lo} exceeds the {len(named)} {what} named",
                             path=str(path), field=f"{where}/{kind}/at_least")
        if lo is not None and hi is not None and lo > hi:
            raise InputError(f"at_least {lo} is above at_most {hi}", path=str(path), field=f"{where}/{kind}")
    return {kind: spec}


def _check_spread_bounds(spec: dict, path: Path, where: str) -> None:
    """Bounds that no spread can meet (NaN, infinite, contradictory, outside [0, 1]) would
    silently match nothing; they are refused instead."""
    import math
    for key in ("gt", "ge", "lt", "le"):
        if key in spec and not math.isfinite(spec[key]):
            raise InputError(f"{key} {spec[key]} is not a finite number", path=str(path), field=f"{where}/{key}")
    lower = max(((spec[k], k) for k in ("gt", "ge") if k in spec), default=(-math.inf, "ge"))
    upper = min(((spec[k], k) for k in ("lt", "le") if k in spec), default=(math.inf, "le"))
    strict = lower[1] == "gt" or upper[1] == "lt"
    if lower[0] > upper[0] or (lower[0] == upper[0] and strict):
        raise InputError(f"{lower[1]} {lower[0]} and {upper[1]} {upper[0]} leave no value between them",
                         path=str(path), field=where)
    if lower[0] > 1 or (lower[0] == 1 and lower[1] == "gt") or upper[0] < 0 or (upper[0] == 0 and upper[1] == "lt"):
        raise InputError("a relative spread lies between 0 and 1; these bounds leave none of it",
                         path=str(path), field=where)
