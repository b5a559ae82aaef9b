"""Benchmark adapters: each turns one source row into one canonical item (see curate.items).

An adapter is an object with ``name``, ``to_item(row, row_index, split) -> item`` and
``native_key(item) -> hashable`` (the benchmark's own identity, used to refuse duplicates).
Problems with a row are raised as ``FieldError`` naming the field; ingest adds file and row.
"""
from __future__ import annotations


class FieldError(ValueError):
    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


def require(row: dict, field: str, kind: type | tuple[type, ...]):
    """``row[field]``, or a FieldError saying it is missing or of the wrong type."""
    if field not in row or row[field] is None:
        raise FieldError(field, "missing")
    value = row[field]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in _as_tuple(kind):
        want = " or ".join(k.__name__ for k in _as_tuple(kind))
        raise FieldError(field, f"expected {want}, got {type(value).__name__} {value!r:.60}")
    return value


def is_index_text(text: str) -> bool:
    """ASCII digits only: str.isdigit() also accepts '²' or '٣', which int() then refuses or reads."""
    return text.isascii() and text.isdigit()


def _as_tuple(kind):
    return kind if isinstance(kind, tuple) else (kind,)


def get_adapter(kind: str, **options):
    """The adapter called ``kind`` configured with ``options`` (column mapping for 'generic')."""
    from curate.adapters import generic, hellaswag

    if kind == "hellaswag":
        if options:
            raise ValueError(f"the hellaswag adapter takes no options, got {sorted(options)}")
        return hellaswag.HellaSwag()
    if kind == "generic":
        return generic.Generic(**options)
    raise ValueError(f"unknown benchmark adapter {kind!r}; known: hellaswag, generic")
