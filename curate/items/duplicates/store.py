"""Duplicate pairs in the workspace: the last search's result, replaced whole by the next one.

One row per pair (``detect.Pair`` plus its cluster number); the search's settings, what it
compared and the counts are kept in meta ``duplicates``, so a report can say what was searched.
"""
from __future__ import annotations

from curate.core.clock import now
from curate.items.duplicates.detect import Pair
from curate.items.store import Workspace

MIGRATIONS = [
    ("duplicates-001-pairs", """
        CREATE TABLE duplicate_pairs (
            item_a              TEXT NOT NULL,
            collection_a        TEXT NOT NULL,
            item_b              TEXT NOT NULL,
            collection_b        TEXT NOT NULL,
            similarity          REAL NOT NULL,
            question_similarity REAL NOT NULL,
            options_similarity  REAL NOT NULL,
            field               TEXT NOT NULL,    -- both | question
            exact               INTEGER NOT NULL,
            cluster             INTEGER,          -- connected component of the 'both' pairs; NULL for question-only
            PRIMARY KEY (collection_a, item_a, collection_b, item_b)
        );
    """),
]

COLUMNS = ["item_a", "collection_a", "item_b", "collection_b", "similarity", "question_similarity",
           "options_similarity", "field", "exact", "cluster"]


def open_duplicates(root) -> Workspace:
    """Open a workspace with the pairs' tables in place."""
    return Workspace.open(root, MIGRATIONS)


def save(ws: Workspace, pairs: list[Pair], clusters: dict, info: dict) -> None:
    """Replace the stored search with this one, in one transaction."""
    rows = [(p.a, p.collection_a, p.b, p.collection_b, p.similarity, p.question_similarity, p.options_similarity,
             p.field, int(p.exact), clusters.get((p.collection_a, p.a)) if p.field == "both" else None)
            for p in pairs]
    with ws.transaction() as conn:
        conn.execute("DELETE FROM duplicate_pairs")
        conn.executemany(f"INSERT INTO duplicate_pairs VALUES ({', '.join('?' * len(COLUMNS))})", rows)
        ws.set_meta("duplicates", {**info, "pairs": len(rows), "created_at": now()})


def records(ws: Workspace) -> list[dict]:
    cur = ws.conn.execute(f"SELECT {', '.join(COLUMNS)} FROM duplicate_pairs "
                          "ORDER BY similarity DESC, collection_a, item_a, collection_b, item_b")
    return [dict(zip(COLUMNS, r)) | {"exact": bool(r[8])} for r in cur]


def export_records(root) -> list[dict]:
    """``records`` of the workspace folder (what `curate export WS duplicates` writes)."""
    with open_duplicates(root) as ws:
        return records(ws)


def scope_of(record: dict) -> str:
    collections = {record["collection_a"], record["collection_b"]}
    if collections == {"workspace"}:
        return "within"
    other = (collections - {"workspace"}).pop() if "workspace" in collections else record["collection_a"]
    return "split" if other.startswith("split:") else "cross"


def holdings(ws: Workspace):
    """What the last duplicate search left (``curate.items.store.Holdings``): ("duplicates",) once
    a search ran, and its state: when it ran and how many pairs it found (none before a search)."""
    from curate.items.store import Holdings

    done = ws.meta("duplicates") if "duplicate_pairs" in ws.table_names() else None
    if done is None:
        return Holdings(state=None)
    return Holdings({("duplicates",)}, [(done.get("created_at"), done.get("pairs"))])
