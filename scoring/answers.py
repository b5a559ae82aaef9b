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

#: Each import's answers know the file they came from and the name the import gave their model
#: (``--model``; '' when the file names it), so importing a file again replaces what it gave
#: before, rows deleted from it included; ``answer_imports`` records each import's fingerprint
#: (format, settings, every file's sha256), so a rerun of the audit knows, from the store alone,
#: whether the files changed. Answers imported before keep the file their run record names
#: when it names one.
FILES = ("answers-003-files", """
    ALTER TABLE answers ADD COLUMN file TEXT;       -- the file an import read it from; NULL: curate generate's
    ALTER TABLE answers ADD COLUMN named TEXT NOT NULL DEFAULT '';  -- --model of its import; '': the file's name
    UPDATE answers SET file = (
        SELECT COALESCE(json_extract(r.info_json, '$.files[0].path'), json_extract(r.info_json, '$.logs[0].path'))
        FROM answer_runs r WHERE r.run_id = answers.run_id
          AND COALESCE(json_array_length(r.info_json, '$.files'), json_array_length(r.info_json, '$.logs')) = 1)
    WHERE source != 'generate';
    CREATE TABLE IF NOT EXISTS answer_imports (
        fingerprint  TEXT PRIMARY KEY,   -- sha256 of the format, its settings and each file read (path, sha256)
        source       TEXT NOT NULL,
        named        TEXT NOT NULL,
        files_json   TEXT NOT NULL,      -- the files read, as their answers' ``file``
        answers      INTEGER NOT NULL,   -- how many answers it stored
        summary_json TEXT NOT NULL,      -- per model: answers, unreadable, runs
        created_at   TEXT NOT NULL
    );
""")

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
    ws.migrate([(BACKFILL[0], BACKFILL[1] if has_generations else "SELECT 1;"), FILES])
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


def replace_answers(root, frame: pd.DataFrame, *, source: str, info: dict, files: list[str], named: str,
                    fingerprint: str, summary: list[dict]) -> dict:
    """``store_answers`` for an import that read ``files`` (each answer's ``file`` column names
    the one it came from) under the name ``named`` (its ``--model``, '' when the files name their
    models): first every answer an earlier import of these files under that name stored is
    deleted, so rows deleted from a file leave the workspace; then the import's ``fingerprint``
    and ``summary`` are recorded (``imported``). All in one transaction. Returns ``stored`` and
    ``replaced`` (the answers deleted first)."""
    ws = open_answers(root)
    try:
        with ws.transaction(foreign_keys=False):  # rows checked against the items; their runs written here
            replaced = _delete_from(ws, source, files, named)
            stored = write_answers(ws, frame.assign(named=named), source=source, info=info)
            _record_import(ws, fingerprint, source=source, files=files, named=named, answers=stored, summary=summary)
    finally:
        ws.close()
    return {"stored": stored, "replaced": replaced}


def _delete_from(ws: Workspace, source: str, files: list[str], named: str) -> int:
    ws.conn.execute("CREATE TEMP TABLE IF NOT EXISTS import_files (file TEXT PRIMARY KEY)")
    ws.conn.execute("DELETE FROM import_files")
    ws.conn.executemany("INSERT OR IGNORE INTO import_files VALUES (?)", ((f,) for f in files))
    return ws.conn.execute("DELETE FROM answers WHERE source = ? AND named = ? AND file IN (SELECT file FROM "
                           "import_files)", (source, named)).rowcount


def _record_import(ws: Workspace, fingerprint: str, *, source: str, files: list[str], named: str, answers: int,
                   summary: list[dict]) -> None:
    """Record an import; the records of earlier imports of any of its files under its name go."""
    mine = set(files)
    for key, held in ws.conn.execute("SELECT fingerprint, files_json FROM answer_imports WHERE source = ? AND "
                                     "named = ?", (source, named)).fetchall():
        if mine & set(json.loads(held)):
            ws.conn.execute("DELETE FROM answer_imports WHERE fingerprint = ?", (key,))
    ws.conn.execute("INSERT OR REPLACE INTO answer_imports VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (fingerprint, source, named, json.dumps(sorted(mine)), answers, json.dumps(summary), now()))


def imported(ws: Workspace, fingerprint: str) -> list[dict] | None:
    """The summary of the import recorded under ``fingerprint`` when the workspace still holds
    every answer it stored (none replaced by another file's since), else None: the files, the
    format's settings and the name are those of an import made before, byte for byte."""
    row = ws.conn.execute("SELECT source, named, files_json, answers, summary_json FROM answer_imports "
                          "WHERE fingerprint = ?", (fingerprint,)).fetchone()
    if row is None:
        return None
    source, named, files, answers, summary = row
    ws.conn.execute("CREATE TEMP TABLE IF NOT EXISTS import_files (file TEXT PRIMARY KEY)")
    ws.conn.execute("DELETE FROM import_files")
    ws.conn.executemany("INSERT OR IGNORE INTO import_files VALUES (?)", ((f,) for f in json.loads(files)))
    held = ws.conn.execute("SELECT COUNT(*) FROM answers WHERE source = ? AND named = ? AND file IN "
                           "(SELECT file FROM import_files)", (source, named)).fetchone()[0]
    return json.loads(summary) if held == answers else None


def write_answers(ws: Workspace, frame: pd.DataFrame, *, source: str, info: dict) -> int:
    """``store_answers`` inside the caller's transaction: one run record per model of ``frame``
    (optional columns ``file`` and ``named``: where each answer was read, ``replace_answers``)."""
    choices, digests = check_answers(ws, frame, source=source)
    models, items, runs = (frame[c].tolist() for c in ("model", "item_id", "run"))
    run_ids = {}
    info_json = json.dumps(redact_data(info), sort_keys=True)  # once: an import may hold 50,000 models
    for model in sorted(set(models)):
        run_ids[model] = f"answers-{source}:{uuid.uuid4().hex[:16]}"
        ws.conn.execute("INSERT OR IGNORE INTO answer_runs VALUES (?, ?, ?, ?, ?)",
                        (run_ids[model], model, source, info_json, now()))
    files = frame["file"].tolist() if "file" in frame.columns else [None] * len(frame)
    named = frame["named"].tolist() if "named" in frame.columns else [""] * len(frame)
    write_rows(ws, ({"model": m, "item_id": i, "run": r, "source": source, "choice": c, "content_hash": digests[i],
                     "run_id": run_ids[m], "file": f, "named": n}
                    for m, i, r, c, f, n in zip(models, items, runs, choices, files, named)))
    drop_empty_runs(ws, source)
    return len(choices)


def add_run(ws: Workspace, *, run_id: str, model: str, source: str, info: dict) -> None:
    """Record a run (an existing run id keeps its first record); call inside a transaction."""
    ws.conn.execute("INSERT OR IGNORE INTO answer_runs VALUES (?, ?, ?, ?, ?)",
                    (run_id, model, source, json.dumps(redact_data(info), sort_keys=True), now()))


#: The columns of a row ``write_rows`` takes (and optionally ``file`` and ``named``).
ROW_COLUMNS = ("model", "item_id", "run", "source", "choice", "content_hash", "run_id")


def write_rows(ws: Workspace, rows) -> None:
    """Insert or replace answers (dicts with ``ROW_COLUMNS``, an iterable read once) whose items,
    choices and run records the caller has checked (``check_answers``, or ``curate generate``'s
    own records); call inside a transaction."""
    stamp = now()
    ws.conn.executemany(
        f"INSERT OR REPLACE INTO answers ({', '.join(ROW_COLUMNS)}, file, named, created_at) "
        f"VALUES ({', '.join('?' * (len(ROW_COLUMNS) + 3))})",
        ([r[c] for c in ROW_COLUMNS] + [r.get("file"), r.get("named", ""), stamp] for r in rows))


def check_answers(ws: Workspace, frame: pd.DataFrame, *, source: str) -> tuple[list, dict]:
    """(each row's choice as stored, item id -> content hash), or a CurateError naming the first
    row that names no item or an option the item lacks, then the first answer given twice."""
    if source not in SOURCES:
        raise CurateError(f"answers: unknown source {source!r}; known: {', '.join(SOURCES)}")
    missing = [c for c in ("model", "item_id", "choice", "run") if c not in frame.columns]
    if missing:
        raise CurateError(f"answers: the frame lacks column {', '.join(map(repr, missing))} "
                          f"(it needs model, item_id, choice, run)")
    items = {r[0]: (r[1], r[2]) for r in ws.conn.execute(
        "SELECT item_id, json_array_length(item_json, '$.options'), content_hash FROM items")}
    choices = []
    for n, (model, item_id, choice, run) in enumerate(zip(*(frame[c].tolist() for c in ("model", "item_id",
                                                                                        "choice", "run")))):
        for name, value in (("model", model), ("item_id", item_id), ("run", run)):
            if not isinstance(value, str) or not value:
                raise CurateError(f"answers row {n}, field '{name}': {value!r} is not a non-empty text; nothing was "
                                  f"stored")
        if item_id not in items:
            raise CurateError(f"answers row {n}, item {item_id!r}, field 'item_id': no such item in the workspace; "
                              f"nothing was stored")
        choices.append(_choice(choice, items[item_id][0], n, item_id))
    twice = frame.duplicated(["model", "item_id", "run"], keep="first")
    if twice.any():
        n = int(twice.to_numpy().argmax())
        model, item_id, run = frame["model"].iat[n], frame["item_id"].iat[n], frame["run"].iat[n]
        first = int(((frame["model"] == model) & (frame["item_id"] == item_id) & (frame["run"] == run)).to_numpy().argmax())
        raise CurateError(f"answers row {n}, item {item_id!r}, field 'run': model {model!r} answers it twice in run "
                          f"{run!r} (rows {first} and {n}); give each answer its own run; nothing was stored")
    return choices, {i: items[i][1] for i in set(frame["item_id"])}


def _choice(value, n_options: int, n: int, item_id: str) -> int | None:
    """The stored choice: an option index of the item, or None for an unreadable reply."""
    if type(value) is int and 0 <= value < n_options:
        return value  # the usual answer, at once
    where = f"answers row {n}, item {item_id!r}, field 'choice'"
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
