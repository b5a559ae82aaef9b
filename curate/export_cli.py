"""`curate export WORKSPACE KIND --out F`: one command, one small registry of exportable tables.

A stage adds a kind as one entry of ``EXPORTS``: the function giving its records from the
workspace folder and the module whose ``COLUMNS`` an empty table still has; the command writes
the records by the file extension of ``--out``. The one other kind, ``review``, writes a
review queue in an external tool's shape (``curate.review.exchange``).
"""
from __future__ import annotations

import importlib
from dataclasses import replace
from pathlib import Path

import click

from curate.validity.item_options import FEWSHOT
from curate.core.options import click_options

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


def table(kind: str, workspace: Path, **options) -> tuple[list[dict], list[str]]:
    """The records of table ``kind`` of ``workspace`` (``options``: the kind's own, such as
    item-stats' ``fewshot``), and its columns."""
    where, columns_in = EXPORTS[kind]
    module, _, function = where.partition(":")
    records = getattr(importlib.import_module(module), function)(workspace, **options)
    return records, importlib.import_module(columns_in).COLUMNS


@click.command()
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("kind", type=click.Choice(sorted([*EXPORTS, "review"]), case_sensitive=False), metavar="KIND")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Output file (.parquet, .csv or .jsonl); default WORKSPACE/exports/KIND.parquet. review: a folder "
                   "(argilla) or a .jsonl file.")
@click.option("--format", "fmt", type=click.Choice(["argilla", "jsonl"]), default=None,
              help="review: Argilla 2.x settings.json + records.json, or plain JSON lines.")
@click.option("--queue", default=None, help="review: the queue to export (as `curate review --queue`; default "
                                            "removed with --decisions, else all).")
@click.option("--decisions", multiple=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="review: a `curate filter --out` folder (for the removed queues).")
@click_options([replace(FEWSHOT, help="item-stats: " + FEWSHOT.help[0].lower() + FEWSHOT.help[1:])])
def export(workspace, kind, out, fmt, queue, decisions, fewshot):
    """Export a table of WORKSPACE (KIND: scores, text-scores, annotations, generations, duplicates, item-stats, or
    review: a review queue)."""
    from curate.core.exports import write_records

    if kind == "review":
        from curate.review.data import ReviewData
        from curate.review.exchange import export_review

        if fmt is None:
            raise click.UsageError("export review needs --format argilla or jsonl")
        spec = queue or ("removed" if decisions else "all")
        out = out or workspace / "exports" / ("review-argilla" if fmt == "argilla" else "review.jsonl")
        n = export_review(ReviewData.load(workspace, decisions), spec, fmt, out)
        click.echo(f"wrote {n} items of queue {spec} for {fmt} to {out}")
        return
    if fmt or queue or decisions:
        raise click.UsageError("--format, --queue and --decisions apply to KIND review only")
    if fewshot is not None and kind != "item-stats":
        raise click.UsageError("--fewshot applies to KIND item-stats only")
    records, columns = table(kind, workspace, **({} if fewshot is None else {"fewshot": fewshot}))
    out = write_records(records, out or workspace / "exports" / f"{kind}.parquet", columns=columns)
    click.echo(f"wrote {len(records)} {kind} rows to {out}")
    if kind == "item-stats" and records:
        from curate.validity.item_stats import irt_note

        if note := irt_note(len(records[0]["models"].split(", "))):
            click.echo(f"note: {note}", err=True)
        if records[0]["set_apart"]:
            click.echo(f"note: set apart from the item statistics: {records[0]['set_apart']}", err=True)
