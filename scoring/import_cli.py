"""`curate import-scores` (per-option scores made elsewhere) and `curate import-answers` (the
option models chose, without probabilities), and the scoring package's commands (``COMMANDS``:
these two and `curate score`, `curate text-scores` of ``scoring.cli``)."""
from __future__ import annotations

from pathlib import Path

import click

from curate.core.options import click_options
from scoring.answer_options import IMPORT_ANSWERS, ImportAnswersOptions
from scoring.cli import score, text_scores
from scoring.import_options import IMPORT_SCORES, ImportScoresOptions

WORKSPACE = click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))

#: How many models' lines an import prints before it counts the rest.
SHOWN = 10


@click.command("import-scores")
@WORKSPACE
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click_options(IMPORT_SCORES, into=ImportScoresOptions)
def import_scores(workspace, paths, options):
    """Import released per-option scores from PATHS into WORKSPACE as if scored here."""
    from scoring.imports import get

    o = options
    label = _model_name(o.label, "--label")
    paths = (*paths, *([o.dir] if o.dir else []))
    if not paths:
        raise click.UsageError("give the files or folders to import (PATHS or --dir)")
    summary = get(o.format).import_scores(workspace, paths, label=label, replace=o.replace, progress=not o.quiet)
    pairs = sorted({(s["model"], s["mode"]) for s in summary})
    for model, mode in pairs[:SHOWN]:
        detail = "; ".join(s["detail"] for s in summary if (s["model"], s["mode"]) == (model, mode))
        click.echo(f"  {model:<45} {mode:<12} {detail}")
    if len(pairs) > SHOWN:
        click.echo(f"  ... and {len(pairs) - SHOWN} more (model, mode) pairs")
    unit = "file" if o.format == "study-csv" else "part"
    click.echo(f"imported {len(summary)} {unit}{'' if len(summary) == 1 else 's'}: {len(pairs)} (model, mode) "
               f"pair{'' if len(pairs) == 1 else 's'}")


def _model_name(value, flag: str):
    """A model name as ``curate.core.names`` checks it (None: not given), refused as a bad ``flag``."""
    from curate.core.names import model_name

    if value is None:
        return None
    try:
        return model_name(value)
    except ValueError as exc:
        raise click.BadParameter(f"{value[:60]!r}{'...' if len(value) > 60 else ''} {exc}", param_hint=flag) from None


@click.command("import-answers")
@WORKSPACE
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


#: The scoring package's commands (`curate score` and `curate text-scores` are defined in ``scoring.cli``).
COMMANDS = (score, text_scores, import_scores, import_answers)
