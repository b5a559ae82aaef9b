"""Where a workspace's few-shot examples come from (``curate score --fewshot-pool``).

A built-in benchmark's shots come from its lm-eval few-shot split (``curate.fewshot``; MMLU's
``dev``, the others' ``train``). That split is read from, in order:

- ``--fewshot-pool FILE``: a file of the benchmark's rows, read by the workspace's adapter;
- ``--fewshot-pool evaluated``: the workspace's own items, each item left out of its own shots
  (lm-eval with ``fewshot_split`` set to the evaluated split);
- nothing given: the file of that split beside the workspace's local source
  (``.../mmlu/test.jsonl.gz`` -> ``.../mmlu/dev.jsonl.gz``), or a one-line error saying how
  to name one.

The generic adapter names its few-shot split (or file) and seed itself (``fewshot_split``,
``fewshot_seed``).
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path

from curate.adapters import from_record
from curate.errors import CurateError
from curate.fewshot import Settings, doc_key, sample_shots
from curate.ingest import build_items
from curate.items import canonical_json
from curate.sources import open_source

EVALUATED = "evaluated"


def settings_of(adapter) -> Settings:
    settings = getattr(adapter, "fewshot", None)
    return settings if settings is not None else Settings()


def resolve_pool(ws, pool: str | None) -> tuple[list[dict], Settings, str]:
    """(few-shot items, settings, where they were read) for the workspace ``ws``."""
    adapter = from_record(ws.meta("adapter"), ws.meta("benchmark"))  # as ingested: the pool's ids are ingest's
    settings = settings_of(adapter)
    if pool == EVALUATED:
        return ws.items(), settings.from_evaluated_split(), EVALUATED
    if not pool and Path(settings.split).suffix:  # the generic adapter's fewshot_split names a file
        pool = settings.split
    path = Path(pool) if pool else _beside_source(ws, settings.split)
    if not path.exists():
        raise CurateError(f"few-shot pool {path}: no such file")
    split = settings.split if not Path(settings.split).suffix else "train"
    source = open_source(str(path), split=split)
    items, _ = build_items(source.rows, adapter, split=split, where=str(path))
    return items, settings, str(path)


def _beside_source(ws, split: str) -> Path:
    """The ``split`` file next to the workspace's local source file, if there is one."""
    source = ws.meta("source") or {}
    here = Path(source["path"]) if source.get("kind") == "local" and source.get("path") else None
    if here is not None and here.is_file():
        suffix = "".join(here.suffixes)
        candidate = here.with_name(split + suffix)
        if candidate.is_file():
            return candidate
    where = f"beside {here}" if here else "(the workspace was read from the Hub)"
    raise CurateError(f"k-shot scoring needs the benchmark's few-shot split {split!r}, and none was found {where}; "
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
    docs, settings, where = resolve_pool(ws, pool)
    plan = {k: sample_shots(items, docs, k, settings) if k else [()] * len(items) for k in counts}
    info = {"fewshot_pool": where, "fewshot_pool_items": len(docs), "fewshot_split": settings.split,
            "fewshot_sampler": settings.sampler, "fewshot_seed": settings.seed,
            "fewshot_leaves_item_out": settings.passes_eval_doc, "fewshot_key": pool_key(docs, settings, where)}
    return plan, settings, info
