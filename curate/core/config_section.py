"""One section of a config file, as a stage's ``from_config`` reads it into its options object.

The audit config (``curate/audit/config.py``) hands each stage its section (``scoring``,
``annotators[0]``, ...) as a ``Section``: the values written there, the dotted key that names it
in errors, and where its paths lead. Input paths (files a stage reads: ``Option.path`` "file"
or "folder") are relative to the config file, so a config travels with its data; output paths
(folders a stage writes: "out" or "write") are relative to the folder curate runs in.

``Section.options`` builds a stage's options object (``curate.core.options.options_class``) and
names a refused value by its config key (``scoring.backend``), not by the command's flag.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from curate.core.errors import CurateError, InputError

#: ``Option.path`` kinds a stage reads (relative to the config file); the others it writes.
INPUTS = ("file", "folder")


@dataclass(frozen=True)
class Section:
    """``values`` as written under ``key`` of the config ``file``; ``cwd``: the folder outputs
    are relative to; ``config``: the whole file, for a stage that reads another's output."""
    values: Mapping[str, Any]
    key: str
    file: Path
    cwd: Path
    config: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def __getitem__(self, name: str):
        return self.values[name]

    def get(self, name: str, default=None):
        return self.values.get(name, default)

    def name(self, part: str | int) -> str:
        """The dotted key of ``part`` of this section: ``scoring.models[1]``, ``filter.out``."""
        return f"{self.key}[{part}]" if isinstance(part, int) else f"{self.key}.{part}" if self.key else part

    def at(self, part: str | int) -> "Section":
        """The section under ``part`` (a key, or an index of a list)."""
        return Section(self.values[part], self.name(part), self.file, self.cwd, self.config)

    def each(self) -> list["Section"]:
        """Each entry of this section, a list, as a section."""
        return [self.at(i) for i in range(len(self.values or ()))]

    def entries(self, name: str) -> list["Section"]:
        """Each entry of the list under ``name`` (none when it is absent), as a section."""
        return self.at(name).each() if self.values.get(name) else []

    def other(self, key: str) -> "Section | None":
        """Another top-level section of the same file (None when the file has none)."""
        value = self.config.get(key)
        return Section(value, key, self.file, self.cwd, self.config) if value is not None else None

    def input(self, value: str) -> Path:
        """A path the stage reads, as written: relative to the config file."""
        return (self.file.parent / value).resolve()

    def output(self, value: str) -> Path:
        """A path the stage writes, as written: relative to the folder curate runs in ("~/ws" is
        the home folder's ws, as in a shell)."""
        return (self.cwd / Path(value).expanduser()).resolve()

    def given(self, table) -> dict[str, Any]:
        """The options of ``table`` that are config keys (``Option.config``) and that this
        section sets, paths resolved (inputs beside the config file, outputs under ``cwd``)."""
        out = {}
        for o in table:
            if o.config is None or o.name not in self.values:
                continue
            value = self.values[o.name]
            if o.path and isinstance(value, str):
                value = self.input(value) if o.path in INPUTS else self.output(value)
            out[o.name] = value
        return out

    def options(self, cls, **values):
        """``cls(**values)`` (a stage's options object), each value this section wrote checked
        as the object checks it; a refused one is an InputError naming its config key."""
        from curate.core.options import checked

        for o in cls.TABLE:
            if o.name in values and o.name in self.values:
                try:
                    checked(o, values[o.name])
                except CurateError as exc:
                    message = str(exc).removeprefix(f"{o.spelling} ")
                    raise InputError(message, path=str(self.file), field=self.name(o.name)) from None
        try:
            return cls(**values)
        except CurateError as exc:
            raise InputError(str(exc), path=str(self.file), field=self.key) from None
