"""Text data files as their authors wrote them: encoding, CSV delimiter, cells kept as text.

- Encoding: the one given, else UTF-8 (a byte-order mark is dropped), else, for a file with no
  UTF-8 multi-byte character at all (an 8-bit legacy file such as cp1252), charset-normalizer's
  best reading among the common legacy encodings. A file that is UTF-8 but for a few bytes is refused with the line at fault rather
  than guessed at, since any guess would garble its UTF-8 characters.
- CSV delimiter: the one given, else the one candidate (, ; tab |) that splits every sampled
  record, header included, into the same number of fields (more than one). A header rarely
  holds a comma, so a semicolon file whose cells hold commas (list literals, prose) is still
  read as semicolon-separated; when no single candidate fits, the error asks for --delimiter.
- CSV cells are read as text, never converted: "2.50", "007" and "1e3" stay as written. Lines may
  end in \\n, \\r\\n or a lone \\r; a header naming one column twice is refused.
"""
from __future__ import annotations

import bz2
import csv
import gzip
import io
import lzma
import re
import zlib
from pathlib import Path

from curate.errors import InputError

DELIMITERS = (",", ";", "\t", "|")
#: The 8-bit and East Asian legacy encodings a file may be in, most common first.
LEGACY = ("cp1252", "latin_1", "iso8859_15", "cp1250", "cp1251", "cp1253", "cp1254", "cp1255", "cp1256", "cp1257",
          "cp1258", "mac_roman", "koi8_r", "cp437", "cp850", "shift_jis", "cp932", "gb18030", "big5", "euc_kr",
          "euc_jp")
SAMPLE_RECORDS = 200
_UTF8_MULTIBYTE = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")


def read_bytes(path: Path) -> bytes:
    """The file's bytes, decompressed by its suffix (.gz, .bz2, .xz, .zst). A truncated or
    corrupt compressed file is an InputError: the decompressors raise EOFError, OSError,
    ValueError or their own errors, and click would take an EOFError for Ctrl-D ("Aborted!")."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot be read: {exc.strerror or exc}", path=str(path)) from None
    name = path.name.lower()
    try:
        if name.endswith(".gz"):
            return gzip.decompress(raw)
        if name.endswith(".bz2"):
            return bz2.decompress(raw)
        if name.endswith(".xz"):
            return lzma.decompress(raw)
        if name.endswith(".zst"):
            return _zstd_decompress(raw, path)
    except (EOFError, OSError, ValueError, zlib.error, lzma.LZMAError) as exc:
        raise InputError(f"cannot be read to the end ({type(exc).__name__}: {exc}); the file is truncated or "
                         "corrupt", path=str(path)) from None
    return raw


def _zstd_decompress(raw: bytes, path: Path) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise InputError("reading .zst files needs the zstandard package (pip install zstandard)",
                         path=str(path)) from None
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)) as fh:
            return fh.read()
    except zstandard.ZstdError as exc:
        raise ValueError(str(exc)) from None


def decode(raw: bytes, where: str, encoding: str | None = None) -> tuple[str, str]:
    """(text, encoding used) of ``raw``; an InputError naming ``where`` and the line at fault."""
    if encoding:
        try:
            return raw.decode(encoding), encoding
        except LookupError:
            raise InputError(f"unknown encoding {encoding!r}", path=where, field="encoding") from None
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise InputError(f"line {line} is not valid {encoding} (byte {exc.start})", path=where) from None
    try:
        return raw.decode("utf-8-sig"), "utf-8"
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        if _UTF8_MULTIBYTE.search(raw):
            raise InputError(f"line {line} is not valid UTF-8 (byte {exc.start}), though the rest of the file is; "
                             "fix the file or name its encoding with --encoding", path=where) from None
    from charset_normalizer import from_bytes

    # charset-normalizer ranks encodings by how garbled and how coherent the text reads; among
    # equally good readings the more common legacy encoding wins (cp1252 before cp1250 or cp775).
    matches = list(from_bytes(raw, cp_isolation=list(LEGACY)))
    if not matches:
        raise InputError("could not tell the file's encoding; name it with --encoding", path=where)
    rank = {name: i for i, name in enumerate(LEGACY)}
    best = min(matches, key=lambda m: (round(m.chaos, 3), -round(m.coherence, 3), rank.get(m.encoding, len(rank))))
    return str(best), best.encoding


def sniff_delimiter(text: str, where: str) -> str:
    """The one delimiter that splits every sampled record (header included) into the same
    number of fields; an InputError asking for --delimiter when none or several do."""
    sampled = {d: [r for _, r in zip(range(SAMPLE_RECORDS), _records(text, d)) if r] for d in DELIMITERS}
    fitting = {d for d, records in sampled.items() if len({len(r) for r in records}) == 1 and len(records[0]) > 1}
    if len(fitting) == 1:
        return next(iter(fitting))
    shown = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}
    if not fitting:
        # Most often a ragged row: name it, by the delimiter that splits the header the most.
        header_delimiter = max(DELIMITERS, key=lambda d: len(sampled[d][0]) if sampled[d] else 0)
        records = sampled[header_delimiter]
        if records and len(records[0]) > 1:
            row = next(i for i, r in enumerate(records[1:]) if len(r) != len(records[0]))
            raise InputError(f"has {len(records[row + 1])} fields but the header has {len(records[0])} (delimiter "
                             f"{header_delimiter!r}, the header's); fix the row, or name another delimiter with "
                             "--delimiter", path=where, row=row)
        raise InputError("could not tell the CSV delimiter: none of comma, semicolon, tab or pipe splits every "
                         "row into the same number of fields; name it with --delimiter", path=where)
    both = " and ".join(shown[d] for d in DELIMITERS if d in fitting)
    raise InputError(f"could not tell the CSV delimiter: {both} both split every row evenly; name it with --delimiter",
                     path=where)


def _records(text: str, delimiter: str):
    """CSV records of ``text``; newline="" lets the csv module end lines at \\n, \\r\\n or a lone
    \\r (old Mac files) and keep line breaks inside quoted cells as written."""
    return csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)


def read_csv(path: Path, *, delimiter: str | None = None, encoding: str | None = None) -> tuple[list[dict], dict]:
    """The rows of a CSV file as dicts of text, and what was used to read it
    (``{"encoding", "delimiter"}``)."""
    import pandas as pd

    where = str(path)
    text, used = decode(read_bytes(path), where, encoding)
    if not text.strip():
        raise InputError("the file is empty", path=where)
    delimiter = delimiter or sniff_delimiter(text, where)
    records = (r for r in _records(text, delimiter) if r)  # blank lines skipped, as pandas skips them
    header = next(records, [])
    for j, name in enumerate(header):
        if name and name in header[:j]:  # pandas would rename the second one "name.1" silently
            raise InputError(f"the header names column {name!r} twice (columns {header.index(name) + 1} and {j + 1}); "
                             "rename one", path=where)
    # pandas reads a first row with one field too many as an index column, and pads short rows:
    # both would put values under the wrong names without a word.
    for row, record in enumerate(records):
        if len(record) != len(header):
            raise InputError(f"has {len(record)} fields but the header has {len(header)} (delimiter {delimiter!r})",
                             path=where, row=row)
    try:
        frame = pd.read_csv(io.StringIO(text), sep=delimiter, dtype=str, keep_default_na=False, na_filter=False)
    except (pd.errors.ParserError, ValueError) as exc:
        message = str(exc).strip().splitlines()[-1]
        raise InputError(f"not readable as CSV with delimiter {delimiter!r}: {message}; name another with "
                         "--delimiter", path=where) from None
    unnamed = [c for c in frame.columns if str(c).startswith("Unnamed: ")]
    if unnamed:
        column = frame.columns.get_loc(unnamed[0]) + 1
        raise InputError(f"the header has {len(unnamed)} empty column name(s) (first: column {column})", path=where)
    return frame.to_dict("records"), {"encoding": used, "delimiter": delimiter}
