"""Reading the files people and earlier runs hand to a command: bounded in size, JSON bounded in
depth, every failure one InputError line naming the file.

Every configuration file (audit config, rules, prompt templates) and every JSON document a
command reads back (release manifests, decisions summaries, review imports, a model folder's
settings) goes through here, so none can exhaust memory or the stack:

- Size: at most ``limit + 1`` bytes are read, so ``/dev/zero``, an endless pipe or a 300 MB
  "rules file" is refused at once instead of read to the end (or until the OOM killer comes). A
  FIFO nobody writes to reads as empty rather than hanging.
- Depth: Python's JSON reader recurses once per level and stops near 1,000 with a RecursionError,
  and so do the schema checks and walks run on what it returns. A document nesting deeper than
  ``MAX_DEPTH`` levels is refused as one line, whatever its depth.

Benchmark data (`curate ingest`) has no size limit (benchmarks are large); its JSON goes through
``loads`` for the depth limit.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from curate.core.errors import InputError

MiB = 1024 * 1024
#: Hand-written configuration: audit configs, rules files, prompt templates. The study's
#: ten-stage rules file is under 3 KB, and the YAML reader refuses more than 10,000 nodes anyway.
CONFIG_LIMIT = 1 * MiB
#: JSON documents written by a command and read back, and verdict imports: a release manifest
#: lists every item id (under 50 bytes an item: HellaSwag's 10,042 items take 0.5 MB), so this
#: holds benchmarks of millions of items.
DOCUMENT_LIMIT = 256 * MiB
#: Deeper than any file the toolkit reads needs (a manifest nests 4 levels), well below the
#: depth at which Python's JSON reader and the schema checks run out of stack.
MAX_DEPTH = 100


def size_text(limit: int) -> str:
    if limit >= MiB:
        return f"{limit / MiB:g} MiB"
    return f"{limit / 1024:g} KiB" if limit >= 1024 else f"{limit} bytes"


def read_bounded(path: str | os.PathLike, limit: int, what: str, *, missing: str | None = "no such file") -> bytes:
    """The bytes of ``path``, refused when there are more than ``limit`` (``what`` names the
    kind of file in the message: "a rules file"). A missing file is an InputError saying
    ``missing``, or, with ``missing=None``, the FileNotFoundError itself (for callers to whom
    absence is an answer)."""
    where = str(path)
    try:
        # O_NONBLOCK: opening a FIFO with no writer returns at once (then reads as empty) instead
        # of waiting for one; reads block again as usual once it is open.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        if missing is None:
            raise
        raise InputError(missing, path=where) from None
    except OSError as exc:
        raise InputError(f"cannot be read: {exc.strerror or exc}", path=where) from None
    try:
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise InputError(f"cannot be read: {exc.strerror or exc}", path=where) from None
    if len(data) > limit:
        raise InputError(f"is larger than {size_text(limit)}, the size limit of {what}",
                         path=where)
    return data


def decode_utf8(data: bytes, where: str) -> str:
    """``data`` as UTF-8 text; the first bad byte named by its line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line} (save the file as UTF-8)",
                         path=where) from None


def read_text(path: str | os.PathLike, limit: int, what: str, *, missing: str | None = "no such file") -> str:
    """The UTF-8 text of ``path`` exactly as written (a byte-order mark kept), bounded as
    ``read_bounded``."""
    return decode_utf8(read_bounded(path, limit, what, missing=missing), str(path))


def loads(text: str, where: str, *, row: int | None = None, line: int | None = None, object_pairs_hook=None):
    """``json.loads(text)``, refusing invalid JSON and values nested deeper than ``MAX_DEPTH`` as
    one InputError naming ``where`` (and ``row``). ``line``: the text is that line of a JSON
    Lines file, and the messages say so."""
    at = f"line {line} " if line is not None else ""
    try:
        value = json.loads(text, object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as exc:
        position = f"column {exc.colno}" if line is not None else f"line {exc.lineno}, column {exc.colno}"
        raise InputError(f"{at}is not valid JSON: {exc.msg} at {position}" if at else
                         f"not valid JSON: {exc.msg} at {position}", path=where, row=row) from None
    except RecursionError:  # deeper than Python's reader goes
        too_deep = True
    else:
        too_deep = _deeper_than(value, MAX_DEPTH)
    if too_deep:
        raise InputError(f"{at}nests values deeper than can be read: more than {MAX_DEPTH} levels",
                         path=where, row=row)
    return value


def _deeper_than(value, limit: int) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` levels deep (walked with a
    stack of its own: the point is not to recurse)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def read_json(path: str | os.PathLike, what: str, *, limit: int = DOCUMENT_LIMIT,
              missing: str | None = "no such file"):
    """The JSON document in ``path``: UTF-8, at most ``limit`` bytes, nested at most
    ``MAX_DEPTH`` deep; anything else one InputError naming the file."""
    text = read_text(path, limit, what, missing=missing)
    return loads(text.removeprefix("\ufeff"), str(Path(path)))  # a byte-order mark is no JSON error
