"""An answers table's cells, column by column, read within bounds: a file that is no regular file
(``/dev/zero``, a pipe) is refused before a byte is read, one larger than the byte limit (after
decompression, read no further than the limit) or holding more rows than the row limit is refused
naming the limit, and CSV rows are parsed one by one into the columns asked for (no frame of every
row). Cells are kept as written: CSV cells as text, JSON and parquet values as they are."""
from __future__ import annotations

import csv
import io
import os
import stat
from pathlib import Path

from curate.core.errors import InputError
from curate.core.reading import read_bounded, size_text

COMPRESSED = (".gz", ".bz2", ".xz", ".zst")
WHAT = "an answers table"


def too_large(limit: int) -> str:
    return (f"is larger than {size_text(limit)}, the size limit of {WHAT}; split it into several files and import "
            f"them one by one")


def regular_file(path: Path, limit: int) -> None:
    """Refuse what is no regular file (a device such as /dev/zero never ends) or is larger than
    ``limit`` bytes, before reading it."""
    where = str(path)
    try:
        info = os.stat(path)
    except OSError as exc:
        raise InputError(f"cannot be read: {exc.strerror or exc}", path=where) from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError("is not a regular file (a device, a pipe or a socket); save the table to a file and import "
                         "that", path=where)
    if info.st_size > limit:
        raise InputError(too_large(limit), path=where)


def table_bytes(path: Path, limit: int) -> bytes:
    """The file's bytes, decompressed by its suffix, at most ``limit`` of them."""
    regular_file(path, limit)
    try:
        raw = read_bounded(path, limit, WHAT)
    except InputError as exc:  # the file grew since
        raise (InputError(too_large(limit), path=str(path)) if "size limit" in str(exc) else exc) from None
    name = path.name.lower()
    return _decompressed(raw, name, limit, str(path)) if name.endswith(COMPRESSED) else raw


def _decompressed(raw: bytes, name: str, limit: int, where: str) -> bytes:
    """``raw`` decompressed, reading no more than ``limit + 1`` bytes of what it holds."""
    import bz2
    import gzip
    import lzma
    import zlib

    try:
        if name.endswith(".gz"):
            reader = gzip.GzipFile(fileobj=io.BytesIO(raw))
        elif name.endswith(".bz2"):
            reader = bz2.BZ2File(io.BytesIO(raw))
        elif name.endswith(".xz"):
            reader = lzma.LZMAFile(io.BytesIO(raw))
        else:
            reader = _zstd_reader(raw, where)
        chunks, total = [], 0
        with reader:
            while total <= limit:
                chunk = reader.read(min(1 << 20, limit + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
    except (EOFError, OSError, ValueError, zlib.error, lzma.LZMAError) as exc:
        raise InputError(f"cannot be read to the end ({type(exc).__name__}: {exc}); the file is truncated or corrupt",
                         path=where) from None
    if total > limit:
        raise InputError(too_large(limit), path=where)
    return b"".join(chunks)


def _zstd_reader(raw: bytes, where: str):
    try:
        import zstandard
    except ImportError:
        raise InputError("reading .zst files needs the zstandard package (pip install zstandard)", path=where) from None
    return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw))


def columns(path: Path, wanted: tuple[str, ...], *, max_bytes: int, max_rows: int, encoding: str | None = None,
            delimiter: str | None = None) -> tuple[dict[str, list], int, dict]:
    """(column -> its cells for each of ``wanted`` the file has, the number of rows, what was
    used to read it: encoding and delimiter for CSV). More than ``max_rows`` rows is an InputError."""
    shared = Shared()
    name = path.name.lower()
    for suffix in COMPRESSED:
        name = name.removesuffix(suffix)
    if name.endswith((".csv", ".tsv")):
        return _csv_columns(path, wanted, max_bytes, max_rows, encoding, delimiter, shared)
    if delimiter is not None:
        raise InputError("--delimiter is for CSV tables", path=str(path), field="delimiter")
    if name.endswith((".jsonl", ".json")):
        from curate.items.sources import json_rows

        rows = json_rows(table_bytes(path, max_bytes), str(path), encoding)
        _check_rows(path, len(rows), max_rows)
        present = [c for c in wanted if c in rows[0]]
        return {c: [shared(r.get(c)) for r in rows] for c in present}, len(rows), {}
    if encoding is not None:
        raise InputError("--encoding is for CSV and JSON tables", path=str(path), field="encoding")
    if name.endswith(".parquet"):
        return _parquet_columns(path, wanted, max_bytes, max_rows, shared)
    raise InputError("not a table this format reads (.csv, .tsv, .jsonl, .json or .parquet)", path=str(path))


def _check_rows(path: Path, rows: int, max_rows: int) -> None:
    if rows > max_rows:
        raise InputError(f"holds more than {max_rows} answers, the most one import reads; split it into several "
                         f"files and import them one by one", path=str(path))


class Shared:
    """One text object for every cell of the same text, within one import (model names and runs
    repeat on every row: a million rows of one model hold its name once)."""

    def __init__(self):
        self.seen: dict[str, str] = {}

    def __call__(self, value):
        if isinstance(value, str) and len(value) <= 200 and len(self.seen) < 100_000:
            return self.seen.setdefault(value, value)
        return value


def _csv_columns(path: Path, wanted, max_bytes, max_rows, encoding, delimiter, shared):
    from curate.core.textfiles import decode, sniff_delimiter

    where = str(path)
    text, used = decode(table_bytes(path, max_bytes), where, encoding)
    if not text.strip():
        raise InputError("the file is empty", path=where)
    delimiter = delimiter or sniff_delimiter(text, where)
    records = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    n = -1
    try:
        header = next(r for r in records if r)
        for j, name in enumerate(header):
            if name and name in header[:j]:
                raise InputError(f"the header names column {name!r} twice (columns {header.index(name) + 1} and "
                                 f"{j + 1}); rename one", path=where)
        at = {c: header.index(c) for c in wanted if c in header}
        cells: dict[str, list] = {c: [] for c in at}
        n = 0
        for record in records:
            if not record:
                continue  # a blank line
            if len(record) != len(header):
                raise InputError(f"has {len(record)} fields but the header has {len(header)} (delimiter "
                                 f"{delimiter!r})", path=where, row=n)
            _check_rows(path, n + 1, max_rows)
            for c, j in at.items():
                cells[c].append(shared(record[j]))
            n += 1
    except csv.Error as exc:
        raise InputError(f"not readable as CSV with delimiter {delimiter!r}: {exc}", path=where,
                         row=n if n >= 0 else None) from None
    return cells, n, {"encoding": used, "delimiter": delimiter}


def _parquet_columns(path: Path, wanted, max_bytes, max_rows, shared):
    import pyarrow.parquet as pq

    where = str(path)
    regular_file(path, max_bytes)
    try:
        handle = pq.ParquetFile(path)
        rows = handle.metadata.num_rows
        _check_rows(path, rows, max_rows)
        present = [c for c in wanted if c in handle.schema_arrow.names]
        table = handle.read(columns=present)
    except InputError:
        raise
    except Exception as exc:  # pyarrow's errors name no file
        raise InputError(f"unreadable parquet file ({exc})", path=where) from None
    return {c: [shared(v) for v in table.column(c).to_pylist()] for c in present}, rows, {}
