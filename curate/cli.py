"""The `curate` command line. Each command is a thin shell over a library function."""
from __future__ import annotations

import collections
import errno
import signal
import sqlite3
import sys
import threading
from pathlib import Path

import click

import curate
from curate.core.atomic import disk_full
from curate.core.errors import CurateError
from curate.items.ingest_options import INGEST
from curate.core.options import click_options
from scoring.answer_options import IMPORT_ANSWERS, ImportAnswersOptions
from scoring.imports import names as import_formats


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


def _adapters() -> list[str]:
    from curate.items.adapters import known
    return known()


#: The generic adapter's column mapping as single flags (its keys in --columns): the spelling
#: before --columns, still accepted, hidden from --help. Flag -> (mapping key, a list of columns?).
_COLUMN_FLAGS = {"--name": ("name", False), "--question": ("question", False), "--choices": ("choices", True),
                 "--answer": ("answer", False), "--answer-format": ("answer_format", False),
                 "--choice-labels": ("choice_labels", False), "--zero-column": ("zero", False),
                 "--source-column": ("source", False), "--id-columns": ("ids", True),
                 "--template": ("template", False), "--letters-template": ("letters_template", False),
                 "--kind": ("kind", False), "--formulation": ("formulation", False)}


def _generic_column_flags(f):
    for flag in reversed(_COLUMN_FLAGS):
        f = click.option(flag, "column_" + _COLUMN_FLAGS[flag][0], default=None, hidden=True)(f)
    return f


def _column_mapping(columns: str | None, flags: dict) -> dict:
    """One mapping from --columns and the single flags; a key given both ways is refused, and the
    whole is checked as the audit config's benchmark.columns is."""
    from curate.items.adapters.columns import check_columns, read_columns

    mapping = read_columns(columns) if columns else {}
    for flag, (key, is_list) in _COLUMN_FLAGS.items():
        value = flags["column_" + key]
        if value is None:
            continue
        if key in mapping:
            raise click.UsageError(f"{flag} and --columns both give {key}: give it once")
        # "--choices endings" is one list column (a string, as in the config), "--choices a,b" one per option
        listed = [c for c in value.split(",") if c] if is_list else value
        if not listed:
            raise click.UsageError(f"{flag} {value!r}: name the {key} column(s)")
        mapping[key] = listed[0] if key == "choices" and len(listed) == 1 else listed
    missing = [k for k in ("question", "choices", "answer") if k not in mapping]
    if missing:
        raise click.UsageError(f"the generic adapter needs --columns with {', '.join(missing)}")
    check_columns(mapping, where="--columns")
    return mapping


@main.command()
@click.argument("workspace", type=click.Path(file_okay=False, path_type=Path))
@click.option("--benchmark", required=True, type=click.Choice(_adapters()),
              help="Adapter that maps source rows to canonical items: a built-in benchmark, or generic.")
@click.option("--data", default=None,
              help="Local file/folder (.jsonl .json .parquet .csv .arrow) or a Hub dataset id "
                   "(built-in benchmarks: default their Hub id).")
@click_options(INGEST)
@click.option("--columns", default=None, metavar="FILE|MAPPING",
              help="generic: the column mapping, as the audit config's benchmark.columns writes it: a YAML/JSON "
                   "file, or inline, e.g. '{question: goal, choices: [sol1, sol2], answer: label}'.")
@_generic_column_flags
def init(workspace, benchmark, data, columns, **options):
    """Create WORKSPACE by ingesting a benchmark split into canonical items."""
    from curate.items.adapters import get_adapter
    from curate.items.adapters.columns import adapter_keywords
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions

    column_flags = {k: options.pop(k) for k in list(options) if k.startswith("column_")}
    if benchmark == "generic":
        try:
            adapter = get_adapter("generic", **adapter_keywords(_column_mapping(columns, column_flags)))
        except ValueError as exc:  # a column mapping that names nothing (--choices ",")
            raise click.UsageError(str(exc)) from None
    elif columns or any(v is not None for v in column_flags.values()):
        raise click.UsageError(f"the {benchmark} adapter takes no column mapping (--columns is for generic)")
    else:
        adapter = get_adapter(benchmark)
    root = Ingest(workspace, IngestOptions(data=data, **options), adapter).run()
    click.echo(f"created {root} with {_summary(root)}")


@main.command()
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Output file (.jsonl, .parquet or .csv); default WORKSPACE/exports/items.jsonl.")
def items(workspace, out):
    """Export the canonical items of WORKSPACE."""
    from curate.core.exports import write_records
    from curate.items.store import Workspace

    with Workspace.open(workspace) as ws:
        records = ws.items()
        out = write_records(records, out or ws.exports / "items.jsonl")
    click.echo(f"wrote {len(records)} items to {out}")


@main.command()
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
def info(workspace):
    """Summarize WORKSPACE: source, items, and what each stage has stored."""
    from curate.items.store import Workspace

    with Workspace.open(workspace) as ws:
        src = ws.meta("source", {})
        click.echo(f"workspace   {workspace}")
        click.echo(f"benchmark   {ws.meta('benchmark')} (split {ws.meta('split')}, scored in "
                   f"{ws.meta('formulation', 'cloze')} by default)")
        where = src.get("path") or src.get("repo_id")
        pin = src.get("sha256") or src.get("resolved_revision") or src.get("revision") or "unpinned"
        click.echo(f"source      {where} [{pin}]")
        if src.get("encoding"):  # as read: named with --encoding, or the one detected
            encodings = src["encoding"] if isinstance(src["encoding"], list) else [src["encoding"]]
            click.echo(f"encoding    {', '.join(encodings)}")
        if src.get("copy_of"):
            copy = src["copy_of"]
            click.echo(f"copy of     {copy['repo_id']}@{copy['revision'] or '(revision not recorded)'}")
        click.echo(f"created     {ws.meta('created_at')} by benchcurate {ws.meta('toolkit_version')}")
        click.echo(f"items       {_summary(workspace, ws)}")
        click.echo("tables")
        for name, n in ws.tables().items():
            click.echo(f"  {name:<24}{n:>10}")


def _summary(root, ws=None) -> str:
    from curate.items.store import Workspace

    own = ws is None
    ws = ws or Workspace.open(root)
    try:
        items = ws.items()
    finally:
        if own:
            ws.close()
    by_source = collections.Counter(it["source"] or "(none)" for it in items)
    n_opts = collections.Counter(len(it["options"]) for it in items)
    parts = ", ".join(f"{s} {n}" for s, n in sorted(by_source.items()))
    opts = ", ".join(f"{k} options: {v}" for k, v in sorted(n_opts.items()))
    return f"{len(items)} items ({parts}; {opts})"


@main.command("import-scores")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(import_formats()), required=True,
              help="study-csv: the study's CSVs (--dir); lm-eval-samples: lm-eval --log_samples files or folders.")
@click.option("--dir", "directory", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The folder to import (or give PATHS).")
@click.option("--label", default=None, callback=lambda ctx, param, value: _model_name(value, "--label"),
              help="Store under this model name (lm-eval-samples; default: the results file's).")
@click.option("--replace", is_flag=True,
              help="Replace stored scores of the same model and mode that came from elsewhere (refused without it).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def import_scores(workspace, paths, fmt, directory, label, replace, quiet):
    """Import released per-option scores from PATHS into WORKSPACE as if scored here."""
    from scoring.imports import get

    paths = (*paths, *([directory] if directory else []))
    if not paths:
        raise click.UsageError("give the files or folders to import (PATHS or --dir)")
    summary = get(fmt).import_scores(workspace, paths, label=label, replace=replace, progress=not quiet)
    pairs = sorted({(s["model"], s["mode"]) for s in summary})
    for model, mode in pairs[:SHOWN]:
        detail = "; ".join(s["detail"] for s in summary if (s["model"], s["mode"]) == (model, mode))
        click.echo(f"  {model:<45} {mode:<12} {detail}")
    if len(pairs) > SHOWN:
        click.echo(f"  ... and {len(pairs) - SHOWN} more (model, mode) pairs")
    unit = "file" if fmt == "study-csv" else "part"
    click.echo(f"imported {len(summary)} {unit}{'' if len(summary) == 1 else 's'}: {len(pairs)} (model, mode) "
               f"pair{'' if len(pairs) == 1 else 's'}")


def _model_name(value, flag: str):
    """click callback: a model name as ``curate.core.names`` checks it (None: not given)."""
    from curate.core.names import model_name

    if value is None:
        return None
    try:
        return model_name(value)
    except ValueError as exc:
        raise click.BadParameter(f"{value[:60]!r}{'...' if len(value) > 60 else ''} {exc}", param_hint=flag) from None


@main.command("import-answers")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click_options(IMPORT_ANSWERS, into=ImportAnswersOptions)
def import_answers(workspace, paths, options):
    """Import which option models chose (answers without probabilities) from PATHS into WORKSPACE:
    all are stored or none; importing the same files again replaces their answers."""
    from scoring.answer_imports import import_answers as read_and_store
    from scoring.answer_options import reading

    summary = read_and_store(workspace, options.format, paths, **reading(options))
    for s in summary[:SHOWN]:
        click.echo(f"  {s['model']:<45} {s['answers']} answers ({s['unreadable']} unreadable), "
                   f"{s['runs']} run{'' if s['runs'] == 1 else 's'}")
    if len(summary) > SHOWN:
        click.echo(f"  ... and {len(summary) - SHOWN} more models")
    total = sum(s["answers"] for s in summary)
    replaced = summary[0]["replaced"] if summary else 0
    click.echo(f"imported {total} answer{'' if total == 1 else 's'} of {len(summary)} "
               f"model{'' if len(summary) == 1 else 's'} ({options.format})"
               + (f"; replaced the {replaced} answers these files gave before" if replaced else ""))


#: How many models' lines an import prints before it counts the rest.
SHOWN = 10


from curate.filter.cli import filter_command  # noqa: E402
main.add_command(filter_command)

from curate.release.cli import release_group  # noqa: E402
main.add_command(release_group)

from curate.analyses.cli import analyze  # noqa: E402
main.add_command(analyze)

from annotate.cli import register as _register_annotate  # noqa: E402
_register_annotate(main)

from curate.config_cli import audit, check_config  # noqa: E402
main.add_command(audit)
main.add_command(check_config)

from curate.demo.cli import demo  # noqa: E402
main.add_command(demo)

from scoring.cli import score, text_scores  # noqa: E402  (stage commands register themselves below)
main.add_command(score)
main.add_command(text_scores)
from generate.cli import generate  # noqa: E402
main.add_command(generate)
from curate.items.duplicates.cli import duplicates  # noqa: E402
main.add_command(duplicates)
from curate.export_cli import export  # noqa: E402
main.add_command(export)
from curate.plant.cli import plant  # noqa: E402
main.add_command(plant)
from curate.review.cli import COMMANDS as _review_commands  # noqa: E402
for _command in _review_commands:
    main.add_command(_command)
