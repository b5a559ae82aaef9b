"""Adding a module to a package that finds its modules by name (condition kinds, report sections),
as if its file were written there, for one test."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

from curate.core.registry import Registry


@contextmanager
def module_in(package, name: str, text: str, folder: Path):
    """``text`` as module ``NAME`` of ``package`` within the block: written into ``folder``,
    which joins the package's ``__path__``; the package's registry forgets its modules found so
    far on the way in and out (the package's own ``refresh()`` where it forgets more: the
    condition kinds' rules schema)."""
    registry = next(value for value in vars(package).values() if isinstance(value, Registry))
    refresh = getattr(package, "refresh", registry.refresh)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(text)
    saved = package.__path__
    package.__path__ = [*saved, str(folder)]
    refresh()
    try:
        yield
    finally:
        package.__path__ = saved
        sys.modules.pop(f"{package.__name__}.{name}", None)
        refresh()
