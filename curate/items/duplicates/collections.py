"""The items a duplicate search compares: the workspace's own, its benchmark's other splits,
and other benchmarks (another workspace, or a built-in benchmark's file, folder or Hub id)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from curate.items.adapters import from_record, get_adapter, hub_default, known
from curate.items.duplicates.detect import Entry, entry
from curate.core.errors import CurateError, InputError
from curate.items.ingest import build_items
from curate.items.sources import open_source, public_provenance
from curate.items.store import DB_NAME, Workspace

#: The split names tried when a search covers "all" of a benchmark's splits.
SPLITS = ("train", "dev", "validation", "test")
WORKSPACE = "workspace"


@dataclass
class Collection:
    name: str            # how pairs name where an item comes from
    entries: list[Entry]
    provenance: dict     # what was read (public: no local paths)


def _read(adapter, data: str, split: str, config: str | None = None) -> tuple[list[dict], dict]:
    source = open_source(data, split=split, config=config)
    where = source.provenance.get("path") or source.provenance.get("repo_id")
    items, _ = build_items(source.rows, adapter, split=split, where=where)
    return items, public_provenance(source.provenance)


def own(ws: Workspace) -> Collection:
    return Collection(WORKSPACE, [entry(it, WORKSPACE) for it in ws.items()],
                      {"workspace": ws.root.name, "split": ws.meta("split")})


def other_splits(ws: Workspace, wanted: list[str] | None) -> tuple[list[Collection], list[str]]:
    """The workspace's benchmark in its other splits (``wanted``, or every name of ``SPLITS``
    that its source holds), and the names looked for but not found."""
    source, split = ws.meta("source") or {}, ws.meta("split")
    data = source.get("path") or source.get("repo_id")
    if not data:
        raise CurateError(f"{ws.root}: the workspace does not record where its items were read from")
    if Path(data).is_file():  # one file holds one split: there is no other to read
        if wanted:
            raise CurateError(f"--splits: the workspace was read from one file ({Path(data).name}), which holds "
                              f"one split; name another benchmark file with --against instead")
        return [], [s for s in SPLITS if s != split]
    adapter = from_record(ws.meta("adapter"), ws.meta("benchmark"))
    out, missing = [], []
    for name in (wanted or [s for s in SPLITS if s != split]):
        if name == split:
            continue
        try:
            items, provenance = _read(adapter, data, name, source.get("config"))
        except InputError as exc:
            if wanted or exc.field != "split":
                raise
            missing.append(name)
            continue
        out.append(Collection(f"split:{name}", [entry(it, f"split:{name}") for it in items], provenance))
    return out, missing


def other_benchmark(spec: str) -> Collection:
    """``spec`` is a workspace folder, or ``BENCHMARK[:DATA][@SPLIT]`` for a built-in benchmark
    (DATA: a local file or folder, or a Hub id; default its Hub copy and usual split)."""
    path = Path(spec).expanduser()
    if (path / DB_NAME).is_file():
        with Workspace.open(path) as other:
            name = f"workspace:{path.name}"
            return Collection(name, [entry(it, name) for it in other.items()],
                              {"workspace": path.name, "benchmark": other.meta("benchmark"), "split": other.meta("split")})
    head, _, split = spec.partition("@")
    benchmark, _, data = head.partition(":")
    if benchmark not in known() or benchmark == "generic":
        raise CurateError(f"--against {spec!r}: neither a workspace folder nor BENCHMARK[:DATA][@SPLIT] with a "
                          f"built-in benchmark ({', '.join(b for b in known() if b != 'generic')}); for another "
                          f"benchmark, `curate init` it into a workspace and name that")
    adapter = get_adapter(benchmark)
    data, split, config = hub_default(adapter, data or None, split or None, None)
    items, provenance = _read(adapter, data, split, config)
    name = f"{benchmark}/{split}"
    return Collection(name, [entry(it, name) for it in items], provenance)
