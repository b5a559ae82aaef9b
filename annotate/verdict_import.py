"""`curate import-verdicts --format table`: verdicts on items from a table (CSV, JSON Lines or a
JSON array, parquet), one row per verdict, with the columns

- ``judge``: who judged (an LLM judge, another audit, a reviewer working elsewhere); or give
  ``--judge`` for a table of one judge without the column;
- ``item``: the workspace's item id, the benchmark's own id (a column ``curate init`` kept as the
  item's id, e.g. ``abstract_algebra/0``), or the item's row (0-based, in the order ``curate init``
  read them);
- ``verdict``: ``ok``, ``error``, ``wrong-key``, ``several-correct``, ``no-right-answer`` or
  ``unclear`` (case and ``_`` for ``-`` aside);
- ``answer`` (optional): the option the judge calls right, as its 0-based index, its letter or
  its text; an empty cell says nothing.

Other columns are ignored. An item no id, own id or row names (the closest id is named), an
unknown verdict or an answer that is not one of the item's options (or reads as two of them) is
refused in one line naming the file, the row (0-based, the header not counted) and the field,
and nothing is stored (``annotate.verdict_store.store_verdicts`` stores all of it in one
transaction). A judge judging one item twice keeps both verdicts (the summary counts them).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from annotate.verdict_store import open_verdicts, store_verdicts
from curate.core.errors import CurateError
from curate.validity.judges import VERDICTS
from scoring.answer_imports._match import Items, file_record, letter_index, option_of
from scoring.answer_imports.table import read_rows

DESCRIPTION = ("a table of judge, item (id, the benchmark's own id, or row), verdict (ok, error, wrong-key, "
               "several-correct, no-right-answer, unclear) and optional answer: .csv, .jsonl/.json or .parquet")
FORMATS = {"table": DESCRIPTION}
#: Rows read from one import at most: a table that is not a verdict table (or /dev/zero) is refused early.
MAX_ROWS = 2_000_000


def import_verdicts(root, paths, *, fmt: str = "table", judge: str | None = None) -> dict:
    """Read every file, check every row, then store them all (or nothing); returns the counts."""
    with open_verdicts(root) as ws:
        items = Items(ws.items())
    rows, files = [], []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            raise CurateError(f"{path}: --format table reads files (.csv, .jsonl, .json, .parquet), not folders")
        table = read_rows(path)
        if not table:
            raise CurateError(f"{path}: the table has no rows; nothing was imported")
        if len(rows) + len(table) > MAX_ROWS:
            raise CurateError(f"{path}: more than {MAX_ROWS} verdicts in one import; nothing was imported")
        needed = [c for c in ("item", "verdict") + (() if judge else ("judge",)) if c not in table[0]]
        if needed:
            raise CurateError(f"{path}: no column {', '.join(map(repr, needed))} (a verdict table has columns judge, "
                              "item, verdict and optionally answer" + ("; or give --judge" if "judge" in needed else "")
                              + "); nothing was imported")
        record = file_record(path)
        for n, row in enumerate(table):
            rows.append(verdict_row(row, f"{path}, row {n}", items, judge) | {"path": record["path"], "row": n})
        files.append(record | {"rows": len(table)})
    frame = pd.DataFrame(rows, columns=["judge", "item_id", "verdict", "answer", "path", "row"])
    counts = store_verdicts(root, frame, files, fmt)
    per_judge = frame.groupby("judge")["verdict"].agg(items="size", broken=lambda v: int((v != "ok").sum()))
    return counts | {"judges": per_judge.reset_index().to_dict("records"), "files": len(files)}


def verdict_row(row: dict, where: str, items: Items, judge: str | None) -> dict:
    """One row checked: its judge, item, verdict and answer, or a one-line refusal."""
    who = judge if judge else _text(row.get("judge"))
    if not who:
        _fail(where, "judge", "empty: name who judged")
    item = find_item(items, row.get("item"), where)
    verdict = _text(row.get("verdict")).lower().replace("_", "-")
    if verdict not in VERDICTS:
        _fail(where, "verdict", f"{row.get('verdict')!r} is not one of {', '.join(VERDICTS)}")
    return {"judge": who, "item_id": item["item_id"], "verdict": verdict,
            "answer": answer_index(item, row.get("answer"), where)}


def find_item(items: Items, cell, where: str) -> dict:
    """The item a cell names: a workspace id, the benchmark's own id, or a row number."""
    text = _text(cell)
    if not text:
        _fail(where, "item", "empty")
    if text in items.by_id:
        return items.by_id[text]
    native = items.by_native_id(text)
    if len(native) == 1:
        return native[0]
    if len(native) > 1:
        _fail(where, "item", f"{text!r} is the own id of {len(native)} items ({native[0]['item_id']}, ...)")
    if text.isascii() and text.isdigit() and int(text) in items.by_row:
        return items.by_row[int(text)]
    _fail(where, "item", f"{text!r} is no item id, own id or row of the workspace{closest_id(items, text)}")


def closest_id(items: Items, text: str) -> str:
    """"; closest: ID" for the id (workspace or own) most like ``text``, or nothing."""
    from rapidfuzz import process

    names = list(items.by_id) + list(items.by_native)
    best = process.extractOne(text, names)
    return f"; closest: {best[0]}" if best else ""


def answer_index(item: dict, cell, where: str) -> int | None:
    """The option a judge calls right: a 0-based index, a letter or an option's text; None when
    empty. A cell that reads two ways (a number that is also another option's text) is refused."""
    text = _text(cell)
    if not text:
        return None
    readings = set(option_of(item, text))
    if text.isascii() and text.isdigit():
        readings.add(int(text))
    letter = letter_index(text)
    if letter is not None:
        readings.add(letter)
    readings = {r for r in readings if 0 <= r < len(item["options"])}
    if len(readings) != 1:
        why = "reads as several options (" + ", ".join(map(str, sorted(readings))) + ")" if readings else \
            f"is not one of the item's {len(item['options'])} options (index, letter or text)"
        _fail(where, "answer", f"{text!r} {why}")
    return readings.pop()


def _text(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value).strip()


def _fail(where: str, field: str, message: str):
    raise CurateError(f"{where}, field '{field}': {message}; nothing was imported")
