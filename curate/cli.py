"""The `curate` command line: the group every command runs under (one clear line for an error),
and the commands, each in its package's cli module (its ``COMMANDS``), registered here in one loop.
Each command is a thin shell over its stage or library function."""
from __future__ import annotations

import errno
import signal
import sqlite3
import sys
import threading

import click

import annotate.cli
import curate
import curate.analyses.cli
import curate.audit.cli
import curate.demo.cli
import curate.export_cli
import curate.filter.cli
import curate.items.cli
import curate.items.duplicates.cli
import curate.plant.cli
import curate.release.cli
import curate.review.cli
import generate.cli
import scoring.import_cli
from curate.core.atomic import disk_full
from curate.core.errors import CurateError


class Group(click.Group):
    """Prints CurateError, a full disk and a damaged database as one clear line and exits 2,
    instead of a traceback. Writes are atomic or transactional, so the failed step left nothing
    half-written; work committed before it stays and a rerun resumes. Everything the command
    prints passes through ``curate.core.secrets.redact`` (keys, tokens, URL credentials)."""

    def invoke(self, ctx):
        from curate.core.secrets import redact_streams

        redact_streams()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _exit_on_sigterm)
        try:
            return super().invoke(ctx)
        except CurateError as exc:
            _error(str(exc))
        except (OSError, sqlite3.DatabaseError) as exc:
            if isinstance(exc, OSError) and exc.errno == errno.EROFS:  # e.g. a workspace's lock folder
                _error(f"{exc.filename or 'a file'}: cannot be written: it is on a read-only file system "
                       f"(commands that only read a workspace work there)")
                sys.exit(2)
            if not disk_full(exc) and not isinstance(exc, sqlite3.DatabaseError):
                raise
            if disk_full(exc):
                what = "no space left on the device (or over the file size limit) while writing" + \
                       (f" {exc.filename}" if getattr(exc, "filename", None) else "")
            else:
                what = f"the workspace database failed ({getattr(exc, 'sqlite_errorname', 'SQLITE_ERROR')}: {exc}; " \
                       f"a full disk, a damaged file or a failing device)"
            _error(f"{what}; the step that failed was rolled back and nothing is half-written "
                   f"(work committed before it stays): fix the cause and run the command again")
        sys.exit(2)


def _error(message: str) -> None:
    """Print ``error: message`` on a line of its own. A progress bar the failure left open (its
    iterator still held by the traceback) has no line end yet, so the error would run on from
    it, and the bar would redraw itself after the error at exit: close every open bar first
    (``leave`` bars end their line showing where they stopped)."""
    from tqdm import tqdm

    for bar in list(tqdm._instances):  # tqdm's registry of open bars, every subclass's included
        bar.close()
    click.echo(f"error: {message}", err=True)


def _exit_on_sigterm(signum, frame):
    """``kill`` and ``timeout`` send SIGTERM, whose default ends the process on the spot; as an
    exit instead, every ``finally`` runs (a workspace or release being built is removed, a
    transaction rolled back), as after Ctrl-C."""
    raise SystemExit(128 + signum)


@click.group(cls=Group)
@click.version_option(curate.__version__, prog_name="curate")
def main():
    """Audit multiple-choice LLM benchmarks and publish cleaned, versioned subsets."""


#: The cli modules whose ``COMMANDS`` are `curate`'s commands, by package, in pipeline order.
PACKAGES = (curate.items.cli, curate.items.duplicates.cli, scoring.import_cli, annotate.cli, generate.cli,
            curate.analyses.cli, curate.filter.cli, curate.review.cli, curate.release.cli, curate.export_cli,
            curate.audit.cli, curate.demo.cli, curate.plant.cli)

for _package in PACKAGES:
    for _command in _package.COMMANDS:
        main.add_command(_command)
