"""Benchmark adapters: each turns one source row into one canonical item (see curate.items.canonical).

An adapter is an object with ``name``, ``to_item(row, row_index, split) -> item`` and
``native_key(item) -> hashable`` (the benchmark's own identity, used to refuse duplicates), and
optionally ``formulation`` (the default formulation its items are scored in; "cloze" if absent).
Problems with a row are raised as ``FieldError`` naming the field (``curate.items.adapters.fields``, with
the checks every adapter shares); ingest adds file and row.
"""
from __future__ import annotations


def known() -> list[str]:
    """Every adapter name ``get_adapter`` accepts: the built-in benchmarks, then generic."""
    from curate.items.builtins import BENCHMARKS
    return [*BENCHMARKS.names(), "generic"]


def get_adapter(name: str, /, **options):
    """The adapter called ``name`` configured with ``options`` (column mapping for 'generic')."""
    from curate.items.adapters import generic
    from curate.items.builtins import BENCHMARKS, Builtin

    if name == "generic":
        return generic.Generic(**options)
    if options:
        raise ValueError(f"the {name} adapter takes no options, got {sorted(options)}")
    if name in BENCHMARKS.modules:
        return Builtin(name)
    raise ValueError(f"unknown benchmark adapter {name!r}; known: {', '.join(known())}")


def from_record(record: dict | None, benchmark: str | None = None):
    """The adapter a workspace was ingested with, rebuilt from the record ingest stored in its
    meta (``curate.items.ingest.adapter_record``: its kind and every option), so that items read again
    (a few-shot pool, another split) get the ids and fields ingest gave. A workspace without a
    record was made by the built-in adapter named ``benchmark``."""
    record = record or {"kind": "builtin", "options": {"name": benchmark}}
    options = dict(record.get("options") or {})
    if record.get("kind") == "generic":
        return get_adapter("generic", **options)
    return get_adapter(options.get("name") or benchmark or record.get("kind", "?"))


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
