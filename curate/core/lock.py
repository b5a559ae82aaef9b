"""One writer at a time for each piece of work in a workspace.

Two `curate annotate` runs for the same annotator and round would both see the same items as
pending and pay for each of them twice; two `curate score` runs for the same label would compute
everything twice. ``work_lock`` lets the first run through and stops the second at once with one
line naming the holder.

The lock is an advisory ``flock`` on a file under ``WORKSPACE/.locks/``. The kernel drops it when
the holding process ends, however it ends (``kill -9`` included), so a crash never leaves a stale
lock behind; the file itself stays and only says who held it last.

``claimed`` marks a folder a process is still filling (a release's staging copy) as in use:
``unclaimed`` tells a later run whether a leftover's maker is gone, whatever its name says.

``folder_lock`` does the same for an output folder (`curate filter --out`, `curate analyze --out`):
two runs writing one folder at once would leave one run's decisions under the other's summary.
It locks the folder itself, so nothing is added to it. Within one process it is re-entrant: the
audit holds a folder across a stage and its fingerprint, and the stage takes the same lock inside.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from curate.core.atomic import check_writable, unwritable
from curate.core.clock import now
from curate.core.errors import CurateError
from curate.core.reading import loads

LOCK_DIR = ".locks"
#: Folders this process holds with ``folder_lock`` (real path -> depth), for re-entry.
_HELD_FOLDERS: dict[str, int] = {}


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
    with _flocked(fd) as locked:
        if not locked:
            raise CurateError(f"{root}: another `curate {command}` is already running {work} in this workspace "
                              f"({holder(fd)}); wait for it to finish or stop it, then run this again")
        info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": now(), "work": work}).encode()
        os.pwrite(fd, info, 0)  # then cut: a reader never sees the file emptied
        os.ftruncate(fd, len(info))
        yield


@contextmanager
def _flocked(fd: int) -> Iterator[bool]:
    """Whether this process got an exclusive flock on ``fd`` (False: another process holds one).
    ``fd`` is closed after the block, which releases the lock."""
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
        else:
            yield True
    finally:
        os.close(fd)


def _open_folder(folder) -> int:
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY)


@contextmanager
def claimed(folder) -> Iterator[Path]:
    """Hold an flock on ``folder`` (one this process made) for the block; the kernel drops it
    when the process ends, ``kill -9`` included. Waits out a probe by ``unclaimed``."""
    fd = _open_folder(folder)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield Path(folder)
    finally:
        os.close(fd)


def unclaimed(folder) -> bool:
    """Whether no process holds ``folder`` (with ``claimed`` or ``folder_lock``)."""
    try:
        fd = _open_folder(folder)
    except OSError:
        return False
    with _flocked(fd) as free:
        return free


def holder(fd: int) -> str:
    """Who holds the lock, as far as its file says."""
    try:
        info = loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}", "a lock file")
    except (OSError, ValueError, CurateError):  # unreadable, not UTF-8, not JSON, nested too deep
        info = {}
    if not isinstance(info, dict) or not info.get("pid"):
        return "process unknown"
    return f"pid {info['pid']} on {info.get('host', '?')} since {info.get('since', '?')}"


@contextmanager
def folder_lock(folder, *, command: str, busy: str = "give --out another folder") -> Iterator[None]:
    """Hold an exclusive lock on output ``folder`` (made if missing) for the block; CurateError at
    once when another process is writing into it (``busy`` ends the message). A folder this call
    made is removed again when the block fails and leaves it empty. Taken again inside the block
    by this process, it is already held: the inner block just runs."""
    folder = Path(folder)
    key = os.path.realpath(folder)
    if _HELD_FOLDERS.get(key):
        _HELD_FOLDERS[key] += 1
        try:
            yield
        finally:
            _HELD_FOLDERS[key] -= 1
        return
    check_writable(folder)
    made = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise unwritable(exc, folder) from None
    with _flocked(_open_folder(folder)) as locked:
        if not locked:
            raise CurateError(f"{folder}: another `curate {command}` is writing into this folder; wait for it to "
                              f"finish, or {busy}")
        _HELD_FOLDERS[key] = 1
        try:
            yield
        except BaseException:
            if made and not any(folder.iterdir()):
                folder.rmdir()
            raise
        finally:
            del _HELD_FOLDERS[key]


#: A leftover whose maker's pid is alive (or reused) counts as stale after this long unclaimed.
STALE_AFTER_S = 60


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def remove_stale(folder: Path, pattern: str) -> None:
    """Delete what a run killed with ``kill -9`` left in ``folder`` (a release's copy, a
    workspace being built): entries matching ``pattern`` (a regex whose group 1 is the pid that
    made them) that no process holds (``claimed``) and whose maker is gone, or that have sat
    unclaimed for ``STALE_AFTER_S`` (the pid reused by another process). A live run's folder is
    held (another pid namespace sharing the disk included), so two runs at once do not break each
    other."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        match = re.fullmatch(pattern, entry.name)
        if not match or int(match.group(1)) == os.getpid() or not unclaimed(entry):
            continue
        try:
            idle = time.time() - entry.stat().st_mtime
        except OSError:
            continue
        if not _pid_alive(int(match.group(1))) or idle > STALE_AFTER_S:
            shutil.rmtree(entry, ignore_errors=True)
