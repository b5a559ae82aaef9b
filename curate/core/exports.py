"""Writing tables users take away: jsonl, parquet or csv, chosen by the file extension; and the one
CSV writer of the project (``write_csv``: exports, the report's tables, the filter's stages.csv).

CSV files are opened in spreadsheets, which run a cell starting with ``=``, ``+``, ``-`` or ``@``
as a formula (``=HYPERLINK(...)`` sends the sheet's data away; ``=cmd|...`` starts a program)
and treat a leading tab or carriage return alike. Model names and item texts come from files
anyone writes, so every text cell (and column name) starting so gets a leading ``'`` (OWASP's
rule), which a spreadsheet shows as text and hides. Numbers stay numbers: a numeric column is
written as it is, and so is a text cell that is a plain number (``-0.5``, an option's text): a
spreadsheet reads it as that number, which runs nothing. jsonl and parquet keep every text as
it is: no program runs their cells.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from curate.core.atomic import atomic_path, check_writable
from curate.core.errors import CurateError

FORMATS = (".jsonl", ".parquet", ".csv")
#: What starts a formula in a spreadsheet (OWASP's CSV injection list).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def spreadsheet_safe(value):
    """``value`` as a CSV cell may hold it: text starting (after spaces) with a formula's first
    character gets a leading ``'``, unless it is a plain number; anything else is returned as it is."""
    if isinstance(value, str) and value.lstrip(" ").startswith(FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def write_csv(frame: pd.DataFrame, path: str | Path) -> None:
    """``frame`` as CSV at ``path`` (no index), its text cells and column names ``spreadsheet_safe``:
    the project's one CSV writer (``tests/test_exports_safety.py`` finds no other)."""
    safe = frame.rename(columns=lambda c: spreadsheet_safe(str(c)) if isinstance(c, str) else c)
    carriage_return = False
    for col in safe.columns:
        if not (pd.api.types.is_numeric_dtype(safe[col]) or pd.api.types.is_bool_dtype(safe[col])):
            safe[col] = safe[col].map(spreadsheet_safe, na_action="ignore")
            carriage_return = carriage_return or bool(safe[col].map(lambda v: isinstance(v, str) and "\r" in v).any())
    # Python's CSV writer quotes a cell holding a line break of the file's line end only: with "\n"
    # a cell's lone "\r" would go out bare and end its row in every reader. RFC 4180's "\r\n" then.
    safe.to_csv(path, index=False, lineterminator="\r\n" if carriage_return else "\n")


def write_records(records: list[dict], out: str | Path, *, columns=None) -> Path:
    """Write ``records`` to ``out`` atomically. Nested values stay nested in jsonl and parquet;
    csv gets them as JSON strings. Parquet cannot hold a record with no fields, so a column whose
    every value is an empty mapping (items without native ids) is written as nulls, nor a column
    whose values have no one Arrow type (native ids mixing numbers and text, an integer beyond 64
    bits), which is written as JSON text. ``columns`` names the columns of an empty table (a CSV
    with its header, a parquet file with its schema), which has no record to take them from. A
    place that cannot be written is one CurateError line (``curate.core.atomic.check_writable``)."""
    out = Path(out)
    ext = out.suffix.lower()
    if ext not in FORMATS:
        raise CurateError(f"{out}: unsupported export format {ext or '(none)'}; use {', '.join(FORMATS)}")
    check_writable(out, file=True)
    with atomic_path(out) as tmp:
        if ext == ".jsonl":
            with open(tmp, "w", encoding="utf-8") as fh:
                for r in records:  # NaN (a missing value from a pandas frame) is not JSON: null
                    fh.write(json.dumps(_null_for_nan(r), ensure_ascii=False) + "\n")
        elif ext == ".parquet":
            frame = pd.DataFrame.from_records(records, columns=None if records else columns)
            for col in frame.columns:
                if len(frame) and frame[col].map(lambda v: isinstance(v, dict) and not v).all():
                    frame[col] = None
                elif not _arrow_can_hold(frame[col]):
                    frame[col] = frame[col].map(lambda v: json.dumps(v, ensure_ascii=False))
            frame.to_parquet(tmp, index=False)
        else:
            flat = [{k: json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v
                     for k, v in r.items()} for r in records]
            write_csv(pd.DataFrame.from_records(flat, columns=None if flat else columns), tmp)
    return out


def _arrow_can_hold(column: pd.Series) -> bool:
    import pyarrow as pa

    try:
        pa.array(column, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return False
    return True


def _null_for_nan(value):
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _null_for_nan(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_null_for_nan(v) for v in value]
    return value
