"""Scores in the workspace: one row per (model, mode, formulation, fewshot, item, option), plus one
row per run. The formulation (``cloze``, ``letters``, a rotation ``letters+rK``; see
``curate.items.formulations``) and the shot count ``fewshot`` (0, or K examples before the item, as
lm-eval builds them; see ``curate.items.fewshot``) are scoring axes like the mode: one model's
formulations and shot counts live under one label as different rows, never mixed by a reader.

Stored per option: ``logprob_sum`` (sum of the option's token log-probabilities given the
context), its ``n_tokens``/``n_chars``/``n_bytes``, ``is_greedy`` and the reference study's
``seq_mean`` (mean log-probability over every predicted token of context + " " + option).
Per-token, per-char and per-byte means are derived by ``scoring.normalize``, never stored.
``study_sum``/``study_byte_mean`` hold the study's other released variants when imported.
Any column may be NULL when its source did not provide it (imports give only what they have).

Each run has a *source*: what its numbers depend on besides the items (``run_source``). A label
holds the scores of one source: scoring or importing another source under it is refused unless
the caller replaces the label's scores (``check_label``), and readers refuse a (label, mode)
whose rows come from different sources or engine versions (``require_one_source``). So a
float32 and a bfloat16 run, or two models, never mix silently under one name.
"""
from __future__ import annotations

import json

import pandas as pd

from curate.core.clock import now
from curate.core.errors import CurateError
from curate.core.secrets import redact_data
from curate.items.store import Holdings, Workspace

#: The value columns as the scores table and each rebuild of it declare them (a rebuild changes only the key).
_VALUE_COLUMNS_SQL = """\
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
            run_id          TEXT NOT NULL REFERENCES score_runs(run_id),"""

MIGRATIONS = [
    ("scores-001-tables", f"""
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
{_VALUE_COLUMNS_SQL}
            PRIMARY KEY (model, mode, item_id, option_index)
        );
        CREATE INDEX scores_run ON scores(run_id);
    """),
    # The scoring engine's version (scoring.ENGINE_VERSION) of each computed run; NULL for runs
    # recorded before it was kept (their scores are recomputed) and for imports.
    ("scores-002-engine", """
        ALTER TABLE score_runs ADD COLUMN engine INTEGER;
    """),
    # The formulation joins the key. SQLite cannot change a primary key, so the table is rebuilt;
    # every row stored before formulations existed was scored as cloze.
    ("scores-003-formulation", f"""
        CREATE TABLE scores_new (
            model           TEXT NOT NULL,
            mode            TEXT NOT NULL,
            formulation     TEXT NOT NULL DEFAULT 'cloze',
            item_id         TEXT NOT NULL REFERENCES items(item_id),
            option_index    INTEGER NOT NULL,
{_VALUE_COLUMNS_SQL}
            PRIMARY KEY (model, mode, formulation, item_id, option_index)
        );
        INSERT INTO scores_new (model, mode, formulation, item_id, option_index, logprob_sum, n_tokens, n_chars,
                                n_bytes, is_greedy, seq_mean, study_sum, study_byte_mean, flags, content_hash, run_id)
            SELECT model, mode, 'cloze', item_id, option_index, logprob_sum, n_tokens, n_chars, n_bytes, is_greedy,
                   seq_mean, study_sum, study_byte_mean, flags, content_hash, run_id FROM scores;
        DROP TABLE scores;
        ALTER TABLE scores_new RENAME TO scores;
        CREATE INDEX scores_run ON scores(run_id);
    """),
    # The shot count joins the key (issue 29): k-shot scores of an item live beside its 0-shot
    # ones. Rebuilt as for the formulation; every row stored before it was scored 0-shot.
    ("scores-004-fewshot", f"""
        CREATE TABLE scores_new (
            model           TEXT NOT NULL,
            mode            TEXT NOT NULL,
            formulation     TEXT NOT NULL DEFAULT 'cloze',
            fewshot         INTEGER NOT NULL DEFAULT 0,
            item_id         TEXT NOT NULL REFERENCES items(item_id),
            option_index    INTEGER NOT NULL,
{_VALUE_COLUMNS_SQL}
            PRIMARY KEY (model, mode, formulation, fewshot, item_id, option_index)
        );
        INSERT INTO scores_new (model, mode, formulation, fewshot, item_id, option_index, logprob_sum, n_tokens,
                                n_chars, n_bytes, is_greedy, seq_mean, study_sum, study_byte_mean, flags,
                                content_hash, run_id)
            SELECT model, mode, formulation, 0, item_id, option_index, logprob_sum, n_tokens, n_chars, n_bytes,
                   is_greedy, seq_mean, study_sum, study_byte_mean, flags, content_hash, run_id FROM scores;
        DROP TABLE scores;
        ALTER TABLE scores_new RENAME TO scores;
        CREATE INDEX scores_run ON scores(run_id);
    """),
]

VALUE_COLUMNS = ("logprob_sum", "n_tokens", "n_chars", "n_bytes", "is_greedy", "seq_mean",
                 "study_sum", "study_byte_mean", "flags")


def open_scores(root) -> Workspace:
    """Open a workspace with the score tables in place."""
    return Workspace.open(root, MIGRATIONS)


#: What a run's numbers depend on besides the items (a scoring backend's ``identity()``), as stored.
IDENTITY = ("model_hash", "tokenizer_hash", "dtype", "engine")


def add_run(ws: Workspace, *, run_id: str, model: str, origin: str, info: dict, device=None, **identity) -> None:
    """Record a run (idempotent: an existing run id keeps its first record); ``identity``: its
    ``IDENTITY`` fields (those not given are unknown: an import's, say)."""
    unknown = set(identity) - set(IDENTITY)
    if unknown:
        raise TypeError(f"add_run: no field {', '.join(sorted(unknown))}")
    model_hash, tokenizer_hash, dtype, engine = (identity.get(k) for k in IDENTITY)
    ws.conn.execute(
        "INSERT OR IGNORE INTO score_runs (run_id, model, origin, model_hash, tokenizer_hash, dtype, device, "
        "info_json, created_at, engine) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, model, origin, model_hash, tokenizer_hash, dtype, device,
         json.dumps(redact_data(info), sort_keys=True), now(), engine))


# --- what a label holds ----------------------------------------------------------------------

def run_source(run) -> tuple:
    """What a run's numbers depend on besides the items. Computed runs: the model's weights, its
    tokenizer, the dtype and the backend that computed them (the engine, vLLM, ...: their numbers
    differ in the last digits, so one label holds one backend's); imports: their format (one
    import per label and mode). Runs with one source give interchangeable scores (up to the
    engine version, kept apart)."""
    if run["origin"] == "scored":
        return ("scored", run["model_hash"], run["tokenizer_hash"], run["dtype"], run_backend(run))
    return (run["origin"],)


def run_backend(run) -> str:
    """The backend a computed run names (``backend``, or its record's ``info_json``); runs stored
    before there were backends are the engine's."""
    if run.get("backend"):
        return run["backend"]
    try:
        return json.loads(run.get("info_json") or "{}").get("backend") or "engine"
    except (ValueError, AttributeError):
        return "engine"


def describe_source(source: tuple) -> str:
    if source[0] != "scored":
        return f"scores {source[0]}"
    _, model_hash, tokenizer_hash, dtype, backend = source
    return f"{dtype} scores of model {_short(model_hash)} (tokenizer {_short(tokenizer_hash)}) by the {backend} backend"


def _short(digest) -> str:
    text = str(digest)
    return text[:19] + "..." if text.startswith("sha256:") else text


def label_lock(root, label: str, *, command: str):
    """The lock every writer of ``label``'s scores holds (``curate score``, ``curate import-scores``):
    two at once would mix their rows under one label."""
    from curate.core.lock import work_lock
    return work_lock(root, f"score {label}", command=command)


def label_runs(ws: Workspace, label: str) -> pd.DataFrame:
    """The runs whose rows are stored under ``label``: one row per (mode, formulation, fewshot, run)
    with its item count and the run's record (the columns of ``score_sources``, and the run's info)."""
    return pd.read_sql_query(
        "SELECT s.mode, s.formulation, s.fewshot, count(DISTINCT s.item_id) AS items, r.* FROM scores s "
        "JOIN score_runs r USING (run_id) WHERE s.model = ? GROUP BY s.mode, s.formulation, s.fewshot, s.run_id "
        "ORDER BY s.mode, s.formulation, s.fewshot, r.created_at", ws.conn, params=(label,))


def other_sources(ws: Workspace, label: str, source: tuple) -> list[tuple]:
    """(run_id, mode, source) of each run stored under ``label`` whose source is not ``source``."""
    return [(run["run_id"], run["mode"], run_source(run)) for run in label_runs(ws, label).to_dict("records")
            if run_source(run) != source]


def check_label(ws: Workspace, label: str, source: tuple, *, replace: bool = False, flag: str = "--replace") -> int:
    """Refuse to store ``source``'s scores under ``label`` when the label holds scores of another
    source (in any mode); with ``replace``, delete all of the label's scores first (call inside
    the caller's transaction). Returns the rows deleted."""
    other = other_sources(ws, label, source)
    if not other:
        return 0
    if not replace:
        run_id, mode, held = other[0]
        raise CurateError(
            f"label {label!r} already holds {describe_source(held)} (mode {mode}, run {run_id}); this run would store "
            f"{describe_source(source)}. Use another --label to keep both, or {flag} to delete the stored scores "
            f"of {label!r} first")
    return delete_scores(ws, "model = ?", (label,))


def delete_scores(ws: Workspace, where: str, params: tuple) -> int:
    """Delete the score rows matching ``where`` (an SQL condition on ``scores``), and the run
    records they leave with no rows: a replaced run must not stay listed as a source (call inside
    the caller's transaction). Returns the rows deleted."""
    runs = [r for (r,) in ws.conn.execute(f"SELECT DISTINCT run_id FROM scores WHERE {where}", params)]
    deleted = ws.conn.execute(f"DELETE FROM scores WHERE {where}", params).rowcount
    ws.conn.executemany("DELETE FROM score_runs WHERE run_id = ? AND NOT EXISTS "
                        "(SELECT 1 FROM scores WHERE scores.run_id = score_runs.run_id)", ((r,) for r in runs))
    return deleted


def score_sources(scores: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Which runs ``scores`` (a ``read_scores`` frame) come from: one row per (model, mode,
    formulation, fewshot, run) with the run's origin, dtype, device, engine, hashes and its number
    of items."""
    cols = ["run_id", "origin", "model_hash", "tokenizer_hash", "dtype", "device", "engine", "created_at"]
    counts = scores.groupby(["model", "mode", "formulation", "fewshot", "run_id"], sort=True)["item_id"].nunique()
    counts = counts.rename("items").reset_index()
    out = counts.merge(runs[[c for c in cols if c in runs.columns]], on="run_id", how="left")
    return out.astype(object).where(out.notna(), None)


def require_one_source(sources: pd.DataFrame) -> pd.DataFrame:
    """``sources`` (from ``score_sources`` or ``label_runs``) unchanged, or a CurateError naming
    the runs when a label mixes scores of different sources (across any of its modes and
    formulations) or a (label, mode, formulation) mixes engine versions (a re-score after an
    engine change, not finished)."""
    for model, group in sources.groupby("model", sort=True):
        kinds = {run_source(r): r for r in group.to_dict("records")}
        if len(kinds) > 1:
            (a, ra), (b, rb) = list(kinds.items())[:2]
            raise CurateError(
                f"model {model!r}: its stored scores mix {describe_source(a)} (mode {ra['mode']}, run {ra['run_id']}, "
                f"{ra['items']} items) and {describe_source(b)} (mode {rb['mode']}, run {rb['run_id']}, "
                f"{rb['items']} items); re-score it under one setting with --replace, or under separate --labels")
        axes = ["mode", "formulation", "fewshot"]  # both sources' frames have every axis (scores-004)
        for key, part in group.groupby(axes, sort=True):
            engines = sorted({"none" if e is None or e != e else str(int(e)) for e in part["engine"]})
            if part["origin"].iloc[0] == "scored" and len(engines) > 1:
                named = dict(zip(axes, key))
                which = (f"mode {named['mode']!r}"
                         + ("" if named["formulation"] == "cloze" else f", formulation {named['formulation']!r}")
                         + (f", {named['fewshot']}-shot" if named["fewshot"] else ""))
                raise CurateError(
                    f"model {model!r}, {which}: stored scores come from engine versions {', '.join(engines)} "
                    f"(runs {', '.join(part['run_id'])}); finish re-scoring it (curate score) before analysing")
    return sources


def write_scores(ws: Workspace, rows: list[dict]) -> None:
    """Insert or replace score rows (dicts with the table's columns; ``formulation`` defaults to
    cloze, ``fewshot`` to 0); call inside a transaction."""
    cols = ("model", "mode", "formulation", "fewshot", "item_id", "option_index", *VALUE_COLUMNS, "content_hash",
            "run_id")
    defaults = {"formulation": "cloze", "fewshot": 0}
    ws.conn.executemany(
        f"INSERT OR REPLACE INTO scores ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
        ([r.get(c, defaults.get(c)) for c in cols] for r in rows))


def read_scores(ws: Workspace, *, models=None, modes=None, formulations=None, fewshots=None) -> pd.DataFrame:
    """All scores joined with row_index and source, one row per (model, mode, formulation,
    fewshot, item, option), sorted by model, mode, formulation, fewshot, row_index, option_index.
    ``fewshots`` (shot counts) filters like the others; None reads every shot count, which the
    analyses keep apart as a condition column (``scoring.normalize.CONDITION``)."""
    where, params = [], []
    for col, values in (("s.model", models), ("s.mode", modes), ("s.formulation", formulations),
                        ("s.fewshot", None if fewshots is None else [int(k) for k in fewshots])):
        if values:
            where.append(f"{col} IN ({', '.join('?' * len(values))})")
            params.extend(values)
    sql = ("SELECT s.model, s.mode, s.formulation, s.fewshot, s.item_id, i.row_index, i.source, s.option_index, "
           + ", ".join(f"s.{c}" for c in VALUE_COLUMNS) + ", s.content_hash, s.run_id "
           "FROM scores s JOIN items i USING (item_id)"
           + (" WHERE " + " AND ".join(where) if where else ""))
    # A plain-tuple cursor: the workspace's sqlite3.Row factory costs seconds on a million rows;
    # and pandas sorts them faster than SQLite's temporary B-tree (the key is unique, so the
    # order is the same).
    cursor = ws.conn.cursor()
    cursor.row_factory = None
    cursor.execute(sql, params)
    columns = [d[0] for d in cursor.description]
    frame = pd.DataFrame.from_records(cursor.fetchall(), columns=columns, coerce_float=True)
    if frame.empty:
        frame["fewshot"] = frame["fewshot"].astype(int)
    return frame.sort_values(["model", "mode", "formulation", "fewshot", "row_index", "option_index"],
                             ignore_index=True)


def read_runs(ws: Workspace) -> pd.DataFrame:
    return pd.read_sql_query("SELECT * FROM score_runs ORDER BY created_at, run_id", ws.conn)


def holdings(ws: Workspace) -> Holdings:
    """What the scores table holds (``curate.items.store.Holdings``): ("scores", model, mode,
    formulation, fewshot, normalization) for each normalization every option of the group has
    (``scoring.normalize.INPUTS``), and the state: rows, log-probabilities and runs per (run,
    model, mode). A table an older toolkit made reads as it was scored then: cloze and 0-shot."""
    from scoring.normalize import INPUTS

    if "scores" not in ws.table_names():
        return Holdings()
    columns = ws.columns("scores")
    formulation = "formulation" if "formulation" in columns else "'cloze'"  # before scores-003: cloze
    fewshot = "fewshot" if "fewshot" in columns else "0"  # before scores-004: 0-shot
    counted = sorted({c for needed in INPUTS.values() for c in needed})
    facts = set()
    for model, mode, form, k, total, *have in ws.conn.execute(
            f"SELECT model, mode, {formulation}, {fewshot}, count(*), {', '.join(f'count({c})' for c in counted)} "
            "FROM scores GROUP BY 1, 2, 3, 4"):
        full = {c for c, n in zip(counted, have) if n == total}
        facts |= {("scores", model, mode, form, k, norm) for norm, needed in INPUTS.items() if full.issuperset(needed)}
    state = ws.conn.execute(
        "SELECT run_id, model, mode, count(*), sum(coalesce(logprob_sum, 0) + coalesce(seq_mean, 0)) "
        "FROM scores GROUP BY run_id, model, mode ORDER BY run_id, model, mode").fetchall()
    return Holdings(facts, [tuple(r) for r in state])
