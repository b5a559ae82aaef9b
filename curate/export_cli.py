"""`curate export WORKSPACE KIND --out F`: one command, one small registry of exportable tables.

A stage adds a kind by registering a function ``(workspace_path) -> list[dict]`` in ``EXPORTS``
(with ``register``); the command writes the records by the file extension of ``--out``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import click

EXPORTS: dict[str, Callable[[Path], list[dict]]] = {}


def register(kind: str):
    def add(fn):
        EXPORTS[kind] = fn
        return fn
    return add


@register("scores")
def _scores(workspace: Path) -> list[dict]:
    from scoring.export import score_records
    return score_records(workspace)


@register("annotations")
def _annotations(workspace: Path) -> list[dict]:
    from annotate.export import annotation_rows
    from annotate.store import open_annotations
    with open_annotations(workspace) as ws:
        return annotation_rows(ws)


@register("generations")
def _generations(workspace: Path) -> list[dict]:
    from generate.export import generation_records
    return generation_records(workspace)


@click.command()
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("kind", type=click.Choice(sorted(EXPORTS), case_sensitive=False), metavar="KIND")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Output file (.parquet, .csv or .jsonl); default WORKSPACE/exports/KIND.parquet.")
def export(workspace, kind, out):
    """Export a table of WORKSPACE (KIND: scores, annotations or generations)."""
    from curate.exports import write_records

    records = EXPORTS[kind](workspace)
    out = write_records(records, out or workspace / "exports" / f"{kind}.parquet")
    click.echo(f"wrote {len(records)} {kind} rows to {out}")
