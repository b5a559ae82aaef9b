"""Atomic file writes: a reader sees the old file or the new one, never half of one."""
from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path
from typing import Iterator

from curate.core.errors import CurateError


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``target``; on success it replaces ``target``.

    On any exception the temporary file is removed and ``target`` is left untouched. The new
    file gets ``target``'s permissions, or for a new file those of any file created here (0666
    less the umask): the temporary file's own 0600 would make a release or report unreadable to
    everyone but its writer.
    """
    target = Path(target)
    if target.is_dir():
        raise CurateError(f"{target}: is a folder; name a file to write")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise CurateError(f"{target}: cannot be written ({exc.strerror or exc})") from None
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode(target))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _mode(target: Path) -> int:
    """``target``'s permission bits, or a new file's under the process umask."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        return file_mode()


def file_mode() -> int:
    """The permission bits a new file gets here (0666 less the umask)."""
    return 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it
    os.umask(mask)
    return mask


def temp_folder(parent: Path, prefix: str, suffix: str = "") -> Path:
    """``tempfile.mkdtemp`` in ``parent``, with the permissions ``mkdir`` would give (mkdtemp's
    0700 would stay on the workspace or model folder it is renamed into)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent))
    os.chmod(folder, 0o777 & ~_umask())
    return folder


def write_text(target: str | os.PathLike, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes(target: str | os.PathLike, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def check_writable(path: str | os.PathLike, *, file: bool = False) -> None:
    """Refuse, before any work is done, a destination that cannot be written: the nearest part of
    ``path`` that exists is a file, a symbolic link to nothing, or a folder this user may not
    write into. ``file``: ``path`` names a file to write (or replace), so it may exist as a file
    but not as a folder. (Root may write into read-only folders, and /proc looks writable; writes
    that still fail later are reported by the caller, ``unwritable``.)"""
    path = Path(path)
    if file and path.is_dir():
        raise CurateError(f"{path}: is a folder; name a file to write")
    probe = path.parent if file and not path.is_symlink() else path
    while not (probe.exists() or probe.is_symlink()) and probe.parent != probe:
        probe = probe.parent
    if probe.is_symlink() and not probe.exists():  # writing through it would make its target, or replace it
        raise CurateError(f"{path}: cannot be written: {probe} is a symbolic link to {os.readlink(probe)}, which does "
                          f"not exist; remove the link or name another path")
    if file and probe == path:
        probe = path.parent  # a link to an existing file: replaced, as a file is
    if not probe.is_dir():
        raise CurateError(f"{path}: cannot be written: {probe} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise CurateError(f"{path}: cannot be written: {probe} is read-only for this user")


def disk_full(exc: BaseException) -> bool:
    """A write refused for lack of space or over the file size limit (errno, or SQLite's words)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return True
    text = str(exc).lower()
    return any(s in text for s in ("database or disk is full", "no space left on device", "file too large"))


def unwritable(exc: OSError, where: str | os.PathLike) -> CurateError | OSError:
    """The one-line error for a write refused at ``where`` (permissions, a file in the way, a
    read-only file system). A full disk is returned as it is: the CLI words that one itself."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return exc
    at = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(where) else ""
    return CurateError(f"{where}: cannot be written: {exc.strerror or exc}{at}")

