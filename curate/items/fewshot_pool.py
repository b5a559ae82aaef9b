"""Where a workspace's few-shot examples come from (``curate score --fewshot-pool``).

A built-in benchmark's shots come from its lm-eval few-shot split (``curate.items.fewshot``; MMLU's
``dev``, the others' ``train``). That split is read from, in order:

- ``--fewshot-pool FILE``: a file of the benchmark's rows, read by the workspace's adapter;
- ``--fewshot-pool evaluated``: the workspace's own items, each item left out of its own shots
  (lm-eval with ``fewshot_split`` set to the evaluated split);
- nothing given: the split read from the source the evaluated split came from, as ingest read
  it: the file of that split beside a source file (``.../mmlu/test.jsonl.gz`` ->
  ``.../mmlu/dev.jsonl.gz``), that split's files in a source folder (``.../mmlu``, the Hub's
  layout), or that split of a Hub dataset (same id, configuration and revision); else a
  one-line error saying how to name one.

The generic adapter names its few-shot split (or file) and seed itself (``fewshot_split``,
``fewshot_seed``).
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path

from curate.items.adapters import from_record
from curate.core.errors import CurateError, InputError
from curate.items.fewshot import Settings, doc_key, sample_shots
from curate.items.ingest import build_items
from curate.items.canonical import canonical_json
from curate.items.sources import Source, SplitNotFound, open_source, root_cause

EVALUATED = "evaluated"


def settings_of(adapter) -> Settings:
    settings = getattr(adapter, "fewshot", None)
    return settings if settings is not None else Settings()


def resolve_pool(ws, pool: str | None) -> tuple[list[dict], Settings, str]:
    """(few-shot items, settings, where they were read) for the workspace ``ws``."""
    items, settings, where, _ = read_pool(ws, pool)
    return items, settings, where


def read_pool(ws, pool: str | None) -> tuple[list[dict], Settings, str, dict | None]:
    """``resolve_pool``'s answer and the provenance of what was read (None for ``evaluated``)."""
    adapter = from_record(ws.meta("adapter"), ws.meta("benchmark"))  # as ingested: the pool's ids are ingest's
    settings = settings_of(adapter)
    if pool == EVALUATED:
        return ws.items(), settings.from_evaluated_split(), EVALUATED, None
    if not pool and Path(settings.split).suffix:  # the generic adapter's fewshot_split names a file
        pool = settings.split
    split = settings.split if not Path(settings.split).suffix else "train"
    if pool:
        path = Path(pool)
        if not path.exists():
            raise CurateError(f"few-shot pool {path}: no such file")
        source, where = open_source(str(path), split=split), str(path)
    else:
        source, where = _from_source(ws.meta("source") or {}, split)
    items, _ = build_items(source.rows, adapter, split=split, where=where)
    return items, settings, where, source.provenance


def _from_source(source: dict, split: str) -> tuple[Source, str]:
    """(the rows of ``split``, where they are) from the workspace's ``source``, opened as ingest
    opened it: a file's sibling file, the same folder, or the same Hub dataset, configuration
    and revision (the commit it resolved to, when known)."""
    if source.get("kind") == "hub":
        repo_id, revision = source["repo_id"], source.get("resolved_revision") or source.get("revision")
        where = f"{repo_id}@{revision or 'main'}"
        config = f" (configuration {source['config']})" if source.get("config") else ""
        try:
            return open_source(repo_id, split=split, revision=revision, config=source.get("config")), where
        except InputError as exc:  # no such split, or neither the Hub nor the local cache could give it
            raise _missing(split, f"in {where}{config}: {root_cause(exc).rstrip('.')}") from None
    here = Path(source["path"]) if source.get("kind") == "local" and source.get("path") else None
    if here is None or not here.exists():
        raise _missing(split, f"(the workspace's source {here or '(unknown)'} is not there)")
    if source.get("format") == "saved-dataset":  # a split of a DatasetDict saved with save_to_disk
        if not (here.parent / "dataset_dict.json").is_file():
            raise _missing(split, f"in {here}, a saved dataset of one split")
        here = here.parent
    elif here.is_file():  # a file: the split's file beside it, named the same way
        sibling = here.with_name(split + "".join(here.suffixes))
        if not sibling.is_file():
            raise _missing(split, f"beside {here}")
        here = sibling
    read_as = {k: source[k] for k in ("encoding", "delimiter") if isinstance(source.get(k), str)}
    try:
        return open_source(str(here), split=split, **read_as), str(here)
    except SplitNotFound:  # only its absence: a split that is there but unreadable says why
        raise _missing(split, f"in {here}") from None


def _missing(split: str, where: str) -> CurateError:
    return CurateError(f"k-shot scoring needs the benchmark's few-shot split {split!r}, and none was found {where}; "
                       f"give --fewshot-pool FILE (its {split} rows) or --fewshot-pool {EVALUATED} (the evaluated "
                       f"items, each left out of its own shots)")


def pool_key(pool: list[dict], settings: Settings, where: str) -> str:
    """What a k-shot context depends on besides its item: the pool's documents and the settings.
    A stored k-shot score is reused only under the same key."""
    fields = {k: v for k, v in asdict(settings).items() if not callable(v)}
    body = canonical_json([fields, where == EVALUATED, [doc_key(d) for d in pool]])
    return "sha256:" + hashlib.sha256(body.encode()).hexdigest()


def fewshot_plan(ws, items: list[dict], counts: list[int], pool: str | None) -> tuple[dict, Settings | None, dict]:
    """({k: each item's shots} for every k in ``counts``, the settings, what the run records), for
    ``curate score`` and ``curate generate``. Shots are drawn over every item in order (lm-eval's
    generator runs item after item), so a process of a data-parallel run gets the same shots as
    a single process would."""
    if not any(counts):
        return {0: [()] * len(items)}, None, {}
    docs, settings, where, provenance = read_pool(ws, pool)
    plan = {k: sample_shots(items, docs, k, settings) if k else [()] * len(items) for k in counts}
    info = {"fewshot_pool": where, "fewshot_pool_items": len(docs), "fewshot_split": settings.split,
            "fewshot_sampler": settings.sampler, "fewshot_seed": settings.seed,
            "fewshot_leaves_item_out": settings.passes_eval_doc, "fewshot_key": pool_key(docs, settings, where)}
    if provenance:  # what exactly was read: the files and their sha256, or the Hub id, configuration and revision
        info["fewshot_pool_source"] = provenance
    return plan, settings, info
