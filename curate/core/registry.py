"""The one way extensions are found: the modules of one package, one file each.

Every kind of extension (a filter condition kind, a report section, a score import format, a
built-in benchmark, a scoring backend) is a module in the package of its kind, named for the
extension; adding one is adding its file. A ``Registry`` finds the package's modules (those
whose name starts with ``_`` are helpers), imports each once, checks it has the attributes its
kind requires, and hands them out by name. The file's name is the extension's name (``_`` written
``-`` where the kind's names use dashes: ``lm_eval_samples.py`` is the format ``lm-eval-samples``).
"""
from __future__ import annotations

import importlib
import pkgutil
from functools import cached_property
from types import ModuleType

from curate.core.errors import CurateError


class Registry:
    """The extensions of one kind: the modules of ``package`` having every attribute of
    ``required``. ``what`` names the kind in errors ("condition kind"); ``dashes``: names
    write the file name's ``_`` as ``-``; ``reserved``: names no extension may take."""

    def __init__(self, package: str, *, what: str, required: tuple[str, ...], dashes: bool = False,
                 reserved: tuple[str, ...] = ()):
        self.package, self.what, self.required = package, what, required
        self.dashes, self.reserved = dashes, reserved

    @cached_property
    def modules(self) -> dict[str, ModuleType]:
        """Every extension by name, in name order, each imported and checked."""
        found = {}
        for info in sorted(pkgutil.iter_modules(importlib.import_module(self.package).__path__),
                           key=lambda i: i.name):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{self.package}.{info.name}")
            lacking = [name for name in self.required if not hasattr(module, name)]
            if lacking:
                raise TypeError(f"{module.__file__}: a {self.what} needs {' and '.join(lacking)}")
            name = info.name.replace("_", "-") if self.dashes else info.name
            if name in self.reserved:
                raise TypeError(f"{module.__file__}: {name!r} is reserved, not a {self.what}'s name")
            found[name] = module
        return found

    def names(self) -> list[str]:
        return list(self.modules)

    def get(self, name: str) -> ModuleType:
        """The extension ``name``; a CurateError naming the known ones for anything else."""
        if name not in self.modules:
            raise CurateError(f"unknown {self.what} {name!r}; known: {', '.join(self.modules)}")
        return self.modules[name]

    def refresh(self) -> None:
        """Forget what was found (after the package's ``__path__`` changed: tests add one)."""
        self.__dict__.pop("modules", None)
