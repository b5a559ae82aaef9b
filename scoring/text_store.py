"""Stored text scores: one row per (model label, item) with the membership signals of the item's
own text (``scoring.text``), computed by a run recorded in ``score_runs`` (origin ``text``).

``text_scores(ws)`` is what readers (report sections, filter conditions) take; ``records`` is
what `curate export WS text-scores` writes.
"""
from __future__ import annotations

import pandas as pd

from curate.items.store import Workspace
from scoring.store import MIGRATIONS as SCORE_MIGRATIONS

MIGRATIONS = [
    ("text-scores-001-table", """
        CREATE TABLE text_scores (
            model        TEXT NOT NULL,
            item_id      TEXT NOT NULL REFERENCES items(item_id),
            loss         REAL,              -- mean negative log-likelihood per predicted token
            zlib         REAL,              -- loss / zlib-compressed bytes of the text
            min_k_10     REAL,
            min_k_20     REAL,
            min_kpp_10   REAL,
            min_kpp_20   REAL,
            n_tokens     INTEGER NOT NULL,  -- predicted tokens
            zlib_bytes   INTEGER NOT NULL,
            flags        TEXT,              -- comma-separated: truncated, empty
            content_hash TEXT NOT NULL,     -- the item's content hash when scored
            run_id       TEXT NOT NULL REFERENCES score_runs(run_id),
            PRIMARY KEY (model, item_id)
        );
    """),
]

METRICS = ("loss", "zlib", "min_k_10", "min_k_20", "min_kpp_10", "min_kpp_20")
TABLE_COLUMNS = ("model", "item_id", *METRICS, "n_tokens", "zlib_bytes", "flags", "content_hash", "run_id")
#: The exported table's columns (`curate export WS text-scores`).
COLUMNS = ("item_id", "row_index", "source", *TABLE_COLUMNS[:1], *TABLE_COLUMNS[2:])


def open_text_scores(root) -> Workspace:
    """Open a workspace with the score tables (for the runs) and the text-score table in place."""
    return Workspace.open(root, SCORE_MIGRATIONS, MIGRATIONS)


def write_text_scores(ws: Workspace, rows: list[dict]) -> None:
    """Insert or replace rows (dicts with ``TABLE_COLUMNS``); call inside a transaction."""
    ws.conn.executemany(
        f"INSERT OR REPLACE INTO text_scores ({', '.join(TABLE_COLUMNS)}) "
        f"VALUES ({', '.join('?' * len(TABLE_COLUMNS))})",
        ([r.get(c) for c in TABLE_COLUMNS] for r in rows))


def stored_keys(ws: Workspace, label: str) -> dict[str, tuple]:
    """item_id -> (content hash, model hash, tokenizer hash, dtype, engine, text version) of
    ``label``'s stored rows (the text version: ``scoring.text.TEXT_VERSION``; None before it)."""
    rows = ws.conn.execute(
        "SELECT t.item_id, t.content_hash, r.model_hash, r.tokenizer_hash, r.dtype, r.engine, "
        "json_extract(r.info_json, '$.text_version') "
        "FROM text_scores t JOIN score_runs r USING (run_id) WHERE t.model = ?", (label,))
    return {r[0]: tuple(r[1:]) for r in rows}


def read_text_scores(ws: Workspace) -> pd.DataFrame:
    """Every stored row with the item's row_index and source, by model and row_index."""
    frame = pd.read_sql_query(
        "SELECT i.row_index, i.source, " + ", ".join(f"t.{c}" for c in TABLE_COLUMNS) +
        " FROM text_scores t JOIN items i USING (item_id) ORDER BY t.model, i.row_index", ws.conn)
    return frame


def text_scores(ws: Workspace) -> pd.DataFrame:
    """(item_id, model, loss, zlib, min_k_10, min_k_20, min_kpp_10, min_kpp_20): one row per
    stored (model, item); empty (with these columns) when none is stored. ``ws`` needs no
    migration first: a workspace never text-scored gives an empty frame."""
    cols = ["item_id", "model", *METRICS]
    if not ws.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'text_scores'").fetchone():
        return pd.DataFrame(columns=cols)
    return read_text_scores(ws)[cols]


def records(workspace) -> list[dict]:
    """The table as export records (``COLUMNS``)."""
    ws = open_text_scores(workspace)
    try:
        frame = read_text_scores(ws)[list(COLUMNS)]
    finally:
        ws.close()
    return frame.astype(object).where(frame.notna(), None).to_dict("records")
