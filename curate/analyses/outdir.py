"""The report folder (`curate analyze --out`): what may be written into, and how a new report
replaces an old one.

A report is built in a hidden staging folder inside ``--out`` and moved into place only when
every analysis has run, so a failed run leaves the earlier report as it was. The move takes
``metrics.json`` away first and puts the new one back last: a run killed in between leaves a
folder without ``metrics.json`` (an unfinished report, which the next run replaces), never old
and new files that look like one report. Files of the earlier report that the new one does not
write (a plot of a length unit no longer asked for) are removed with it.

Anything that is not a report folder, a release above all, is refused before any work is done.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from curate.core.errors import CurateError

METRICS = "metrics.json"
STAGING = ".analyze-staging"
#: What `curate analyze` writes besides what its sections write (their FILES and FOLDERS).
FILES = {METRICS, "report.md", "report.html"}
TEMP = re.compile(r"\..+\.tmp")  # ``curate.core.atomic``'s temp files, left by a run killed while writing


def _written() -> tuple[re.Pattern, set[str]]:
    """The file names (a pattern) and folders the report's sections write: the core's items,
    the item pages, the plots (read when a folder is checked: the sections import the analyses)."""
    from curate.analyses.sections import registry

    patterns = [p for section in registry() for p in getattr(section, "FILES", ())]
    folders = {f for section in registry() for f in getattr(section, "FOLDERS", ())}
    return re.compile("|".join(f"(?:{p})" for p in patterns) or "(?!)"), folders


def ours(path: Path) -> bool:
    """Whether ``path`` in a report folder is something `curate analyze` wrote."""
    name = path.name
    files, folders = _written()
    if path.is_dir():
        return name in folders or name == STAGING
    return name in FILES or bool(files.fullmatch(name)) or bool(TEMP.fullmatch(name))


def check_report_dir(out: Path) -> None:
    """``--out`` must be new, empty, or an earlier report (finished or not); refused otherwise,
    naming what it holds."""
    if out.exists() and not out.is_dir():
        raise CurateError(f"{out}: exists and is not a folder; --out names a folder for the report")
    if not out.is_dir():
        return
    entries = list(out.iterdir())
    if any(p.name == "manifest.json" for p in entries):
        raise CurateError(f"{out}: is a release folder (it holds manifest.json), which analyze never writes into; "
                          f"give --out a new folder")
    # Hidden files other than ours (the audit's fingerprint of this folder) are left alone.
    others = sorted(p.name for p in entries if not p.name.startswith(".") and not ours(p))
    if others:
        raise CurateError(f"{out}: exists and is not an earlier `curate analyze` report (it holds "
                          f"{', '.join(others[:3])}{' ...' if len(others) > 3 else ''}); give --out a new or empty folder")


def staging(out: Path) -> Path:
    """A fresh staging folder inside ``out`` (a killed run's is removed first); call holding
    ``out``'s folder lock."""
    folder = out / STAGING
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    return folder


def publish(folder: Path, out: Path) -> None:
    """Replace the report in ``out`` with the one built in ``folder`` (then gone)."""
    (out / METRICS).unlink(missing_ok=True)
    for old in out.iterdir():
        if old != folder and ours(old):
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    for new in sorted(folder.iterdir()):
        if new.name != METRICS:
            os.replace(new, out / new.name)
    os.replace(folder / METRICS, out / METRICS)
    folder.rmdir()
