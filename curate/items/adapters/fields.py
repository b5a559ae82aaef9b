"""What every adapter checks in a source row, and ``FieldError``, how it says what is wrong.

Kept apart from the registry (``curate.items.adapters``) so that the adapters import these and the
registry imports the adapters, with no loop between them.
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


def blank(text: str) -> bool:
    """Whether ``text`` shows nothing: whitespace and invisible format characters only (zero-width
    space, BOM, word joiner: Unicode category Cf), which str.strip() keeps."""
    import unicodedata
    return not any(not c.isspace() and unicodedata.category(c) != "Cf" for c in text)


def option(text: str, field: str) -> str:
    """``text`` as an option, or a FieldError naming ``field`` when it shows nothing (it would be
    scored as the delimiter alone)."""
    if blank(text):
        raise FieldError(field, "option is empty" if not text else "option is blank (whitespace or invisible characters)")
    return text


def is_index_text(text: str) -> bool:
    """ASCII digits only: str.isdigit() also accepts '²' or '٣', which int() then refuses or reads."""
    return text.isascii() and text.isdigit()


def _as_tuple(kind):
    return kind if isinstance(kind, tuple) else (kind,)
