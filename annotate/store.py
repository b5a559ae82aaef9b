"""Annotations in the workspace: one record per (annotator, round, item), schema-checked.

A record's ``status`` is 'valid' (``result`` parsed and schema-valid), 'invalid' (the reply
could not be parsed or failed the schema after the allowed retries) or 'refused' (the annotator
declined); ``raw`` always keeps the reply. See ``schemas/annotation.schema.json``.

Every text written here passes through ``curate.core.secrets.redact``: an endpoint that echoes the
API key in a reply or a model name cannot put it on disk.
"""
from __future__ import annotations

import json

import pandas as pd

import schemas
from curate.core.clock import now
from curate.core.errors import CurateError
from curate.core.secrets import redact, redact_data
from curate.asking.ledger import CostLedger
from curate.items.store import Workspace

def _annotations_table(name: str, key: str = "") -> str:
    """The annotations table as a migration creates it (``key``: the request key's constraint; the
    first table had it UNIQUE across items, ``annotations-005`` rebuilt it without)."""
    return f"""
        CREATE TABLE {name} (
            annotator      TEXT NOT NULL,
            round          INTEGER NOT NULL,
            item_id        TEXT NOT NULL REFERENCES items(item_id),
            status         TEXT NOT NULL CHECK (status IN ('valid', 'invalid', 'refused')),
            result_json    TEXT,
            raw            TEXT,
            prompt_version TEXT,
            model_snapshot TEXT,
            request_key    TEXT NOT NULL{key},
            content_hash   TEXT NOT NULL,
            cost_json      TEXT,               -- tokens and USD of the request(s) behind this record
            run_id         TEXT REFERENCES annotation_runs(run_id),
            created_at     TEXT NOT NULL,
            PRIMARY KEY (annotator, round, item_id)
        );
"""


LEDGER = CostLedger("annotation_ledger", batch=True, runs="annotation_runs")

MIGRATIONS = [
    ("annotations-001-tables", """
        CREATE TABLE annotation_runs (
            run_id     TEXT PRIMARY KEY,
            annotator  TEXT NOT NULL,
            round      INTEGER NOT NULL,
            info_json  TEXT NOT NULL,     -- backend, parameters, prompt files; never secrets
            created_at TEXT NOT NULL
        );
    """ + _annotations_table("annotations", key=" UNIQUE")),
    ("annotations-002-ledger", LEDGER.create_sql()),
    ("annotations-003-batches", """
        CREATE TABLE annotation_batches (
            batch_id   TEXT PRIMARY KEY,
            run_id     TEXT NOT NULL REFERENCES annotation_runs(run_id),
            annotator  TEXT NOT NULL,
            round      INTEGER NOT NULL,
            status     TEXT NOT NULL CHECK (status IN ('submitted', 'processed')),
            created_at TEXT NOT NULL
        );
        CREATE TABLE annotation_batch_requests (
            batch_id    TEXT NOT NULL REFERENCES annotation_batches(batch_id),
            custom_id   TEXT NOT NULL,
            item_id     TEXT NOT NULL,
            request_key TEXT NOT NULL,
            PRIMARY KEY (batch_id, custom_id)
        );
    """),
    ("annotations-004-history", """
        -- Every version of a human reviewer's record, the current one included, in write order:
        -- `annotations` holds the latest, this table what it replaced (see write_human_annotation).
        CREATE TABLE annotation_history (
            annotator    TEXT NOT NULL,
            round        INTEGER NOT NULL,
            item_id      TEXT NOT NULL REFERENCES items(item_id),
            version      INTEGER NOT NULL,     -- 1 for the first verdict, 2.. for each edit
            status       TEXT NOT NULL,
            result_json  TEXT,
            raw          TEXT,
            content_hash TEXT NOT NULL,
            created_at   TEXT NOT NULL,
            PRIMARY KEY (annotator, round, item_id, version)
        );
    """),
    # Items with the same content share a request key (it hashes the content, not the item id),
    # so the key is unique per (annotator, round, item), not across items: with the old UNIQUE,
    # writing one item's record deleted its twin's. SQLite cannot drop a constraint, so the table
    # is rebuilt with every row; the keys stay as they were, so nothing is asked again.
    ("annotations-005-key-per-item", _annotations_table("annotations_new") + """
        INSERT INTO annotations_new (annotator, round, item_id, status, result_json, raw, prompt_version,
                                     model_snapshot, request_key, content_hash, cost_json, run_id, created_at)
            SELECT annotator, round, item_id, status, result_json, raw, prompt_version, model_snapshot,
                   request_key, content_hash, cost_json, run_id, created_at FROM annotations;
        DROP TABLE annotations;
        ALTER TABLE annotations_new RENAME TO annotations;
        CREATE INDEX annotations_key ON annotations(request_key);
    """),
    # A batch result is marked when its record and ledger rows are written (same transaction),
    # so a run killed before the batch was closed skips it on resume instead of paying twice.
    ("annotations-006-batch-saved", """
        ALTER TABLE annotation_batch_requests ADD COLUMN saved_at TEXT;
    """),
    # A request is written to the ledger before it is sent ('in_flight', usd = the most it can
    # cost) and settled when it ends: 'billed' (the reply, as the API reported it), deleted (an
    # error reply: not billed), or 'abandoned' (the client gave up on it -- a timeout or a dropped
    # connection -- so it may have been billed, up to usd). See curate/anthropic_api/spend.py.
    ("annotations-007-ledger-state", """
        ALTER TABLE annotation_ledger ADD COLUMN state TEXT NOT NULL DEFAULT 'billed'
            CHECK (state IN ('billed', 'in_flight', 'abandoned'));
    """),
]

#: Round-1 labels in the order reports list them (see the schema's $defs/label).
LABELS = tuple(schemas.load("annotation")["$defs"]["label"]["enum"])


def open_annotations(root) -> Workspace:
    """Open a workspace with the annotation tables in place."""
    return Workspace.open(root, MIGRATIONS)


def add_run(ws: Workspace, *, run_id: str, annotator: str, round: int, info: dict) -> None:
    ws.conn.execute("INSERT OR IGNORE INTO annotation_runs VALUES (?, ?, ?, ?, ?)",
                    (run_id, annotator, round, json.dumps(redact_data(info), sort_keys=True), now()))


def write_annotation(ws: Workspace, record: dict, *, cost: dict | None = None, run_id: str | None = None) -> None:
    """Insert or replace one record after checking it against the schema (call in a transaction
    or rely on autocommit). Replacing keeps one record per (annotator, round, item)."""
    problems = schemas.errors("annotation", record)
    if problems:
        raise CurateError(f"annotation for {record.get('item_id')} does not fit the schema: {problems[0]}")
    ws.conn.execute(
        "INSERT OR REPLACE INTO annotations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (record["annotator"], record["round"], record["item_id"], record["status"],
         None if record["result"] is None else json.dumps(record["result"]), redact(record["raw"]),
         record["prompt_version"], redact(record["model_snapshot"]), record["request_key"],
         record["content_hash"], None if cost is None else json.dumps(cost), run_id, now()))


def read_annotations(ws: Workspace, *, round: int | None = None, annotator: str | None = None,
                     item_id: str | None = None) -> pd.DataFrame:
    """Records joined with row_index and source; ``result`` parsed back into a dict (or None)."""
    where, params = [], []
    for column, value in (("a.round", round), ("a.annotator", annotator), ("a.item_id", item_id)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    frame = pd.read_sql_query(
        "SELECT a.*, i.row_index, i.source FROM annotations a JOIN items i USING (item_id)"
        + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY a.annotator, a.round, i.row_index",
        ws.conn, params=params)
    # pandas 3 reads SQL NULLs in text columns as NaN, not None: test for a string.
    frame["result"] = [json.loads(r) if isinstance(r, str) else None for r in frame.pop("result_json")]
    frame["cost"] = [json.loads(c) if isinstance(c, str) else None for c in frame.pop("cost_json")]
    return frame


# --- human verdicts: editable, with every version kept ------------------------------------------

class VersionConflict(CurateError):
    """A verdict was edited from a version that is no longer the latest (another tab or tool wrote
    in between); nothing was written."""

    def __init__(self, message: str, current: int):
        super().__init__(message)
        self.current = current


def record_version(ws: Workspace, annotator: str, round: int, item_id: str) -> int:
    """The latest version number of one (annotator, round, item) record; 0 when there is none."""
    row = ws.conn.execute("SELECT max(version) FROM annotation_history WHERE annotator = ? AND round = ? "
                          "AND item_id = ?", (annotator, round, item_id)).fetchone()
    return row[0] or 0


def write_human_annotation(ws: Workspace, record: dict, *, expected_version: int | None = None) -> int:
    """Write a reviewer's record as the current one and append it to its history; return its
    version. With ``expected_version`` the write happens only if that is still the latest
    version (else VersionConflict), so an edit made from a stale page never silently overwrites
    a newer verdict. Runs in its own transaction, or in the caller's when one is open (an
    import writing all its records or none)."""
    if ws.conn.in_transaction:
        return _write_version(ws, record, expected_version)
    with ws.transaction():
        return _write_version(ws, record, expected_version)


def _write_version(ws: Workspace, record: dict, expected_version: int | None) -> int:
    current = record_version(ws, record["annotator"], record["round"], record["item_id"])
    if expected_version is not None and expected_version != current:
        raise VersionConflict(f"{record['item_id']} round {record['round']}: edited from version "
                              f"{expected_version}, but version {current} is the latest", current)
    write_annotation(ws, record)
    ws.conn.execute("INSERT INTO annotation_history VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (record["annotator"], record["round"], record["item_id"], current + 1, record["status"],
                     None if record["result"] is None else json.dumps(record["result"]), record["raw"],
                     record["content_hash"], now()))
    return current + 1


def read_history(ws: Workspace, *, annotator: str | None = None, item_id: str | None = None) -> list[dict]:
    """Every stored version (oldest first), ``result`` parsed back."""
    where = [(c, v) for c, v in (("annotator", annotator), ("item_id", item_id)) if v is not None]
    rows = ws.conn.execute("SELECT * FROM annotation_history" + (" WHERE " + " AND ".join(f"{c} = ?" for c, _ in where)
                                                                 if where else "")
                           + " ORDER BY annotator, round, item_id, version", [v for _, v in where]).fetchall()
    return [{**{k: r[k] for k in r.keys() if k != "result_json"},
             "result": json.loads(r["result_json"]) if r["result_json"] else None} for r in rows]


# --- cost ledger -------------------------------------------------------------------------------

#: The one cost ledger (``curate.asking.ledger``), in this stage's table (with the Message Batches flag).


def read_ledger(ws: Workspace) -> pd.DataFrame:
    return pd.read_sql_query("SELECT * FROM annotation_ledger ORDER BY rowid", ws.conn)


# --- message batches in flight ------------------------------------------------------------------

def add_batch(ws: Workspace, *, batch_id: str, run_id: str, annotator: str, round: int,
              requests: list[tuple[str, str, str]]) -> None:
    """Remember a submitted batch and its (custom_id, item_id, request_key) rows, so a killed run
    polls it again instead of paying for the same requests twice."""
    with ws.transaction() as c:
        c.execute("INSERT INTO annotation_batches VALUES (?, ?, ?, ?, 'submitted', ?)",
                  (batch_id, run_id, annotator, round, now()))
        c.executemany("INSERT INTO annotation_batch_requests (batch_id, custom_id, item_id, request_key) "
                      "VALUES (?, ?, ?, ?)", ((batch_id, *r) for r in requests))


def mark_saved(ws: Workspace, batch_id: str, custom_id: str) -> None:
    """Note that one batch result is stored (call in the transaction that stores it)."""
    ws.conn.execute("UPDATE annotation_batch_requests SET saved_at = ? WHERE batch_id = ? AND custom_id = ?",
                    (now(), batch_id, custom_id))


def saved_results(ws: Workspace, batch_id: str) -> set[str]:
    """custom_ids of the batch whose results are already stored (by a run killed before it
    closed the batch): they must not be stored, or billed, again."""
    return {r[0] for r in ws.conn.execute(
        "SELECT custom_id FROM annotation_batch_requests WHERE batch_id = ? AND saved_at IS NOT NULL", (batch_id,))}


def open_batches(ws: Workspace, *, annotator: str, round: int) -> dict[str, dict[str, tuple[str, str]]]:
    """batch_id -> {custom_id: (item_id, request_key)} for batches not yet processed."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    for r in ws.conn.execute(
            "SELECT b.batch_id, r.custom_id, r.item_id, r.request_key FROM annotation_batches b "
            "JOIN annotation_batch_requests r USING (batch_id) "
            "WHERE b.annotator = ? AND b.round = ? AND b.status = 'submitted' ORDER BY b.created_at",
            (annotator, round)):
        out.setdefault(r[0], {})[r[1]] = (r[2], r[3])
    return out


def close_batch(ws: Workspace, batch_id: str) -> None:
    ws.conn.execute("UPDATE annotation_batches SET status = 'processed' WHERE batch_id = ?", (batch_id,))


def holdings(ws: Workspace):
    """What the annotations table holds (``curate.items.store.Holdings``): ("annotation",
    annotator, round) for each round an annotator (or a reviewer) has records in, and the state:
    every record with its answer and write time, so a verdict edited in place changes it."""
    from curate.items.store import Holdings

    if "annotations" not in ws.table_names():
        return Holdings()
    facts = {("annotation", a, r) for a, r in ws.conn.execute("SELECT DISTINCT annotator, round FROM annotations")}
    rows = ws.conn.execute("SELECT annotator, round, item_id, status, request_key, result_json, created_at "
                           "FROM annotations ORDER BY annotator, round, item_id").fetchall()
    return Holdings(facts, [tuple(r) for r in rows])
