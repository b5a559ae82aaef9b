"""One writer at a time for each piece of work in a workspace.

Two `curate annotate` runs for the same annotator and round would both see the same items as
pending and pay for each of them twice; two `curate score` runs for the same label would compute
everything twice. ``work_lock`` lets the first run through and stops the second at once with one
line naming the holder.

The lock is an advisory ``flock`` on a file under ``WORKSPACE/.locks/``. The kernel drops it when
the holding process ends, however it ends (``kill -9`` included), so a crash never leaves a stale
lock behind; the file itself stays and only says who held it last.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from curate.errors import CurateError
from curate.store import now

LOCK_DIR = ".locks"


def lock_path(root: Path, work: str) -> Path:
    slug = "".join(c if c.isalnum() else "-" for c in work)[:60]
    return Path(root) / LOCK_DIR / f"{slug}-{hashlib.sha256(work.encode()).hexdigest()[:12]}.lock"


@contextmanager
def work_lock(root, work: str, *, command: str) -> Iterator[None]:
    """Hold the lock on ``work`` (e.g. "annotate anthropic:claude-haiku-4-5 round 1") in workspace
    ``root`` for the duration of the block; CurateError at once when another process holds it."""
    path = lock_path(root, work)
    path.parent.mkdir(exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CurateError(f"{root}: another `curate {command}` is already running {work} in this workspace "
                              f"({holder(fd)}); wait for it to finish or stop it, then run this again") from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": now(),
                                 "work": work}).encode())
        yield
    finally:
        os.close(fd)  # releases the lock


def holder(fd: int) -> str:
    """Who holds the lock, as far as its file says."""
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        info = {}
    if not info.get("pid"):
        return "process unknown"
    return f"pid {info['pid']} on {info.get('host', '?')} since {info.get('since', '?')}"
