"""Answers in the workspace: which option a model chose for an item, without probabilities.

Models that only answer (API models, generation runs, Inspect AI logs, a table of choices) give
item-validity evidence too; this is where their answers are kept, beside the stored scores, so
``curate.validity`` reads every model's answers the same way whatever produced them.

One row per (model, item, run, source):

- ``choice``: the ORIGINAL option index (0-based), whatever order the options were shown in;
  NULL when the model's reply could not be read (kept: an unreadable reply is evidence of its
  own and must not vanish from counts).
- ``run``: a text naming what makes one of the model's answers to an item differ from another
  (seed, shuffle, sample, epoch), so several answers of one model to one item are kept apart and
  read as its agreement with itself.
- ``source``: what produced it (``SOURCES``): ``generate`` (``curate generate``'s parsed
  replies), ``inspect`` (Inspect AI logs), ``lm-eval`` (lm-eval generate_until samples),
  ``table`` (a plain table of choices).

Each store is recorded in ``answer_runs`` (what was read, never secrets). ``curate generate``
writes its answers here as it stores each reply (``generate.store.write_generations``);
generations stored before this table existed are copied here once, the first time the
workspace's answers are opened (``answers-002-generations``), so a reader never misses them.
"""
from __future__ import annotations

import json
import math
import numbers
import uuid

import numpy as np
import pandas as pd

from curate.core.clock import now
from curate.core.errors import CurateError
from curate.core.secrets import redact_data
from curate.items.store import Workspace

#: What may produce answers.
SOURCES = ("generate", "inspect", "lm-eval", "table")

#: Columns of ``read_answers``, in order.
COLUMNS = ("model", "item_id", "choice", "run", "source")

MIGRATIONS = [
    ("answers-001-tables", f"""
        CREATE TABLE answer_runs (
            run_id     TEXT PRIMARY KEY,
            model      TEXT NOT NULL,
            source     TEXT NOT NULL CHECK (source IN ({', '.join(f"'{s}'" for s in SOURCES)})),
            info_json  TEXT NOT NULL,       -- files read, their hashes, settings; never secrets
            created_at TEXT NOT NULL
        );
        CREATE TABLE answers (
            model        TEXT NOT NULL,
            item_id      TEXT NOT NULL REFERENCES items(item_id),
            run          TEXT NOT NULL,     -- seed / shuffle / sample / epoch: keeps one model's answers apart
            source       TEXT NOT NULL CHECK (source IN ({', '.join(f"'{s}'" for s in SOURCES)})),
            choice       INTEGER,           -- original option index, 0-based; NULL = the reply could not be read
            content_hash TEXT NOT NULL,     -- the item's content hash when answered
            run_id       TEXT NOT NULL REFERENCES answer_runs(run_id),
            created_at   TEXT NOT NULL,
            PRIMARY KEY (model, item_id, run, source)
        );
        CREATE INDEX answers_run ON answers(run_id);
    """),
]

#: Generations stored before the answers table existed, copied once (``generate_run`` spells
#: their ``run``; SQLite's ``||`` builds the same text).
BACKFILL = ("answers-002-generations", """
    INSERT OR IGNORE INTO answer_runs (run_id, model, source, info_json, created_at)
        SELECT run_id, model, 'generate', info_json, created_at FROM generation_runs;
    INSERT OR REPLACE INTO answers (model, item_id, run, source, choice, content_hash, run_id, created_at)
        SELECT model, item_id, 'mode=' || mode || ',seed=' || seed || ',template=' || template
               || ',settings=' || settings, 'generate', pred, content_hash, run_id, created_at FROM generations;
""")


def generate_run(*, mode: str, seed: int, template: str, settings: str) -> str:
    """The ``run`` of a ``curate generate`` answer: everything that tells two of a model's
    generated answers to one item apart (mode, seed and so option order, template, settings)."""
    return f"mode={mode},seed={seed},template={template},settings={settings}"


def prepare(ws: Workspace) -> Workspace:
    """Put the answer tables in place in an open workspace (and copy older generations once)."""
    ws.migrate(MIGRATIONS)
    has_generations = ws.conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'generations'").fetchone()
    # Nothing to copy in a workspace without generations: every generation written from now on
    # is written here as well (generate.store), so the copy is needed once, at most.
    ws.migrate([(BACKFILL[0], BACKFILL[1] if has_generations else "SELECT 1;")])
    return ws


def open_answers(root) -> Workspace:
    """Open a workspace with the answer tables in place."""
    ws = Workspace.open(root)
    try:
        return prepare(ws)
    except BaseException:
        ws.close()
        raise


# --- writing -----------------------------------------------------------------------------------

def store_answers(root, frame: pd.DataFrame, *, model_source: str, info: dict) -> int:
    """Store ``frame``'s answers (columns ``model, item_id, choice, run``; choice the original
    option index or None/NaN for an unreadable reply) as source ``model_source``, in one
    transaction: all or nothing. An answer already stored under the same (model, item, run,
    source) is replaced, so importing a file again changes nothing. Every row is checked against
    the workspace's items first; the first bad one is refused in one line naming the item and
    field. ``info`` (what was read; secrets are redacted) is kept in each model's run record.
    Returns the number of answers stored."""
    ws = open_answers(root)
    try:
        with ws.transaction():
            return write_answers(ws, frame, source=model_source, info=info)
    finally:
        ws.close()


def write_answers(ws: Workspace, frame: pd.DataFrame, *, source: str, info: dict) -> int:
    """``store_answers`` inside the caller's transaction: one run record per model of ``frame``."""
    rows = check_answers(ws, frame, source=source)
    run_ids = {}
    for model in sorted({r[0] for r in rows}):
        run_ids[model] = f"answers-{source}:{uuid.uuid4().hex[:16]}"
        add_run(ws, run_id=run_ids[model], model=model, source=source, info=info)
    write_rows(ws, [{"model": model, "item_id": item, "run": run, "source": source, "choice": choice,
                     "content_hash": digest, "run_id": run_ids[model]} for model, item, run, choice, digest in rows])
    drop_empty_runs(ws, source)
    return len(rows)


def add_run(ws: Workspace, *, run_id: str, model: str, source: str, info: dict) -> None:
    """Record a run (an existing run id keeps its first record); call inside a transaction."""
    ws.conn.execute("INSERT OR IGNORE INTO answer_runs VALUES (?, ?, ?, ?, ?)",
                    (run_id, model, source, json.dumps(redact_data(info), sort_keys=True), now()))


#: The columns of a row ``write_rows`` takes.
ROW_COLUMNS = ("model", "item_id", "run", "source", "choice", "content_hash", "run_id")


def write_rows(ws: Workspace, rows: list[dict]) -> None:
    """Insert or replace answers (dicts with ``ROW_COLUMNS``) whose items, choices and run records
    the caller has checked (``check_answers``, or ``curate generate``'s own records); call inside a
    transaction."""
    stamp = now()
    ws.conn.executemany(
        f"INSERT OR REPLACE INTO answers ({', '.join(ROW_COLUMNS)}, created_at) "
        f"VALUES ({', '.join('?' * (len(ROW_COLUMNS) + 1))})",
        ([r[c] for c in ROW_COLUMNS] + [stamp] for r in rows))


def check_answers(ws: Workspace, frame: pd.DataFrame, *, source: str) -> list[tuple]:
    """(model, item_id, run, choice, content_hash) of each row, or a CurateError naming the first
    row that names no item, an option the item lacks, or an answer given twice."""
    if source not in SOURCES:
        raise CurateError(f"answers: unknown source {source!r}; known: {', '.join(SOURCES)}")
    missing = [c for c in ("model", "item_id", "choice", "run") if c not in frame.columns]
    if missing:
        raise CurateError(f"answers: the frame lacks column {', '.join(map(repr, missing))} "
                          f"(it needs model, item_id, choice, run)")
    items = {r[0]: (r[1], r[2]) for r in ws.conn.execute(
        "SELECT item_id, json_array_length(item_json, '$.options'), content_hash FROM items")}
    rows, seen = [], {}
    for n, (model, item_id, choice, run) in enumerate(
            frame[["model", "item_id", "choice", "run"]].itertuples(index=False, name=None)):
        where = f"answers row {n}"
        for name, value in (("model", model), ("item_id", item_id), ("run", run)):
            if not isinstance(value, str) or not value:
                raise CurateError(f"{where}, field '{name}': {value!r} is not a non-empty text; nothing was stored")
        if item_id not in items:
            raise CurateError(f"{where}, item {item_id!r}, field 'item_id': no such item in the workspace; "
                              f"nothing was stored")
        n_options, digest = items[item_id]
        choice = _choice(choice, n_options, f"{where}, item {item_id!r}, field 'choice'")
        key = (model, item_id, run)
        if key in seen:
            raise CurateError(f"{where}, item {item_id!r}, field 'run': model {model!r} answers it twice in run "
                              f"{run!r} (rows {seen[key]} and {n}); give each answer its own run; nothing was stored")
        seen[key] = n
        rows.append((model, item_id, run, choice, digest))
    return rows


def _choice(value, n_options: int, where: str) -> int | None:
    """The stored choice: an option index of the item, or None for an unreadable reply."""
    if value is None or value is pd.NA or (isinstance(value, numbers.Real) and math.isnan(value)):
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or int(value) != value:
        raise CurateError(f"{where}: {value!r} is not an option index (an integer, or empty for an unreadable "
                          f"reply); nothing was stored")
    if not 0 <= int(value) < n_options:
        raise CurateError(f"{where}: option {int(value)} is not one of the item's {n_options} options "
                          f"(0-{n_options - 1}); nothing was stored")
    return int(value)


def drop_empty_runs(ws: Workspace, source: str) -> None:
    """Delete ``source``'s run records no stored answer names any more (replaced by a later store)."""
    ws.conn.execute("DELETE FROM answer_runs WHERE source = ? AND NOT EXISTS "
                    "(SELECT 1 FROM answers WHERE answers.run_id = answer_runs.run_id)", (source,))


# --- reading -----------------------------------------------------------------------------------

def read_answers(root) -> pd.DataFrame:
    """Every stored answer, one row per (model, item, run, source), sorted by model, source, run
    and the items' row order. Columns (``COLUMNS``):

    model    the answering model's label
    item_id  the workspace item
    choice   the chosen original option index, 0-based (pandas Int64; <NA>: the reply could not be read)
    run      what keeps one model's answers to an item apart (seed, shuffle, sample)
    source   generate | inspect | lm-eval | table
    """
    ws = open_answers(root)
    try:
        return answers_frame(ws)
    finally:
        ws.close()


def answers_frame(ws: Workspace) -> pd.DataFrame:
    """``read_answers`` of an open workspace."""
    cursor = ws.conn.cursor()
    cursor.row_factory = None
    cursor.execute("SELECT a.model, a.item_id, a.choice, a.run, a.source FROM answers a JOIN items i USING (item_id) "
                   "ORDER BY a.model, a.source, a.run, i.row_index")
    frame = pd.DataFrame.from_records(cursor.fetchall(), columns=list(COLUMNS))
    frame["choice"] = frame["choice"].astype("Int64")
    return frame


def read_runs(ws: Workspace) -> pd.DataFrame:
    return pd.read_sql_query("SELECT * FROM answer_runs ORDER BY created_at, run_id", ws.conn)


def holdings(ws: Workspace):
    """What the answers table holds (``curate.items.store.Holdings``): ("answers", model) for
    each model with a stored answer, and the state: every answer but those copied from
    generations (the generations count there: ``generate.store.holdings``). A workspace without
    answers adds nothing to the state, which stays what it was before answers were stored."""
    from curate.items.store import Holdings

    if "answers" not in ws.table_names():
        return Holdings(state=None)
    facts = {("answers", model) for (model,) in ws.conn.execute("SELECT DISTINCT model FROM answers")}
    rows = ws.conn.execute("SELECT model, source, run, item_id, choice FROM answers WHERE source != 'generate' "
                           "ORDER BY model, source, run, item_id").fetchall()
    return Holdings(facts, [tuple(r) for r in rows] or None)
