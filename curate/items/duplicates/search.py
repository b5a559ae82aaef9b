"""`curate duplicates`: read what to compare, find the pairs, keep them in the workspace."""
from __future__ import annotations

from pathlib import Path

from tqdm.auto import tqdm

from curate.items.duplicates import collections, detect, store


def search(root: str | Path, *, splits: list[str] | None = None, all_splits: bool = True,
           against: tuple[str, ...] = (), threshold: float = detect.THRESHOLD) -> dict:
    """Search the workspace's items for duplicates among themselves, against the benchmark's
    other splits (``splits``, or every standard split name found when ``all_splits``), and
    against each of ``against``; store the pairs and return a summary."""
    with store.open_duplicates(root) as ws:
        found = [collections.own(ws)]
        missing: list[str] = []
        if splits or all_splits:
            more, missing = collections.other_splits(ws, splits)
            found += more
        found += [collections.other_benchmark(spec) for spec in against]
        entries = [e for c in found for e in c.entries]
        long: list[detect.Entry] = []
        with tqdm(total=len(entries), desc="duplicates", unit="item", disable=len(entries) < 5000) as bar:
            pairs = detect.find_pairs(entries, threshold=threshold, cross_only={collections.WORKSPACE}, progress=bar,
                                      long=long)
        clusters = detect.clusters([p for p in pairs if p.field == "both"])
        info = {"threshold": threshold, "max_edit": detect.MAX_EDIT, "part_threshold": detect.PART_THRESHOLD,
                "question_words": detect.QUESTION_WORDS, "max_chars": detect.MAX_CHARS,
                "max_shingles": detect.MAX_SHINGLES, "long_items": len(long),
                "compared": [{"name": c.name, "items": len(c.entries), "source": c.provenance} for c in found],
                "splits_not_found": missing}
        store.save(ws, pairs, clusters, info)
        records = store.records(ws)
    counts: dict[tuple[str, str], int] = {}
    for r in records:
        key = (store.scope_of(r), r["field"])
        counts[key] = counts.get(key, 0) + 1
    return {"compared": info["compared"], "splits_not_found": missing, "pairs": len(records), "counts": counts,
            "clusters": len({c for c in clusters.values()}), "long_items": len(long)}
