"""Writing tables users take away: jsonl, parquet or csv, chosen by the file extension."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from curate.core.atomic import atomic_path
from curate.core.errors import CurateError

FORMATS = (".jsonl", ".parquet", ".csv")


def write_records(records: list[dict], out: str | Path, *, columns=None) -> Path:
    """Write ``records`` to ``out`` atomically. Nested values stay nested in jsonl and parquet;
    csv gets them as JSON strings. Parquet cannot hold a record with no fields, so a column whose
    every value is an empty mapping (items without native ids) is written as nulls, nor a column
    whose values have no one Arrow type (native ids mixing numbers and text, an integer beyond 64
    bits), which is written as JSON text. ``columns`` names the columns of an empty table (a CSV
    with its header, a parquet file with its schema), which has no record to take them from."""
    out = Path(out)
    ext = out.suffix.lower()
    if ext not in FORMATS:
        raise CurateError(f"{out}: unsupported export format {ext or '(none)'}; use {', '.join(FORMATS)}")
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
            pd.DataFrame.from_records(flat, columns=None if flat else columns).to_csv(tmp, index=False)
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

