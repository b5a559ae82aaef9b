"""What changed between two releases: items added and removed, with the reasons from the manifests."""
from __future__ import annotations

from curate.release.manifest import row_of
from curate.items.sources import source_identity


def diff_manifests(a: dict, b: dict) -> dict:
    """Items kept in ``b`` but not ``a`` (added: with the stages that had removed them in ``a``)
    and kept in ``a`` but not ``b`` (removed: with the stages that removed them in ``b``)."""
    kept_a, kept_b = set(a["kept"]), set(b["kept"])

    def rows(ids, reasons):
        return [{"item_id": i, "reasons": list(reasons.get(i, ["(not in the other release's items)"]))}
                for i in sorted(ids, key=lambda i: (row_of(i), i))]

    return {
        "from": f"{a['name']} {a['version']}",
        "to": f"{b['name']} {b['version']}",
        # The same file applied with another --annotator or --tokenizer is other rules.
        "rules_changed": (a["rules"]["sha256"], a["rules"].get("defaults") or {})
                         != (b["rules"]["sha256"], b["rules"].get("defaults") or {}),
        "source_changed": source_identity(a["source"]["provenance"]) != source_identity(b["source"]["provenance"]),
        "added": rows(kept_b - kept_a, a["removed"]),
        "removed": rows(kept_a - kept_b, b["removed"]),
        "unchanged": len(kept_a & kept_b),
    }

