"""Duplicate items: what the last `curate duplicates` search compared and the pairs it found."""
from __future__ import annotations

import pandas as pd

from curate.analyses.sections._findings import Flag
from curate.items.duplicates import store
from curate.core.exports import write_records

ORDER = 90
SCORES = False  # a search reads the items' text only
ABOUT = {"duplicates": "the last `curate duplicates` search (present: false when none ran): its settings, the collections "
                       "compared (items each), pairs per scope (within the workspace, another split, another "
                       "benchmark) and field (both: question and options copied; question: the question alone), "
                       "workspace items in a pair, the closest pairs; pairs_file lists every pair; long_items: "
                       "items over settings.max_chars characters, whose work was capped (docs/stages/duplicates.md)"}
FILES = (r"duplicate_pairs\.csv",)
SHOWN = 20


def compute(ctx) -> dict:
    info = ctx.ws.meta("duplicates")
    if info is None or "duplicate_pairs" not in ctx.ws.tables():
        return {"duplicates": {"present": False}}
    pairs = store.records(ctx.ws)
    write_records(pairs, ctx.out / "duplicate_pairs.csv", columns=store.COLUMNS)
    frame = pd.DataFrame(pairs, columns=store.COLUMNS)
    frame["scope"] = [store.scope_of(r) for r in pairs]
    counts = frame.groupby(["scope", "field"]).size().reset_index(name="pairs") if len(frame) else frame
    mine = set(frame.loc[frame.collection_a == "workspace", "item_a"]) | set(frame.loc[frame.collection_b == "workspace", "item_b"])
    top = frame.head(SHOWN)[["item_a", "collection_a", "item_b", "collection_b", "similarity", "field", "exact"]]
    return {"duplicates": {
        "present": True, "settings": {k: info[k] for k in ("threshold", "max_edit", "part_threshold", "question_words",
                                                            "max_chars", "max_shingles") if k in info},
        "long_items": info.get("long_items", 0),
        "compared": [{"name": c["name"], "items": c["items"]} for c in info["compared"]],
        "splits_not_found": info.get("splits_not_found", []), "created_at": info.get("created_at"),
        "n_pairs": len(frame), "n_exact": int(frame["exact"].sum()) if len(frame) else 0,
        "per_scope_field": counts.to_dict("records"), "workspace_items_in_pairs": len(mine),
        "n_items": len(ctx.items), "closest": top.to_dict("records"), "pairs_file": "duplicate_pairs.csv"}}


def render(m: dict, number: int, out) -> list:
    d = m.get("duplicates")
    if not d or not d.get("present"):
        return []
    s = d["settings"]
    compared = ", ".join(f"{c['name']} ({c['items']} items)" for c in d["compared"])
    text = (f"The last `curate duplicates` search compared {compared}. A pair is at least {s.get('threshold')} similar "
            f"(edit similarity of the normalised text: case, spacing and punctuation folded, options as a set) and at "
            f"most {s.get('max_edit')} characters apart. {d['workspace_items_in_pairs']} of the {d['n_items']} items "
            f"are in a pair; {d['n_pairs']} pairs in all, {d['n_exact']} of them exact. Every pair is in "
            f"`{d['pairs_file']}`.")
    if d["splits_not_found"]:
        text += f" Splits not in the source: {', '.join(d['splits_not_found'])}."
    if d.get("long_items"):
        text += (f" {d['long_items']} items are over {s.get('max_chars')} characters: their candidates were "
                 f"proposed from at most {s.get('max_shingles')} sampled 5-grams each, and the edit distance that "
                 f"decides a pair still read their whole text.")
    blocks = [("h2", f"{number}. Duplicate items"), ("p", text)]
    if d["per_scope_field"]:
        blocks.append(("table", pd.DataFrame(d["per_scope_field"])))
    if d["closest"]:
        blocks += [("p", f"The closest {len(d['closest'])} pairs:"), ("table", pd.DataFrame(d["closest"]))]
    return blocks


def findings(m: dict) -> list:
    """How many items are in a duplicate pair."""
    d = m.get("duplicates")
    if not d or not d.get("present") or not d["workspace_items_in_pairs"]:
        return []
    return [Flag("duplicates", d["workspace_items_in_pairs"], d["n_items"], f"in {d['n_pairs']} pairs")]
