"""Benchmark adapters: each turns one source row into one canonical item (see curate.items).

An adapter is an object with ``name``, ``to_item(row, row_index, split) -> item`` and
``native_key(item) -> hashable`` (the benchmark's own identity, used to refuse duplicates), and
optionally ``formulation`` (the default formulation its items are scored in; "cloze" if absent).
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


def known() -> list[str]:
    """Every adapter name ``get_adapter`` accepts: hellaswag, the built-ins, generic."""
    from curate.adapters.builtin import BENCHMARKS
    return ["hellaswag", *BENCHMARKS, "generic"]


def get_adapter(name: str, /, **options):
    """The adapter called ``name`` configured with ``options`` (column mapping for 'generic')."""
    from curate.adapters import builtin, generic, hellaswag

    if name == "generic":
        return generic.Generic(**options)
    if options:
        raise ValueError(f"the {name} adapter takes no options, got {sorted(options)}")
    if name == "hellaswag":
        return hellaswag.HellaSwag()
    if name in builtin.BENCHMARKS:
        return builtin.Builtin(name)
    raise ValueError(f"unknown benchmark adapter {name!r}; known: {', '.join(known())}")


def hub_default(adapter, data: str | None, split: str | None, config: str | None) -> tuple[str, str, str | None]:
    """(data, split, config) with a built-in benchmark's defaults filled in: its Hub id and
    configuration when no data is named (the configuration only applies to its own Hub id),
    and its usual split."""
    spec = getattr(adapter, "spec", None)
    if spec is None:
        if data is None:
            raise ValueError(f"the {adapter.name} adapter needs data (a local path or a Hub id)")
        return data, split or "validation", config
    if data is None or (data == spec.hub and config is None):
        data, config = spec.hub, spec.config
    return data, split or spec.split, config


def default_formulation(adapter) -> str:
    """The formulation lm-eval scores the adapter's benchmark in ("cloze" unless it says)."""
    return getattr(adapter, "formulation", "cloze")
