"""Text data files as their authors wrote them: encoding, CSV delimiter, cells kept as text.

- Encoding: the one given, else the one a byte-order mark names (UTF-8, UTF-16, UTF-32), else
  UTF-8, else, for a file with no line of UTF-8 multi-byte text (an 8-bit legacy file such as
  cp1252, or Shift-JIS), the one legacy encoding whose reading is unambiguous: several readings
  that give different text (ISO-8859-2 and cp1250 share most Polish letters, a French file reads
  as letters in cp1250 too) are refused, naming them and a word they disagree on, rather than
  guessed between. In English text, a letter where another reading has the apostrophe of a
  contraction or possessive (Mac Roman's "sister’s" read as cp850's "sisterıs") is garbling;
  charset-normalizer alone reads such a file as cp1250 ("sisterŐs"). A file that is UTF-8
  but for some lines is refused with the lines at fault, since any guess would garble its UTF-8
  characters.
- CSV delimiter: the one given, else the one candidate (, ; tab |) that splits every sampled
  record, header included, into the same number of fields (more than one). A header rarely
  holds a comma, so a semicolon file whose cells hold commas (list literals, prose) is still
  read as semicolon-separated; when no single candidate fits, the error asks for --delimiter.
- CSV cells are read as text, never converted: "2.50", "007" and "1e3" stay as written. Lines may
  end in \\n, \\r\\n or a lone \\r; a header naming one column twice is refused.
"""
from __future__ import annotations

import bz2
import codecs
import csv
import functools
import gzip
import hashlib
import io
import lzma
import re
import unicodedata
import zlib
from collections import Counter
from pathlib import Path

from curate.core.errors import InputError

DELIMITERS = (",", ";", "\t", "|")
#: The 8-bit and East Asian legacy encodings a file may be in, most common first.
LEGACY = ("cp1252", "latin_1", "iso8859_15", "cp1250", "iso8859_2", "cp1251", "cp1253", "cp1254", "cp1255", "cp1256",
          "cp1257", "cp1258", "mac_roman", "koi8_r", "cp437", "cp850", "shift_jis", "cp932", "gb18030", "big5", "euc_kr",
          "euc_jp")
SAMPLE_RECORDS = 200
#: Byte-order marks, the longer first (UTF-32-LE's begins with UTF-16-LE's).
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")  # no text holds these (a form feed it may)
#: A word holding a byte above 127, cut at white space and at the punctuation !"#$%&'()*+,-./:;<=>?,
#: which never falls inside a character of a LEGACY encoding (a trail byte is 0x40 or more, or a digit).
_WORD = re.compile(rb"(?<![^\s!-/:-?])[^\s!-/:-?\x80-\xff]*+[\x80-\xff][^\s!-/:-?]*")
_MULTI_BYTE = {"shift_jis", "cp932", "gb18030", "big5", "euc_kr", "euc_jp"}
_ASCII_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_CJK = ("CJK", "HIRAGANA", "KATAKANA", "HALFWIDTH", "FULLWIDTH", "IDEOGRAPHIC")
_MIXABLE = (frozenset(("LATIN", "CJK")), frozenset(("LATIN", "HANGUL")))  # scripts written together in one word
_SYMBOL_LETTERS = "ªºµ"  # letters to Unicode, written as symbols after numbers (1º, 5µm)
_IN_WORD = "’‘ʼ′‐‑‒–—·…"  # punctuation that typography puts inside words (you’ve, l·l)
#: An English contraction or possessive written with a typographic apostrophe (sister’s, don’t).
_CONTRACTION = re.compile(r"[a-z]+([’ʼ])(?:s|t|d|m|ll|re|ve)", re.IGNORECASE)


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
    """(text, encoding used) of ``raw``: the encoding named, else the one a byte-order mark
    names, else UTF-8, else the one legacy encoding whose reading is unambiguous
    (``plausible_readings``); an InputError naming ``where`` and the lines at fault otherwise."""
    if encoding:
        return _decode_as(raw, where, encoding)
    for bom, name in _BOMS:
        if raw.startswith(bom):
            return _decode_as(raw, where, name)
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        error = exc
    readings = plausible_readings(raw)
    if _utf8_text_lines(raw) or not readings:  # UTF-8 but for some lines: a guess would garble the rest
        raise InputError(not_utf8_message(raw, error, readings), path=where)
    if len(readings) > 1:
        line, word = _first_difference(raw, readings[:2])
        shown = ", ".join(f"{r[0]} {word.decode(r[0])[:40]!r}" for r in readings)
        raise InputError(f"is not UTF-8, and reads as text in {len(readings)} encodings that disagree (line {line}: "
                         f"{shown}); name the right one with --encoding", path=where)
    return raw.decode(readings[0][0]), codecs.lookup(readings[0][0]).name


def _decode_as(raw: bytes, where: str, encoding: str) -> tuple[str, str]:
    """``raw`` in ``encoding`` (a byte-order mark dropped), and the codec's own name for it."""
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        raise InputError(f"unknown encoding {encoding!r}", path=where, field="encoding") from None
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"line {line} is not valid {encoding} (byte {exc.start})", path=where) from None
    return text.removeprefix("\ufeff"), "utf-8" if name == "utf-8-sig" else name


def not_utf8_message(raw: bytes, error: UnicodeDecodeError, readings: list[list[str]] | None = None) -> str:
    """What is wrong with ``raw`` as UTF-8, truly: the first bad line, how many others there are
    and how many lines are UTF-8 text; and the legacy encodings it reads as text in, if any
    (``readings``, when known)."""
    lines = raw.split(b"\n")
    bad = [i for i, line in enumerate(lines, start=1) if not _is_utf8(line)]
    first = raw.count(b"\n", 0, error.start) + 1
    if len(bad) == 1:
        told = "though the rest of the file is"
    else:
        others = ", ".join(str(i) for i in bad[1:6]) + (", ..." if len(bad) > 6 else "")
        good = len(_utf8_text_lines(raw))
        told = (f"nor are {len(bad) - 1} other lines ({others})"
                + (f"; {good} lines hold UTF-8 text" if good else "; the file is not UTF-8"))
    readings = plausible_readings(raw) if readings is None else readings
    hint = f" (it reads as text in {', '.join(r[0] for r in readings)})" if readings else ""
    return (f"line {first} is not valid UTF-8 (byte {error.start}), {told}; fix the file, or name its "
            f"encoding with --encoding{hint}")


def _is_utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _utf8_text_lines(raw: bytes) -> list[bytes]:
    """The lines of ``raw`` holding UTF-8 multi-byte characters: a legacy file seldom has one."""
    return [line for line in raw.split(b"\n") if not line.isascii() and _is_utf8(line)]


def plausible_readings(raw: bytes) -> list[list[str]]:
    """The readings of ``raw`` that could be the right one, each as the LEGACY encodings that give
    it. A reading is dropped when it decodes to control characters, when another reading is never
    more garbled (``_garbled``, and in English text ``_apostrophes_read_as_letters``) on the words
    where the two differ and sometimes less, and, among those left, when charset-normalizer finds
    it messy (its own threshold: it tells readings in the wrong script apart, not one Latin code
    page from another)."""
    groups = _readings(raw)
    if len(groups) < 2:
        return groups
    words = _sample_words(raw)
    read = {g[0]: [w.decode(g[0], "replace") for w in words] for g in groups}
    garbled = {g[0]: {i for i, word in enumerate(read[g[0]]) if _garbled(word)} for g in groups}
    for name, indexes in _apostrophes_read_as_letters(raw, read).items():
        garbled[name] |= indexes

    def beats(a: str, b: str) -> bool:
        return bool(garbled[b] - garbled[a]) and not garbled[a] - garbled[b]

    left = [g for g in groups if not any(beats(h[0], g[0]) for h in groups if h is not g)]
    if len(left) > 1:
        from charset_normalizer.md import mess_ratio

        differ = [i for i in range(len(words)) if len({read[g[0]][i] for g in left}) > 1]
        left = [g for g in left if mess_ratio(" ".join(read[g[0]][i] for i in differ)) < 0.2] or left
    return left


def _apostrophes_read_as_letters(raw: bytes, read: dict[str, list[str]]) -> dict[str, set[int]]:
    """For each reading, the words where it has a letter and another reading the apostrophe of an
    English contraction or possessive (Mac Roman's 0xD5 in "sister’s" is cp850's ı: "sisterıs"),
    in a file whose ASCII text, the text every reading shares, charset-normalizer finds English.
    English writes no letter there; another language may ("país" in Mac Roman is "pa’s" in cp1252)."""
    found: dict[str, set[int]] = {name: set() for name in read}
    contractions = [(i, name, match) for name, words in read.items() for i, word in enumerate(words)
                    if (match := _CONTRACTION.fullmatch(word))]
    if not contractions or not _ascii_text_is_english(raw):
        return found
    for i, name, match in contractions:
        for other, words in read.items():
            if len(words[i]) == len(read[name][i]) and words[i][match.start(1)].isalpha():
                found[other].add(i)
    return found


def _ascii_text_is_english(raw: bytes, sample: int = 1_000_000) -> bool:
    """Whether charset-normalizer's language of the ASCII bytes of ``raw`` (its first ``sample``)
    is English. A reading's own language is no guide: a small English file read in Mac Roman
    is "German" to it."""
    from charset_normalizer.cd import coherence_ratio

    languages = coherence_ratio(raw[:sample].decode("ascii", "ignore"))
    return bool(languages) and languages[0][0] == "English"


def _readings(raw: bytes) -> list[list[str]]:
    """The LEGACY encodings that decode ``raw`` to text without control characters, grouped by the
    text they give (most common encoding first). A one-byte encoding's reading is told by the
    bytes above 127 that the file holds, so only the multi-byte ones decode the whole file."""
    if _ASCII_CONTROL.search(raw):
        return []
    high = bytes(b for b in range(0x80, 0x100) if bytes((b,)) in raw)
    groups: dict[object, list[str]] = {}
    for name in LEGACY:
        try:
            text = raw.decode(name) if name in _MULTI_BYTE else high.decode(name)
        except UnicodeDecodeError:
            continue
        if not _CONTROL.search(text):
            key = hashlib.blake2b(text.encode("utf-8")).digest() if name in _MULTI_BYTE else text
            groups.setdefault(key, []).append(name)
    return list(groups.values())


def _sample_words(raw: bytes, per_byte: int = 20) -> list[bytes]:
    """Distinct words of ``raw`` holding bytes above 127, in file order, enough that every such
    byte is in ``per_byte`` of them (or all it is in): where readings differ, they differ by
    those bytes, so each difference is judged on as many words in a large file as in a small."""
    seen: Counter = Counter()
    met, words = set(), []
    for word in _WORD.findall(raw):
        if word in met:
            continue
        met.add(word)
        high = {b for b in word if b > 0x7F}
        if any(seen[b] < per_byte for b in high):
            words.append(word)
            seen.update(high)
    return words


def _first_difference(raw: bytes, groups: list[list[str]]) -> tuple[int, bytes]:
    """The line and the first word of ``raw`` that ``groups`` do not all read alike."""
    for match in _WORD.finditer(raw):
        if len({match.group().decode(g[0], "replace") for g in groups}) > 1:
            return raw.count(b"\n", 0, match.start()) + 1, match.group()
    return 1, b""  # not reached: readings that differ differ on some byte above 127, so in some word


def _garbled(word: str) -> bool:
    """Whether ``word`` shows what a wrong code page makes of letters: a symbol between two
    letters (gę¶l±), letters of two scripts run together (Schrцdinger), a capital after a small
    letter (jaĽń), a letter or an accent glued to a number (25şC), an accent on no letter."""
    before = previous = ""
    last = ""
    for ch in word:
        kind = _kind(ch)
        if kind == "accent":
            if not _is_letter(previous):
                return True
            continue
        if _is_letter(previous) and _is_letter(kind):
            if previous != kind and frozenset((previous, kind)) not in _MIXABLE:
                return True
            if ch.isupper() and not ch.isascii() and last.islower():
                return True
        if previous == "digit" and _is_letter(kind) and not ch.isascii():
            return True
        if previous == "symbol" and _is_letter(before) and _is_letter(kind):
            return True
        before, previous, last = previous, kind, ch
    return False


@functools.lru_cache(maxsize=4096)
def _kind(ch: str) -> str:
    """A letter's script (``LATIN``, ``CYRILLIC``, ``CJK`` for Chinese characters and kana, ...),
    or ``digit``, ``accent`` (a combining one), ``symbol`` (a non-ASCII symbol, number or
    punctuation that does not belong inside a word), or "" (anything else)."""
    name, category = unicodedata.name(ch, ""), unicodedata.category(ch)
    if name.startswith(_CJK):
        return "CJK" if category[0] in "LM" else ""
    if category == "Mn":
        return "accent" if name.startswith("COMBINING") else name.split()[0]
    if ch.isalpha() and ch not in _SYMBOL_LETTERS and not name.startswith("MODIFIER LETTER"):
        return name.split()[0]
    if ch.isascii():
        return "digit" if ch.isdigit() else ""
    return "symbol" if category[0] in "SNPL" and ch not in _IN_WORD else ""


def _is_letter(kind: str) -> bool:
    return kind not in ("", "digit", "symbol", "accent")


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
