"""Errors a user can act on. The CLI prints them without a traceback and exits non-zero."""
from __future__ import annotations


class CurateError(Exception):
    """Base class for every expected failure (bad input, refused operation)."""


class InputError(CurateError):
    """Bad input data, located as precisely as we can: file, row, field."""

    def __init__(self, message: str, *, path: str | None = None, row: int | None = None,
                 field: str | None = None):
        self.path, self.row, self.field, self.detail = path, row, field, message
        where = [str(path)] if path else []
        if row is not None:
            where.append(f"row {row}")
        if field:
            where.append(f"field '{field}'")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)
