"""Generations in the workspace: one record per (model, template, settings, mode, seed, item).

A record keeps the reply exactly as generated (``raw``; ``replies_json`` holds every reply when
the model was asked again), the order the options were shown in, the parse status and, when the
reply could be read, the displayed position chosen and the original option it maps back to.
``request_key`` is a hash of everything that decides the reply (see ``generate.run``); a record
whose key matches is never asked again. Runs record their settings and versions; Claude replies
also enter ``generation_ledger`` (the annotation ledger's columns, priced by ``curate.anthropic_api.prices``).

Every text written here passes through ``curate.core.secrets.redact`` (as in ``annotate.store``): an
endpoint that echoes the API key, or a base URL with credentials, leaves ``[redacted]`` on disk.

``read_generations`` is the public read: analyses, filters, exports and the review app use it.

Each record's answer (its original option, or none when unparsed) is also written to the
workspace's answers (``scoring.answers``, source ``generate``, run ``generate_run``) in the same
transaction, so item validity reads generated answers beside imported ones.
"""
from __future__ import annotations

import json

import pandas as pd

from curate.asking.ledger import CostLedger
from curate.core.clock import now
from curate.core.secrets import redact, redact_data
from curate.items.store import Workspace
from scoring import answers

LEDGER = CostLedger("generation_ledger", runs="generation_runs")

MIGRATIONS = [
    ("generations-001-tables", """
        CREATE TABLE generation_runs (
            run_id     TEXT PRIMARY KEY,
            model      TEXT NOT NULL,
            backend    TEXT NOT NULL,       -- 'local' or 'anthropic'
            template   TEXT NOT NULL,
            settings   TEXT NOT NULL,
            info_json  TEXT NOT NULL,       -- settings, template hash, model identity, versions; never secrets
            created_at TEXT NOT NULL
        );
        CREATE TABLE generations (
            model          TEXT NOT NULL,
            template       TEXT NOT NULL,
            settings       TEXT NOT NULL,   -- 't=TEMPERATURE,p=TOP_P,n=MAX_NEW_TOKENS'
            mode           TEXT NOT NULL,
            seed           INTEGER NOT NULL,
            item_id        TEXT NOT NULL REFERENCES items(item_id),
            order_json     TEXT NOT NULL,   -- displayed position (0-based) -> original option index
            raw            TEXT NOT NULL,   -- the (last) reply exactly as generated
            status         TEXT NOT NULL CHECK (status IN ('strict', 'lenient', 'unparsed')),
            method         TEXT,            -- number | number-in-text | option-text
            detail         TEXT,            -- match score, or why the reply could not be read
            shown          INTEGER,         -- chosen displayed position, 1-based (NULL when unparsed)
            pred           INTEGER,         -- chosen original option index (NULL when unparsed)
            new_tokens     INTEGER,         -- tokens generated (output tokens for Claude)
            finish         TEXT,            -- eos | length (local); the API's stop_reason (Claude)
            attempts       INTEGER NOT NULL,
            replies_json   TEXT,            -- every reply when asked more than once
            request_key    TEXT NOT NULL UNIQUE,
            content_hash   TEXT NOT NULL,
            run_id         TEXT NOT NULL REFERENCES generation_runs(run_id),
            created_at     TEXT NOT NULL,
            PRIMARY KEY (model, template, settings, mode, seed, item_id)
        );
        CREATE INDEX generations_run ON generations(run_id);
    """ + LEDGER.create_sql()),
    # Items with the same content share a request key (it hashes the content, not the item id):
    # the key is unique per record's (model, template, settings, mode, seed, item), not across
    # items; with the old UNIQUE, writing one item's record deleted its twin's. SQLite cannot drop
    # a constraint, so the table is rebuilt with every row; stored keys stay valid.
    ("generations-002-key-per-item", """
        CREATE TABLE generations_new (
            model          TEXT NOT NULL,
            template       TEXT NOT NULL,
            settings       TEXT NOT NULL,
            mode           TEXT NOT NULL,
            seed           INTEGER NOT NULL,
            item_id        TEXT NOT NULL REFERENCES items(item_id),
            order_json     TEXT NOT NULL,
            raw            TEXT NOT NULL,
            status         TEXT NOT NULL CHECK (status IN ('strict', 'lenient', 'unparsed')),
            method         TEXT,
            detail         TEXT,
            shown          INTEGER,
            pred           INTEGER,
            new_tokens     INTEGER,
            finish         TEXT,
            attempts       INTEGER NOT NULL,
            replies_json   TEXT,
            request_key    TEXT NOT NULL,
            content_hash   TEXT NOT NULL,
            run_id         TEXT NOT NULL REFERENCES generation_runs(run_id),
            created_at     TEXT NOT NULL,
            PRIMARY KEY (model, template, settings, mode, seed, item_id)
        );
        INSERT INTO generations_new SELECT model, template, settings, mode, seed, item_id, order_json, raw, status,
            method, detail, shown, pred, new_tokens, finish, attempts, replies_json, request_key, content_hash,
            run_id, created_at FROM generations;
        DROP TABLE generations;
        ALTER TABLE generations_new RENAME TO generations;
        CREATE INDEX generations_run ON generations(run_id);
        CREATE INDEX generations_key ON generations(request_key);
    """),
    # Requests in flight and given up on, as in the annotation ledger (annotations-007).
    ("generations-003-ledger-state", """
        ALTER TABLE generation_ledger ADD COLUMN state TEXT NOT NULL DEFAULT 'billed'
            CHECK (state IN ('billed', 'in_flight', 'abandoned'));
    """),
]

RECORD_COLUMNS = ("model", "template", "settings", "mode", "seed", "item_id", "order_json", "raw", "status",
                  "method", "detail", "shown", "pred", "new_tokens", "finish", "attempts", "replies_json",
                  "request_key", "content_hash", "run_id")


def prepare(ws: Workspace) -> Workspace:
    """Put the generation tables in place in an open workspace, and the answers' (where the
    answers go too; older generations are copied there once)."""
    ws.migrate(MIGRATIONS)
    answers.prepare(ws)
    return ws


def open_generations(root) -> Workspace:
    ws = Workspace.open(root)
    try:
        return prepare(ws)
    except BaseException:
        ws.close()
        raise


def settings_label(temperature: float | None, top_p: float | None, max_new_tokens: int) -> str:
    """The one text that names decoding settings in records, reports and rules; None (Claude,
    whose API takes no sampling settings) reads 'default'."""
    def text(v):
        return "default" if v is None else f"{v:g}"
    return f"t={text(temperature)},p={text(top_p)},n={max_new_tokens}"


def add_run(ws: Workspace, *, run_id: str, model: str, backend: str, template: str, settings: str,
            info: dict) -> None:
    ws.conn.execute("INSERT OR IGNORE INTO generation_runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (run_id, model, backend, template, settings, json.dumps(redact_data(info), sort_keys=True), now()))


def write_generations(ws: Workspace, records: list[dict]) -> None:
    """Insert or replace records (dicts with RECORD_COLUMNS; ``order`` and ``replies`` as lists);
    call inside a transaction."""
    stamp = now()
    rows = []
    for r in records:
        replies = r.get("replies") or ()
        r = {**r, "raw": redact(r["raw"]), "order_json": json.dumps(r["order"]),
             "replies_json": json.dumps(redact_data(replies), ensure_ascii=False) if len(replies) > 1 else None}
        rows.append([r.get(c) for c in RECORD_COLUMNS] + [stamp])
    ws.conn.executemany(f"INSERT OR REPLACE INTO generations ({', '.join(RECORD_COLUMNS)}, created_at) "
                        f"VALUES ({', '.join('?' * (len(RECORD_COLUMNS) + 1))})", rows)
    write_answers(ws, records)


def write_answers(ws: Workspace, records: list[dict]) -> None:
    """The records' answers into ``scoring.answers`` (each generation run recorded there too)."""
    ws.conn.executemany("INSERT OR IGNORE INTO answer_runs (run_id, model, source, info_json, created_at) "
                        "SELECT run_id, model, 'generate', info_json, created_at FROM generation_runs WHERE run_id = ?",
                        ((rid,) for rid in sorted({r["run_id"] for r in records})))
    answers.write_rows(ws, [{"model": r["model"], "item_id": r["item_id"], "source": "generate", "choice": r["pred"],
                             "run": answers.generate_run(mode=r["mode"], seed=r["seed"], template=r["template"],
                                                         settings=r["settings"]),
                             "content_hash": r["content_hash"], "run_id": r["run_id"]} for r in records])


def delete_generations(ws: Workspace, model: str, template: str, settings: str) -> None:
    """Delete a label's records for a template and settings, and their answers (call inside a
    transaction)."""
    ws.conn.execute("DELETE FROM answers WHERE source = 'generate' AND model = ? AND run_id IN (SELECT run_id FROM "
                    "generation_runs WHERE model = ? AND template = ? AND settings = ?)",
                    (model, model, template, settings))
    answers.drop_empty_runs(ws, "generate")
    ws.conn.execute("DELETE FROM generations WHERE model = ? AND template = ? AND settings = ?",
                    (model, template, settings))


#: The one cost ledger (``curate.asking.ledger``), in this stage's table.


def done_keys(ws: Workspace, model: str, template: str, settings: str) -> set[tuple[str, str]]:
    """(item_id, request_key) of the stored records: items of the same content share a key, and
    one item's record must not count for its twin."""
    return {(r[0], r[1]) for r in ws.conn.execute(
        "SELECT item_id, request_key FROM generations WHERE model = ? AND template = ? AND settings = ?",
        (model, template, settings))}


#: Columns of ``read_generations``, in order.
COLUMNS = ("model", "template", "settings", "mode", "seed", "item_id", "row_index", "source", "n_options",
           "order", "gold", "gold_shown", "status", "method", "detail", "shown", "pred", "correct", "raw",
           "new_tokens", "finish", "attempts", "request_key", "content_hash", "run_id", "created_at")


def read_generations(ws: Workspace, *, models=None, modes=None, templates=None) -> pd.DataFrame:
    """Every generation record, one row per (model, template, settings, mode, seed, item), sorted
    by those keys in row order. Columns (``COLUMNS``):

    model, template, settings, mode, seed   what was asked and how (settings: ``settings_label``)
    item_id, row_index, source, n_options   the item
    order        displayed position (0-based) -> original option index
    gold         the gold option's original index; gold_shown: its displayed position, 1-based
    status       strict | lenient | unparsed; method: number | number-in-text | option-text
    detail       the option-text match score, or why an unparsed reply could not be read
    shown, pred  chosen displayed position (1-based) and original option index (<NA> if unparsed)
    correct      pred == gold (boolean, <NA> if unparsed: an unparsed reply is neither right nor wrong)
    raw          the reply as generated; new_tokens, finish, attempts: how it ended
    request_key, content_hash, run_id, created_at   provenance
    """
    where, params = [], []
    for col, values in (("g.model", models), ("g.mode", modes), ("g.template", templates)):
        if values:
            where.append(f"{col} IN ({', '.join('?' * len(values))})")
            params.extend(values)
    cursor = ws.conn.cursor()
    cursor.row_factory = None
    cursor.execute(
        "SELECT g.model, g.template, g.settings, g.mode, g.seed, g.item_id, i.row_index, i.source, "
        "json_array_length(g.order_json), g.order_json, json_extract(i.item_json, '$.gold'), g.status, g.method, "
        "g.detail, g.shown, g.pred, g.raw, g.new_tokens, g.finish, g.attempts, g.request_key, g.content_hash, "
        "g.run_id, g.created_at FROM generations g JOIN items i USING (item_id)"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY g.model, g.template, g.settings, g.mode, g.seed, i.row_index", params)
    rows = cursor.fetchall()
    names = ["model", "template", "settings", "mode", "seed", "item_id", "row_index", "source", "n_options",
             "order_json", "gold", "status", "method", "detail", "shown", "pred", "raw", "new_tokens", "finish",
             "attempts", "request_key", "content_hash", "run_id", "created_at"]
    frame = pd.DataFrame.from_records(rows, columns=names)
    frame["order"] = [json.loads(o) for o in frame.pop("order_json")]
    frame["gold_shown"] = [o.index(g) + 1 for o, g in zip(frame["order"], frame["gold"])]
    for col in ("shown", "pred"):
        frame[col] = frame[col].astype("Int64")
    frame["correct"] = (frame["pred"] == frame["gold"]).astype("boolean")
    return frame[list(COLUMNS)]


def read_runs(ws: Workspace) -> pd.DataFrame:
    return pd.read_sql_query("SELECT * FROM generation_runs ORDER BY created_at, run_id", ws.conn)


def holdings(ws: Workspace):
    """What the generations table holds (``curate.items.store.Holdings``): ("generations", model,
    mode), and ("answers", model), as read answers include the generated ones; the state: rows
    and the last write per run, model, template, settings, mode and seed."""
    from curate.items.store import Holdings

    if "generations" not in ws.table_names():
        return Holdings()
    facts = set()
    for model, mode in ws.conn.execute("SELECT DISTINCT model, mode FROM generations"):
        facts |= {("generations", model, mode), ("answers", model)}
    rows = ws.conn.execute("SELECT run_id, model, template, settings, mode, seed, count(*), max(created_at) "
                           "FROM generations GROUP BY run_id, model, template, settings, mode, seed "
                           "ORDER BY run_id, model, template, settings, mode, seed").fetchall()
    return Holdings(facts, [tuple(r) for r in rows])
