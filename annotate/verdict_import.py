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
from curate.core.errors import CurateError, InputError
from curate.core.names import model_name
from curate.items.references import KINDS, OPTION_KINDS, CellError, ItemRefs, OptionRefs, items_of, options_of
from curate.validity.judges import VERDICTS
from scoring.answer_imports._cells import columns
from scoring.answer_imports._match import file_record, short

DESCRIPTION = ("a table of judge, item (id, the benchmark's own id, or row), verdict (ok, error, wrong-key, "
               "several-correct, no-right-answer, unclear) and optional answer: .csv, .jsonl/.json or .parquet")
COLUMNS = ("judge", "item", "verdict", "answer")
#: Bounds of one import, as an answers table's: bytes per file (after decompression), verdicts in all.
MAX_BYTES = 256 * 1024 * 1024
MAX_ROWS = 2_000_000


def import_verdicts(root, paths, *, fmt: str = "table", judge: str | None = None) -> dict:
    """Read every file, check every row, then store them all (or nothing); returns the counts."""
    with open_verdicts(root) as ws:
        refs = ItemRefs(ws.items())
    frames, files, total = [], [], 0
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            raise CurateError(f"{path}: --format table reads files (.csv, .jsonl, .json, .parquet), not folders")
        cells, rows, _ = columns(path, COLUMNS, max_bytes=MAX_BYTES, max_rows=MAX_ROWS - total)
        if not rows:
            raise CurateError(f"{path}: the table has no rows; nothing was imported")
        needed = [c for c in ("item", "verdict") + (() if judge else ("judge",)) if c not in cells]
        if needed:
            raise InputError(f"has no column {', '.join(map(repr, needed))} (a verdict table has columns judge, item, "
                             "verdict and optionally answer" + ("; or give --judge" if "judge" in needed else "")
                             + "); nothing was imported", path=str(path))
        total += rows
        record = file_record(path)
        frames.append(read_file(path, cells, rows, refs, judge).assign(path=record["path"]))
        files.append(record | {"rows": rows})
    frame = pd.concat(frames, ignore_index=True)
    counts = store_verdicts(root, frame, files, fmt)
    per_judge = frame.groupby("judge")["verdict"].agg(items="size", broken=lambda v: int((v != "ok").sum()))
    return counts | {"judges": per_judge.reset_index().to_dict("records"), "files": len(files)}


def read_file(path: Path, cells: dict, rows: int, refs: ItemRefs, judge: str | None) -> pd.DataFrame:
    """One file's rows checked: judge, item_id, verdict, answer and row; the first bad cell refused."""
    try:
        items = items_of(cells["item"], refs)
    except CellError as exc:
        _refused(path, exc, "item", KINDS)
    try:
        answers = options_of(items, cells.get("answer", [None] * rows), reader=OptionRefs())
    except CellError as exc:
        _refused(path, exc, "answer", OPTION_KINDS)
    names: dict = {}
    out = []
    for n in range(rows):
        verdict = str(cells["verdict"][n] or "").strip().lower().replace("_", "-")
        if verdict not in VERDICTS:
            raise InputError(f"{short(cells['verdict'][n])} is not one of {', '.join(VERDICTS)}; nothing was imported",
                             path=str(path), row=n, field="verdict")
        out.append((judge or _judge(cells["judge"][n], names, path, n), items[n]["item_id"], verdict, answers[n], n))
    return pd.DataFrame(out, columns=["judge", "item_id", "verdict", "answer", "row"])


def _judge(value, names: dict, path: Path, row: int) -> str:
    """A judge cell as its name, checked as a model name is (each distinct cell once)."""
    if value not in names:
        try:
            names[value] = model_name(value if isinstance(value, str) else "")
        except ValueError as exc:
            raise InputError(f"{short(value)} is not a judge's name: it {exc}; nothing was imported",
                             path=str(path), row=row, field="judge") from None
    return names[value]


def _refused(path: Path, exc: CellError, field: str, kinds: tuple[str, ...]):
    """A cell no way reads, or two ways read differently: one line naming the file, row and field."""
    advice = "" if not exc.readings else " (it reads as " + " and as ".join(k for k in kinds if k in exc.readings) + ")"
    raise InputError(f"{exc}{advice}; nothing was imported", path=str(path), row=exc.index, field=field) from None
