"""Verdicts on items in the workspace: judges' outputs and other audits' labels imported with
`curate import-verdicts`, and, read from the annotations, people's verdicts in `curate review`
and the annotators' results, all as one frame for ``curate.validity.judges``.

Imported verdicts are kept one per row read in ``verdicts``, each with the file and row it came
from (``verdict_files``: path, sha256, rows). An import is one transaction: all of its files'
rows or none. Importing a file again first drops what that file brought before, so a second
import of the same file changes nothing and a row deleted from the file leaves the workspace. A
judge that judged one item several times (a benchmark asking the same question twice, two
files) keeps every verdict; the pooling reads their share (``curate.validity.judges``).

From the annotations (``annotate.store``), per annotator and item, the valid records of both
rounds read as one verdict: broken where round 2's best option is not the key (``wrong-key``,
with that option as ``answer``), another option is equally good (``several-correct``), all are
implausible (``no-right-answer``), or round 1 names a flaw (nonsense or ungrammatical text:
``unclear``; several plausible answers: ``several-correct``); else ``ok``. Reviewers
(``human:NAME``) are kind ``reviewer``, the others ``annotator``.
"""
from __future__ import annotations

import pandas as pd

from annotate.store import MIGRATIONS as ANNOTATION_TABLES
from annotate.store import read_annotations
from curate.core.clock import now
from curate.items.store import Workspace

MIGRATIONS = [
    ("verdicts-001-tables", """
        CREATE TABLE verdict_files (
            path       TEXT PRIMARY KEY,      -- the file as resolved when imported
            sha256     TEXT NOT NULL,
            rows       INTEGER NOT NULL,
            format     TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE TABLE verdicts (
            judge      TEXT NOT NULL,
            item_id    TEXT NOT NULL REFERENCES items(item_id),
            verdict    TEXT NOT NULL CHECK (verdict IN ('ok', 'error', 'wrong-key', 'several-correct',
                                                         'no-right-answer', 'unclear')),
            answer     INTEGER,               -- the option the judge calls right (0-based), if it says
            path       TEXT NOT NULL REFERENCES verdict_files(path),
            row        INTEGER NOT NULL,      -- the row of the file (0-based, header not counted)
            created_at TEXT NOT NULL,
            PRIMARY KEY (path, row)
        );
        CREATE INDEX verdicts_item ON verdicts(item_id);
    """),
]

#: Round-1 labels that name a flaw of the text, and the one that names several answers.
UNCLEAR_LABELS = ("ungrammatical_prompt", "ungrammatical_correct", "ungrammatical_incorrect", "nonsense_prompt",
                  "nonsense_correct", "nonsense_incorrect")
SEVERAL_LABEL = "multiple_plausible"
REVIEWER = "human:"


def open_verdicts(root) -> Workspace:
    """Open a workspace with the annotation and verdict tables in place."""
    return Workspace.open(root, ANNOTATION_TABLES, MIGRATIONS)


def store_verdicts(root, frame: pd.DataFrame, files: list[dict], fmt: str) -> dict:
    """Store ``frame`` (judge, item_id, verdict, answer, path, row) read from ``files`` (path,
    sha256, rows) in one transaction; returns counts: stored, dropped (verdicts the same files
    brought before and no longer hold), repeated (a judge's further verdicts on an item, here or
    from other files)."""
    paths = [f["path"] for f in files]
    with open_verdicts(root) as ws, ws.transaction():
        marks = ",".join("?" * len(paths))
        key = "judge || char(0) || item_id || char(0) || verdict"
        before = {r[0] for r in ws.conn.execute(f"SELECT {key} FROM verdicts WHERE path IN ({marks})", paths)}
        ws.conn.execute(f"DELETE FROM verdicts WHERE path IN ({marks})", paths)
        others = {tuple(r) for r in ws.conn.execute("SELECT judge, item_id FROM verdicts").fetchall()}
        stamp = now()
        ws.conn.executemany("INSERT OR REPLACE INTO verdict_files VALUES (?, ?, ?, ?, ?)",
                            [(f["path"], f["sha256"], f["rows"], fmt, stamp) for f in files])
        ws.conn.executemany(
            "INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(r.judge, r.item_id, r.verdict, None if pd.isna(r.answer) else int(r.answer), r.path, int(r.row), stamp)
             for r in frame.itertuples(index=False)])
    now_held = {"\0".join(t) for t in zip(frame["judge"], frame["item_id"], frame["verdict"])}
    pairs = pd.Series(list(zip(frame["judge"], frame["item_id"])))
    return {"stored": len(frame), "dropped": len(before - now_held),
            "repeated": int(pairs.duplicated().sum() + sum(1 for p in set(pairs) if p in others))}


def read_verdicts(ws: Workspace) -> pd.DataFrame:
    """The imported verdicts: judge, item_id, verdict, answer, path, row (none before an import)."""
    if "verdicts" not in ws.tables():
        return pd.DataFrame(columns=["judge", "item_id", "verdict", "answer", "path", "row"])
    return pd.read_sql_query("SELECT judge, item_id, verdict, answer, path, row FROM verdicts "
                             "ORDER BY judge, item_id", ws.conn)


def all_verdicts(ws: Workspace, items: list[dict]) -> pd.DataFrame:
    """Every verdict the workspace holds on ``items``, as ``curate.validity.judges.COLUMNS``:
    imported (kind ``judge``), people's in review (``reviewer``), the annotators' (``annotator``)."""
    imported = read_verdicts(ws)
    frames = [pd.DataFrame({"source": imported["judge"], "kind": "judge", "item_id": imported["item_id"],
                            "verdict": imported["verdict"], "answer": imported["answer"]})]
    if "annotations" in ws.tables():
        frames.append(annotation_verdicts(read_annotations(ws), {it["item_id"]: it["gold"] for it in items}))
    out = pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) else frames[0]
    return out[out["item_id"].isin({it["item_id"] for it in items})].reset_index(drop=True)


def annotation_verdicts(records: pd.DataFrame, gold: dict) -> pd.DataFrame:
    """One verdict per (annotator, item) from its valid records (the module docstring)."""
    found: dict[tuple[str, str], tuple[str, int | None]] = {}
    for rec in records[records["status"] == "valid"].itertuples(index=False):
        key = (rec.annotator, rec.item_id)
        verdict = record_verdict(rec.round, rec.result, gold.get(rec.item_id))
        if verdict is not None and (key not in found or found[key][0] == "ok"):
            found[key] = verdict
    return pd.DataFrame([{"source": a, "kind": "reviewer" if a.startswith(REVIEWER) else "annotator", "item_id": i,
                          "verdict": v, "answer": answer} for (a, i), (v, answer) in found.items()],
                        columns=["source", "kind", "item_id", "verdict", "answer"])


def record_verdict(round_: int, result: dict | None, gold: int | None) -> tuple[str, int | None] | None:
    """(verdict, the option called right or None) of one valid annotation record; None when it
    says nothing either way."""
    if not result:
        return None
    if round_ == 2:
        if gold is not None and result.get("best") is not None and result["best"] != gold:
            return "wrong-key", int(result["best"])
        if result.get("equally_good"):
            return "several-correct", None
        if result.get("all_implausible"):
            return "no-right-answer", None
        return "ok", None
    labels = set(result.get("labels") or ())
    if labels & set(UNCLEAR_LABELS):
        return "unclear", None
    if SEVERAL_LABEL in labels:
        return "several-correct", None
    return "ok", None
