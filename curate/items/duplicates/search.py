"""`curate duplicates`: read what to compare, find the pairs, keep them in the workspace."""
from __future__ import annotations

from curate.items.duplicates import collections, detect, store
from curate.items.duplicates.options import DuplicatesOptions
from curate.items.stage import Stage


class Duplicates(Stage):
    """The workspace's items searched for duplicates among themselves, against the benchmark's
    other splits (``splits``: named, or ``all`` standard split names found, or ``none``), and
    against each of ``against``; the pairs stored, a summary returned."""
    name = "duplicates"
    Options = DuplicatesOptions

    @classmethod
    def provides(cls, options) -> set[tuple]:
        """The search's pairs, which the filter's ``duplicate`` kind reads."""
        return {("duplicates",)}

    def migrate(self, ws) -> None:
        ws.migrate(store.MIGRATIONS)  # the pairs' tables

    def execute(self) -> dict:
        o = self.options
        ws = self.ws
        found = [collections.own(ws)]
        missing: list[str] = []
        if o.splits != "none":
            more, missing = collections.other_splits(ws, None if o.splits == "all" else list(o.splits))
            found += more
        found += [collections.other_benchmark(spec) for spec in o.against]
        entries = [e for c in found for e in c.entries]
        long: list[detect.Entry] = []
        with self.progress(len(entries), "item", "duplicates", enabled=len(entries) >= 5000) as bar:
            pairs = detect.find_pairs(entries, threshold=o.threshold, cross_only={collections.WORKSPACE},
                                      progress=bar, long=long)
        clusters = detect.clusters([p for p in pairs if p.field == "both"])
        info = {"threshold": o.threshold, "max_edit": detect.MAX_EDIT, "part_threshold": detect.PART_THRESHOLD,
                "question_words": detect.QUESTION_WORDS, "max_chars": detect.MAX_CHARS,
                "max_shingles": detect.MAX_SHINGLES, "long_items": len(long),
                "compared": [{"name": c.name, "items": len(c.entries), "source": c.provenance} for c in found],
                "splits_not_found": missing}
        store.save(ws, pairs, clusters, info)
        records = store.records(ws)
        return summary(records, info, clusters, len(long))


def summary(records: list[dict], info: dict, clusters: dict, long_items: int) -> dict:
    """What the command prints: what was compared, the pairs by scope and field, the clusters."""
    counts: dict[tuple[str, str], int] = {}
    for r in records:
        key = (store.scope_of(r), r["field"])
        counts[key] = counts.get(key, 0) + 1
    return {"compared": info["compared"], "splits_not_found": info["splits_not_found"], "pairs": len(records),
            "counts": counts, "clusters": len({c for c in clusters.values()}), "long_items": long_items}
