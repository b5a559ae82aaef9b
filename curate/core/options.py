"""Stage options declared once: a table of ``Option`` per stage, and what is derived from it.

Each stage keeps its table in its package (``scoring/options.py``, ``annotate/options.py``,
``generate/options.py``, ...), and a command that runs no stage keeps its own beside it (in its
cli module). From one table come

- the command's click options (``click_options``), old spellings kept as hidden aliases;
- the stage's options object (``options_class``), every value checked on construction;
- the audit config's schema properties (``schema_properties``; ``make schemas`` writes them
  into ``schemas/audit.schema.json``) and the defaults it takes (``defaults``),

so a default, a type or a range is written in one place. ``tests/test_stage_options.py``
checks that the command, the schema file and the options object agree.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import click

_JSON_TYPES = {int: "integer", float: "number", bool: "boolean", str: "string"}


@dataclass(frozen=True)
class Option:
    """One option of a stage. ``name`` is the options object's field and the config key."""
    name: str
    type: type = str
    default: Any = None
    help: str = ""
    choices: tuple = ()
    min: float | None = None
    max: float | None = None
    min_open: bool = False      # the minimum itself is refused (schema: exclusiveMinimum)
    max_open: bool = False      # the maximum itself is refused (schema: exclusiveMaximum)
    flag: str | None = None     # the command-line spelling; default --name-with-dashes
    aliases: tuple[str, ...] = ()  # old spellings, still accepted, hidden from --help
    config: str | None = None   # the audit config's description; None: not a config key
    pattern: str | None = None  # the config's pattern (the command checks such a value when it runs)
    max_length: int | None = None  # the config's maxLength (the command checks such a value when it runs)
    required: bool = False      # the command needs it (the config's section lists it as required)
    backend: str | None = None  # a knob of one backend only: given as -o NAME VALUE (its flag hidden)
    nullable: bool = False      # the config may write null (= the default)
    metavar: str | None = None
    convert: Callable | None = None  # value -> the value the stage takes ("0,5" -> [0, 5]); ValueError if bad
    #                                  (it checks the value in place of ``pattern``, which the config schema keeps)
    show_default: bool = True
    path: str | None = None     # a path: "file" or "folder" that must exist, "out" a folder to write, "write"
    #                             a file or folder to write, "write-file" a file to write (a Path)
    multiple: bool = False      # repeatable on the command line (``--model a --model b``): a tuple, () when not given
    hidden: bool = False        # accepted, not shown in --help (an old spelling of a part of another option)

    @property
    def spelling(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def click_type(self):
        if self.path:
            return click.Path(exists=self.path in ("file", "folder"), dir_okay=self.path not in ("file", "write-file"),
                              file_okay=self.path in ("file", "write", "write-file"), path_type=Path)
        if self.choices:
            return click.Choice(list(self.choices))
        bounded = self.min is not None or self.max is not None
        if self.type is int and bounded:
            return click.IntRange(self.min, self.max)
        if self.type is float and bounded:
            return click.FloatRange(self.min, self.max, min_open=self.min_open, max_open=self.max_open)
        return self.type


def options_class(name: str, table: list[Option], doc: str = "", check: Callable | None = None) -> type:
    """The stage's options object: a frozen dataclass with one field per option of ``table``
    (its default), each value checked on construction as the command's flag checks it (type,
    choices, range, pattern, ``convert``), so a stage receives one object it need not check
    again. A bad value is a CurateError naming the option's flag. ``check(options)``, when given,
    then refuses (with a CurateError) what no row says alone: two options that exclude each other."""
    fields = [(o.name, Any, dataclasses.field() if o.required else dataclasses.field(default=o.default)) for o in table]

    def __post_init__(self):
        for o in table:
            object.__setattr__(self, o.name, checked(o, getattr(self, o.name)))
        if check is not None:
            check(self)

    cls = dataclasses.make_dataclass(name, fields, frozen=True, kw_only=True,
                                     namespace={"__post_init__": __post_init__, "TABLE": table,
                                                "__doc__": doc or f"The options of one run ({name})."})
    return cls


def checked(o: Option, value):
    """``value`` of option ``o`` as the stage takes it, or a CurateError naming the flag."""
    from curate.core.errors import CurateError

    try:
        return _checked(o, value)
    except (ValueError, TypeError) as exc:
        raise CurateError(f"{o.spelling} {value!r}: {exc}") from None


def _checked(o: Option, value):
    if o.multiple and value is not None and o.convert is None:
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ValueError("expected a list")
        return tuple(_checked(dataclasses.replace(o, multiple=False), v) for v in value)
    if value is None:
        if o.required:
            raise ValueError("is required")
        return None
    if o.path:
        if not isinstance(value, (str, os.PathLike)):
            raise ValueError("expected a path")
        return Path(value)
    if o.type is str and o.pattern and o.convert is None and isinstance(value, str) and not re.fullmatch(o.pattern, value):
        raise ValueError(f"does not match {o.pattern}")
    if o.type is float and isinstance(value, float) and not math.isfinite(value):  # before any conversion
        raise ValueError("is not a finite number")
    if o.convert is not None:
        return o.convert(value)
    if o.choices:
        if value not in o.choices:
            raise ValueError(f"choose from {', '.join(map(str, o.choices))}")
        return value
    if o.type is bool:
        if not isinstance(value, bool):
            raise ValueError("expected true or false")
        return value
    if o.type in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (o.type is int and isinstance(value, float)):
            raise ValueError(f"expected {'an integer' if o.type is int else 'a number'}")
        _in_range(o, value)
        return o.type(value)
    if not isinstance(value, o.type):
        raise ValueError(f"expected {o.type.__name__}")
    return value


def _in_range(o: Option, value) -> None:
    low = o.min is not None and (value <= o.min if o.min_open else value < o.min)
    high = o.max is not None and (value >= o.max if o.max_open else value > o.max)
    if low or high:
        lo = "" if o.min is None else f"{o.min} {'<' if o.min_open else '<='} "
        hi = "" if o.max is None else f" {'<' if o.max_open else '<='} {o.max}"
        raise ValueError(f"is not in the range {lo}x{hi}")


def true_or_false(value) -> bool:
    """A setting whose default is true, given as ``-o NAME true|false`` (a flag can only turn on)."""
    if isinstance(value, bool):
        return value
    if value not in ("true", "false"):
        raise ValueError("expected true or false")
    return value == "true"


def defaults(table: list[Option]) -> dict[str, Any]:
    """Each option's default by name: what the options object and the audit config take."""
    return {o.name: o.default for o in table}


def in_config(table: list[Option]) -> list[Option]:
    return [o for o in table if o.config is not None]


def schema_properties(table: list[Option]) -> dict[str, dict]:
    """The JSON Schema of each option the audit config takes, by config key."""
    return {o.name: _schema(o) for o in in_config(table)}


def _schema(o: Option) -> dict:
    prop: dict[str, Any] = {"description": o.config} if o.config else {}
    if o.choices:
        prop["enum"] = list(o.choices)
    else:
        kind = _JSON_TYPES[o.type]
        prop["type"] = [kind, "null"] if o.nullable else kind
    if o.pattern:
        prop["pattern"] = o.pattern
    elif o.type is str and not o.choices:
        prop["minLength"] = 1
    if o.max_length is not None:
        prop["maxLength"] = o.max_length
    if o.min is not None:
        prop["exclusiveMinimum" if o.min_open else "minimum"] = o.min
    if o.max is not None:
        prop["exclusiveMaximum" if o.max_open else "maximum"] = o.max
    if o.default is not None:
        prop["default"] = o.default
    return prop


def click_options(table: list[Option], *, backend_of: Callable[[dict], tuple[str, str]] | None = None,
                  into: type | None = None):
    """A decorator adding the table's options to a click command, in table order; an old
    spelling given on the command line sets the option it was renamed to (``--old=VALUE``: a
    flag that sets it to VALUE). A backend's own knobs (``backend`` set) are given as ``-o NAME
    VALUE``, checked as their flag would be; their flags stay, hidden, so ``--help`` lists what
    every backend takes and one ``-o`` line. ``backend_of(kwargs)`` gives the backend the
    command's model runs on and how the user named it (``("anthropic", "--annotator
    anthropic:claude-haiku-4-5")``): a setting of another backend is refused rather than
    ignored. ``into`` (the stage's options class, ``options_class``): the command receives the
    table's values whole, as ``options``, instead of one keyword each."""
    knobs = {o.name: o for o in table if o.backend}

    def decorate(f):
        @functools.wraps(f)
        def command(**kwargs):
            for o in table:
                for i, alias in enumerate(o.aliases):
                    value = kwargs.pop(_alias_key(o, i))
                    if o.multiple and value:  # an old repeatable spelling adds to the option's values
                        kwargs[o.name] = (*(kwargs[o.name] or ()), *value)
                    elif value is not None and value is not False and not o.multiple:
                        _refuse_both(o, alias)
                        kwargs[o.name] = _alias_value(o, alias, value)
            given: dict[str, str] = {}
            for name, value in kwargs.pop(_KNOBS, ()) if knobs else ():
                o = _knob(knobs, name)
                if o.name in given:
                    raise click.UsageError(f"-o {name} is given twice ({given[o.name]!r}, then {value!r}): give it once")
                given[o.name] = value
                kwargs[o.name] = _knob_value(o, name, value)
            if backend_of and knobs:
                _check_backend(knobs, given, *backend_of(kwargs))
            if into is not None:
                kwargs["options"] = into(**{o.name: kwargs.pop(o.name) for o in table})
            return f(**kwargs)

        for o in reversed(table):
            for i, alias in enumerate(o.aliases):
                command = click.option(alias.split("=")[0], _alias_key(o, i), hidden=True, cls=_Once,
                                       **_alias_kwargs(o, alias))(command)
            command = click.option(o.spelling, o.name, hidden=o.hidden or o.backend is not None, cls=_Once,
                                   **_click_kwargs(o))(command)
        if knobs:
            command = click.option("-o", "--option", _KNOBS, type=(str, str), multiple=True, metavar="NAME VALUE",
                                   help=_knobs_help(knobs.values()))(command)
        return command
    return decorate


_KNOBS = "backend_options"


class _Once(click.Option):
    """A single-valued option refused when given twice (click keeps the last value silently): the
    parser collects every value given, and a second one is a UsageError naming both, as a repeated
    ``-o NAME`` is."""

    def add_to_parser(self, parser, ctx) -> None:
        if self.multiple or self.count or self.is_flag:
            return super().add_to_parser(parser, ctx)
        parser.add_option(obj=self, opts=self.opts, dest=self.name, action="append", nargs=self.nargs)

    def consume_value(self, ctx, opts):
        given = opts.get(self.name)
        if isinstance(given, list) and not (self.multiple or self.count or self.is_flag):
            if len(given) > 1:
                raise click.UsageError(f"{self.opts[0]} is given twice ({given[0]!r}, then {given[1]!r}): give it once",
                                       ctx=ctx)
            opts = {**opts, self.name: given[0]}
        return super().consume_value(ctx, opts)


def _knobs_help(knobs) -> str:
    by_backend: dict[str, list[str]] = {}
    for o in knobs:
        by_backend.setdefault(o.backend, []).append(o.spelling[2:])
    return "A backend's own setting, repeatable: " + "; ".join(
        f"{backend}: {', '.join(names)}" for backend, names in by_backend.items()) + " (see the docs for each)."


def _knob(knobs: dict, name: str) -> Option:
    o = knobs.get(name.replace("-", "_"))
    if o is None:
        raise click.UsageError(f"-o {name}: no such setting; the backends take {', '.join(sorted(knobs))}")
    ctx = click.get_current_context()
    if ctx.get_parameter_source(o.name) is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError(f"-o {name} and {o.spelling} both set {o.name}: give it once")
    return o


def _check_backend(knobs: dict, given: dict, backend: str, named: str) -> None:
    """Refuse a backend's setting (as -o or its hidden flag) when the model runs on another
    backend: it would be ignored silently."""
    ctx = click.get_current_context()
    for o in knobs.values():
        by_flag = ctx.get_parameter_source(o.name) is click.core.ParameterSource.COMMANDLINE
        if o.backend != backend and (o.name in given or by_flag):
            how = f"-o {o.name.replace('_', '-')}" if o.name in given else o.spelling
            raise click.UsageError(f"{how} is a setting of the {o.backend} backend; {named} runs on the {backend} "
                                   "backend, which would ignore it")


def _knob_value(o: Option, name: str, value: str):
    """``value`` as the option's flag would take it (type, range, the option's own check)."""
    ctx = click.get_current_context()
    kind = click.BOOL if o.type is bool else click.types.convert_type(o.click_type())
    try:
        converted = kind.convert(value, None, ctx)
        check = _callback(o).get("callback")
        return check(ctx, None, converted) if check else converted
    except click.BadParameter as exc:
        raise click.UsageError(f"-o {name} {value!r}: {exc.message}") from None


def _alias_key(o: Option, i: int) -> str:
    return f"{o.name}__alias{i}"


def _click_kwargs(o: Option) -> dict:
    if o.type is bool:
        return {"is_flag": True, "default": bool(o.default), "help": o.help}
    kw = {"type": o.click_type(), "default": o.default, "help": o.help or None,
          "show_default": o.show_default and o.default is not None, "required": o.required, "multiple": o.multiple}
    if o.metavar:
        kw["metavar"] = o.metavar
    return kw | _callback(o)


def _refuse_both(o: Option, alias: str) -> None:
    """An old spelling that takes a value, given beside the option's own flag: one would be lost."""
    if "=" in alias:
        return  # ``--old=VALUE`` flags say so themselves (``_alias_value``)
    ctx = click.get_current_context()
    if ctx.get_parameter_source(o.name) is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError(f"{alias} and {o.spelling} both set {o.name}: give it once")


def _alias_value(o: Option, alias: str, value):
    """What an old spelling sets: its value, or the VALUE of a ``--old=VALUE`` flag (refused
    beside the option's own flag, which would say something else)."""
    if "=" not in alias:
        return value
    ctx = click.get_current_context()
    if ctx.get_parameter_source(o.name) is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError(f"{alias.split('=')[0]} is {o.spelling} {alias.split('=')[1]}: give one of them")
    return alias.split("=", 1)[1]


def _alias_kwargs(o: Option, alias: str = "") -> dict:
    if o.type is bool or "=" in alias:
        return {"is_flag": True}
    return {"type": o.click_type(), "default": None, "multiple": o.multiple} | _callback(o)


def _callback(o: Option) -> dict:
    """A float must be finite ('nan' and 'inf' pass float() and every range check); then the
    option's own ``convert``, its ValueError a click error."""
    if o.type is not float and o.convert is None:
        return {}

    def check(ctx, param, value):
        if o.type is float and value is not None and not math.isfinite(value):
            raise click.BadParameter(f"{value} is not a finite number")
        try:
            return o.convert(value) if o.convert and value is not None else value
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return {"callback": check}
