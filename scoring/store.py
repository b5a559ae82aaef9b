"""Scores in the workspace: one row per (model, mode, item, option), plus one row per run.

Stored per option: ``logprob_sum`` (sum of the option's token log-probabilities given the
context), its ``n_tokens``/``n_chars``/``n_bytes``, ``is_greedy`` and the reference study's
``seq_mean`` (mean log-probability over every predicted token of context + " " + option).
Per-token, per-char and per-byte means are derived by ``scoring.normalize``, never stored.
``study_sum``/``study_byte_mean`` hold the study's other released variants when imported.
Any column may be NULL when its source did not provide it (imports give only what they have).
"""
from __future__ import annotations

import json

import pandas as pd

from curate.secrets import redact_data
from curate.store import Workspace, now

MIGRATIONS = [
    ("scores-001-tables", """
        CREATE TABLE score_runs (
            run_id         TEXT PRIMARY KEY,
            model          TEXT NOT NULL,
            origin         TEXT NOT NULL,      -- 'scored' or 'imported:<format>'
            model_hash     TEXT,
            tokenizer_hash TEXT,
            dtype          TEXT,
            device         TEXT,
            info_json      TEXT NOT NULL,      -- versions, revision, files read, parameters
            created_at     TEXT NOT NULL
        );
        CREATE TABLE scores (
            model           TEXT NOT NULL,
            mode            TEXT NOT NULL,
            item_id         TEXT NOT NULL REFERENCES items(item_id),
            option_index    INTEGER NOT NULL,
            logprob_sum     REAL,
            n_tokens        INTEGER,
            n_chars         INTEGER,
            n_bytes         INTEGER,
            is_greedy       INTEGER,
            seq_mean        REAL,
            study_sum       REAL,
            study_byte_mean REAL,
            flags           TEXT,               -- comma-separated: truncated, boundary-merge, empty-context
            content_hash    TEXT NOT NULL,      -- the item's content hash when scored
            run_id          TEXT NOT NULL REFERENCES score_runs(run_id),
            PRIMARY KEY (model, mode, item_id, option_index)
        );
        CREATE INDEX scores_run ON scores(run_id);
    """),
]

VALUE_COLUMNS = ("logprob_sum", "n_tokens", "n_chars", "n_bytes", "is_greedy", "seq_mean",
                 "study_sum", "study_byte_mean", "flags")


def open_scores(root) -> Workspace:
    """Open a workspace with the score tables in place."""
    ws = Workspace.open(root)
    ws.migrate(MIGRATIONS)
    return ws


def add_run(ws: Workspace, *, run_id: str, model: str, origin: str, info: dict, model_hash=None,
            tokenizer_hash=None, dtype=None, device=None) -> None:
    """Record a run (idempotent: an existing run id keeps its first record)."""
    ws.conn.execute(
        "INSERT OR IGNORE INTO score_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, model, origin, model_hash, tokenizer_hash, dtype, device,
         json.dumps(redact_data(info), sort_keys=True), now()))


def write_scores(ws: Workspace, rows: list[dict]) -> None:
    """Insert or replace score rows (dicts with the table's columns); call inside a transaction."""
    cols = ("model", "mode", "item_id", "option_index", *VALUE_COLUMNS, "content_hash", "run_id")
    ws.conn.executemany(
        f"INSERT OR REPLACE INTO scores ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
        ([r.get(c) for c in cols] for r in rows))


def read_scores(ws: Workspace, *, models=None, modes=None) -> pd.DataFrame:
    """All scores joined with row_index and source, one row per (model, mode, item, option),
    sorted by model, mode, row_index, option_index."""
    where, params = [], []
    for col, values in (("s.model", models), ("s.mode", modes)):
        if values:
            where.append(f"{col} IN ({', '.join('?' * len(values))})")
            params.extend(values)
    sql = ("SELECT s.model, s.mode, s.item_id, i.row_index, i.source, s.option_index, "
           + ", ".join(f"s.{c}" for c in VALUE_COLUMNS) + ", s.content_hash, s.run_id "
           "FROM scores s JOIN items i USING (item_id)"
           + (" WHERE " + " AND ".join(where) if where else "")
           + " ORDER BY s.model, s.mode, i.row_index, s.option_index")
    # A plain-tuple cursor: the workspace's sqlite3.Row factory costs seconds on a million rows.
    cursor = ws.conn.cursor()
    cursor.row_factory = None
    cursor.execute(sql, params)
    columns = [d[0] for d in cursor.description]
    return pd.DataFrame.from_records(cursor.fetchall(), columns=columns, coerce_float=True)


def read_runs(ws: Workspace) -> pd.DataFrame:
    return pd.read_sql_query("SELECT * FROM score_runs ORDER BY created_at, run_id", ws.conn)
