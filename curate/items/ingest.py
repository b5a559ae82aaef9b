"""Ingest: source rows -> validated canonical items -> a new workspace, all or nothing."""
from __future__ import annotations

from itertools import islice
from pathlib import Path

from tqdm.auto import tqdm

import curate
from curate.items.adapters import default_formulation, hub_default
from curate.items.adapters.fields import FieldError
from curate.core.clock import now
from curate.core.errors import CurateError, InputError
from curate.items.canonical import validation_errors
from curate.items.ingest_options import IngestOptions
from curate.items.stage import Stage
from curate.items.sources import open_source, parse_copy_of
from curate.items.store import check_new_workspace, create_workspace


def build_items(rows, adapter, *, split: str, where: str, limit: int | None = None,
                progress: bool = True) -> tuple[list[dict], list[dict]]:
    """Canonical items and their raw rows, in row order. The first bad row raises an
    InputError naming ``where`` (file or Hub id), the row and the field; duplicates of the
    benchmark's own ids are refused with both rows named. ``progress``: a bar for many rows
    (not for the audit's plan, which builds them only to check what will match them)."""
    n = len(rows) if limit is None else min(limit, len(rows))
    items, raws, seen = [], [], {}
    for i, raw in enumerate(tqdm(islice(rows, n), total=n, desc="ingest", unit="item", disable=n < 2000 or not progress)):
        try:
            item = adapter.to_item(raw, i, split)
            problems = validation_errors(item)
        except FieldError as exc:
            raise InputError(str(exc), path=where, row=i, field=exc.field) from None
        except RecursionError:  # a cell nesting lists thousands deep (a list literal, or JSON)
            raise InputError("nests values deeper than can be read", path=where, row=i) from None
        if problems:
            field, _, message = problems[0].partition(": ")
            raise InputError(f"item does not fit the canonical schema: {message}", path=where, row=i, field=field)
        key = adapter.native_key(item)
        if key is not None:
            if key in seen:
                raise InputError(f"duplicate id {key!r}: also row {seen[key]}", path=where, row=i,
                                 field="/".join(item["native_ids"]))
            seen[key] = i
        items.append(item)
        raws.append(raw)
    if not items:
        raise InputError("no rows to ingest", path=where)
    return items, raws


class Ingest(Stage):
    """A new workspace from ``data`` (local path or Hub id; ``config`` names the Hub dataset's
    configuration; ``delimiter``/``encoding`` override what is detected in a CSV file) read with
    ``adapter``. ``copy_of`` (``OWNER/NAME[@REVISION]``) records which Hub dataset a local file
    copies, so releases can name it. Unlike the other stages it opens no workspace: it makes one,
    all or nothing (``curate.items.store.create_workspace``)."""
    name = "ingest"
    Options = IngestOptions

    def __init__(self, root, options, adapter):
        super().__init__(root, options)
        self.adapter = adapter

    def run(self) -> Path:
        o, adapter = self.options, self.adapter
        try:  # a built-in's own Hub id, configuration and split where none is named
            data, split, config = hub_default(adapter, o.data, o.split, o.config)
        except ValueError as exc:
            raise CurateError(f"{exc} (--data, or the audit config's benchmark.path / hub)") from None
        check_new_workspace(self.root)  # before the reading, which can take a while
        copy = parse_copy_of(o.copy_of) if o.copy_of else None
        source = open_source(data, split=split, revision=o.revision, config=config, delimiter=o.delimiter,
                             encoding=o.encoding)
        if copy:
            if source.provenance["kind"] != "local":
                raise InputError("--copy-of describes a local copy; a Hub source names itself", path=data)
            source.provenance["copy_of"] = copy
        where = source.provenance.get("path") or source.provenance.get("repo_id")
        items, raws = build_items(source.rows, adapter, split=split, where=where, limit=o.limit)
        meta = {
            "benchmark": adapter.name,
            "adapter": adapter_record(adapter),
            "split": split,
            "formulation": default_formulation(adapter),
            "source": source.provenance,
            "limit": o.limit,
            "created_at": now(),
            "toolkit_version": curate.__version__,
        }
        return create_workspace(self.root, meta=meta, items=items, raw_rows=raws)


#: Adapter kinds workspaces recorded before every built-in became one file (``curate.items.builtins``).
LEGACY_KINDS = {"hellaswag": "builtin"}


def same_adapter(record: dict, adapter) -> bool:
    """Whether a workspace's adapter ``record`` describes ``adapter``; options the record lacks
    (added to the adapter after the workspace was made) count as their defaults."""
    from dataclasses import fields, is_dataclass

    current = adapter_record(adapter)
    record = {**record, "kind": LEGACY_KINDS.get(record.get("kind"), record.get("kind"))}
    defaults = {f.name: f.default for f in fields(adapter)} if is_dataclass(adapter) else {}
    stored = {**{k: v for k, v in current["options"].items() if k not in record.get("options", {})
                 and v == defaults.get(k)}, **record.get("options", {})}
    return record.get("kind") == current["kind"] and stored == current["options"]


def adapter_record(adapter) -> dict:
    """What the workspace keeps about the adapter: its kind and every option it was built with."""
    from dataclasses import asdict, is_dataclass

    options = asdict(adapter) if is_dataclass(adapter) else {}
    return {"kind": type(adapter).__name__.lower(),
            "options": {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()}}
