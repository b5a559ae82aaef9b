"""`curate export WORKSPACE KIND --out F`: one command, one small registry of exportable tables.

A stage adds a kind by registering a function ``(workspace_path) -> list[dict]`` in ``EXPORTS``
(with ``register``, naming the module whose ``COLUMNS`` an empty table still has); the command
writes the records by the file extension of ``--out``. The one other kind, ``review``, writes a
review queue in an external tool's shape (``curate.review.exchange``).
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Callable

import click

EXPORTS: dict[str, Callable[[Path], list[dict]]] = {}
#: kind -> the module whose ``COLUMNS`` names the table's columns (imported when used).
COLUMNS_IN: dict[str, str] = {}


def register(kind: str, columns_in: str):
    def add(fn):
        EXPORTS[kind], COLUMNS_IN[kind] = fn, columns_in
        return fn
    return add


@register("scores", "scoring.export")
def _scores(workspace: Path) -> list[dict]:
    from scoring.export import score_records
    return score_records(workspace)


@register("text-scores", "scoring.text_store")
def _text_scores(workspace: Path) -> list[dict]:
    from scoring.text_store import records
    return records(workspace)


@register("annotations", "annotate.export")
def _annotations(workspace: Path) -> list[dict]:
    from annotate.export import annotation_rows
    from annotate.store import open_annotations
    with open_annotations(workspace) as ws:
        return annotation_rows(ws)


@register("generations", "generate.store")
def _generations(workspace: Path) -> list[dict]:
    from generate.export import generation_records
    return generation_records(workspace)


@register("duplicates", "curate.duplicates.store")
def _duplicates(workspace: Path) -> list[dict]:
    from curate.duplicates.store import open_duplicates, records
    with open_duplicates(workspace) as ws:
        return records(ws)


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
def export(workspace, kind, out, fmt, queue, decisions):
    """Export a table of WORKSPACE (KIND: scores, text-scores, annotations, generations, duplicates, or review: a review
    queue)."""
    from curate.exports import write_records

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
    records = EXPORTS[kind](workspace)
    columns = importlib.import_module(COLUMNS_IN[kind]).COLUMNS
    out = write_records(records, out or workspace / "exports" / f"{kind}.parquet", columns=columns)
    click.echo(f"wrote {len(records)} {kind} rows to {out}")
