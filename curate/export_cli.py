"""`curate export WORKSPACE KIND --out F`: one command, one small registry of exportable tables.

A stage adds a kind as one entry of ``EXPORTS``: the function giving its records from the
workspace folder and the module whose ``COLUMNS`` an empty table still has; the command writes
the records by the file extension of ``--out``. Two other kinds write something else: ``review``
a review queue in an external tool's shape (``curate.review.exchange``), ``lm-eval-tasks`` a folder
of lm-eval tasks, one per prompt mode x formulation x shot count (``curate.release.lm_eval_ablations``).
"""
from __future__ import annotations

import importlib
from pathlib import Path

import click

from curate.core.options import Option, click_options, options_class
from curate.validity.item_options import FEWSHOT

#: kind -> (``module:function`` giving the table's records from the workspace folder, the module
#: whose ``COLUMNS`` names its columns, which an empty table still has). A stage adds a kind here.
EXPORTS: dict[str, tuple[str, str]] = {
    "scores": ("scoring.export:score_records", "scoring.export"),
    "text-scores": ("scoring.text_store:records", "scoring.text_store"),
    "annotations": ("annotate.export:records", "annotate.export"),
    "generations": ("generate.export:generation_records", "generate.store"),
    "duplicates": ("curate.items.duplicates.store:export_records", "curate.items.duplicates.store"),
    "item-stats": ("curate.validity.item_table:records", "curate.validity.item_table"),
}


#: The kinds that are not a table (written by their own code, below).
OTHERS = ("review", "lm-eval-tasks")


def table(kind: str, workspace: Path, **options) -> tuple[list[dict], list[str]]:
    """The records of table ``kind`` of ``workspace`` (``options``: the kind's own, such as
    item-stats' ``fewshot``), and its columns."""
    where, columns_in = EXPORTS[kind]
    module, _, function = where.partition(":")
    records = getattr(importlib.import_module(module), function)(workspace, **options)
    return records, importlib.import_module(columns_in).COLUMNS


#: The command's options; ``review`` and ``lm-eval-tasks`` have their own (refused with another KIND).
EXPORT = [
    Option("out", path="write", metavar="PATH",
           help="Output file (.parquet, .csv or .jsonl); default WORKSPACE/exports/KIND.parquet. review: a folder "
                "(argilla) or a .jsonl file. lm-eval-tasks: a new folder (default WORKSPACE/exports/lm-eval-tasks)."),
    Option("fmt", flag="--format", choices=("argilla", "jsonl"),
           help="review: Argilla 2.x settings.json + records.json, or plain JSON lines [default: by --out: a .jsonl "
                "file, or a folder for argilla]."),
    Option("queue", help="review: the queue to export (as `curate review --queue`; default removed with "
                         "--decisions, else all)."),
    Option("decisions", path="folder", multiple=True, default=(),
           help="review: a `curate filter --out` folder (for the removed queues)."),
    Option("fewshot", metavar="K[,K...]", help="item-stats: " + FEWSHOT.help[0].lower() + FEWSHOT.help[1:] +
           " lm-eval-tasks: the shot counts, a task each (e.g. 0,5) [default: 0]."),
    Option("modes", metavar="MODE[,MODE...]", help="lm-eval-tasks: the prompt modes, a task each [default: all four]."),
    Option("formulations", metavar="NAME[,NAME...]",
           help="lm-eval-tasks: cloze, letters, letters+rK or letters+rotations, a task each [default: the "
                "workspace's]."),
    Option("fewshot_pool", metavar="FILE|evaluated",
           help="lm-eval-tasks: where the shots come from, as curate score --fewshot-pool."),
    Option("name", help="lm-eval-tasks: the task group's name, the prefix of its tasks' [default: curate_BENCHMARK]."),
]
ExportOptions = options_class("ExportOptions", EXPORT)


@click.command()
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("kind", type=click.Choice(sorted([*EXPORTS, *OTHERS]), case_sensitive=False), metavar="KIND")
@click_options(EXPORT, into=ExportOptions)
def export(workspace, kind, options):
    """Export a table of WORKSPACE (KIND: scores, text-scores, annotations, generations, duplicates, item-stats),
    review: a review queue, or lm-eval-tasks: every ablation as an lm-eval task."""
    o = options
    out, fmt, queue, decisions, fewshot = o.out, o.fmt, o.queue, o.decisions, o.fewshot
    modes, formulations, fewshot_pool, name = o.modes, o.formulations, o.fewshot_pool, o.name
    from curate.core.exports import write_records

    if kind != "lm-eval-tasks" and any(v is not None for v in (modes, formulations, fewshot_pool, name)):
        raise click.UsageError("--modes, --formulations, --fewshot-pool and --name apply to KIND lm-eval-tasks only")
    if kind == "lm-eval-tasks":
        if fmt or queue or decisions:
            raise click.UsageError("--format, --queue and --decisions apply to KIND review only")
        _lm_eval_tasks(workspace, out, modes, formulations, fewshot, fewshot_pool, name)
        return
    if kind == "review":
        from curate.review.data import ReviewData
        from curate.review.exchange import export_review

        fmt = _review_format(fmt, out)
        spec = queue or ("removed" if decisions else "all")
        out = out or workspace / "exports" / ("review-argilla" if fmt == "argilla" else "review.jsonl")
        n = export_review(ReviewData.load(workspace, decisions), spec, fmt, out)
        click.echo(f"wrote {n} items of queue {spec} for {fmt} to {out}")
        return
    if fmt or queue or decisions:
        raise click.UsageError("--format, --queue and --decisions apply to KIND review only")
    if fewshot is not None and kind != "item-stats":
        raise click.UsageError("--fewshot applies to KIND item-stats and lm-eval-tasks only")
    if fewshot is not None:
        fewshot = _shots(fewshot, one=True)
    extra = {} if fewshot is None else {"fewshot": fewshot}
    if kind == "item-stats":  # every verdict the workspace holds joins the ranking (read here: a higher layer)
        from annotate.verdict_store import all_verdicts
        extra["verdicts"] = all_verdicts
    records, columns = table(kind, workspace, **extra)
    out = write_records(records, out or workspace / "exports" / f"{kind}.parquet", columns=columns)
    click.echo(f"wrote {len(records)} {kind} rows to {out}")
    if kind == "item-stats" and records:
        from curate.validity.item_stats import irt_note

        answering = [m for key in ("models", "answer_models") for m in str(records[0][key] or "").split(", ") if m]
        if note := irt_note(len(answering)):
            click.echo(f"note: {note}", err=True)
        if records[0]["set_apart"]:
            click.echo(f"note: set apart from the item statistics: {records[0]['set_apart']}", err=True)


def _review_format(fmt: str | None, out: Path | None) -> str:
    """The review export's format: --format, else --out's suffix (.jsonl: jsonl; none, or an
    existing folder: argilla's folder), as the other exports take theirs."""
    from curate.core.errors import CurateError

    by_out = None if out is None else ("jsonl" if out.suffix.lower() == ".jsonl" else
                                       "argilla" if not out.suffix or out.is_dir() else "")
    if fmt is None and by_out is None:
        raise CurateError("export review: give --out (a .jsonl file, or a folder for Argilla) or --format argilla "
                          "or jsonl")
    if fmt is None and not by_out:
        raise CurateError(f"{out}: review writes .jsonl (jsonl) or a folder (argilla); name one of them, or give "
                          f"--format")
    if fmt == "argilla" and by_out == "jsonl" and not out.exists():  # an existing file: exchange names it
        raise CurateError(f"{out}: --format argilla writes a folder (settings.json, records.json), not a .jsonl file")
    return fmt or by_out


def _shots(value: str, one: bool = False):
    """``--fewshot``'s shot counts (item-stats: exactly one)."""
    from scoring.options import shot_counts

    try:
        counts = shot_counts(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc).removeprefix(f"--fewshot {value!r}: "), param_hint="--fewshot") from None
    if one and len(counts) != 1:
        raise click.BadParameter(f"{value!r}: item-stats reads one shot count", param_hint="--fewshot")
    return counts[0] if one else counts


def _lm_eval_tasks(workspace, out, modes, formulations, fewshot, fewshot_pool, name):
    """Write the task folder and say how to run it and bring its samples back."""
    from curate.release.lm_eval_ablations import export_tasks
    from scoring.options import formulations_of, modes_of

    try:
        modes = modes_of(modes) if modes is not None else None
        formulations = formulations_of(formulations) if formulations is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--modes/--formulations") from None
    out = out or workspace / "exports" / "lm-eval-tasks"
    done = export_tasks(workspace, out, **({"modes": modes} if modes else {}), formulations=formulations,
                        fewshot=_shots(fewshot) if fewshot is not None else [0], fewshot_pool=fewshot_pool, name=name)
    for t in done["tasks"]:
        click.echo(f"  {t['task']:<50} {t['items']} items")
    click.echo(f"wrote {len(done['tasks'])} lm-eval tasks of group {done['group']} to {out}")
    click.echo(f"run: {done['run']}")
    click.echo(f"then: curate import-scores {workspace} --format lm-eval-samples --label LABEL OUT")
    click.echo("LABEL: the name to store MODEL's scores under; not the one `curate score` stores its own under "
               "(the built-in smollm2-135m's folder is imported as smollm2-135m unless --label names another)")


COMMANDS = (export,)
