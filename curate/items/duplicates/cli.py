"""The `curate duplicates` command: a thin shell over ``curate.items.duplicates.search.Duplicates``."""
from __future__ import annotations

from pathlib import Path

import click

from curate.core.options import click_options
from curate.items.duplicates.detect import MAX_CHARS, MAX_EDIT, MAX_SHINGLES
from curate.items.duplicates.options import DUPLICATES, DuplicatesOptions


@click.command("duplicates")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click_options(DUPLICATES, into=DuplicatesOptions)
def duplicates(workspace, options):
    """Find exact and near-duplicate items of WORKSPACE: among themselves, across the benchmark's
    splits and against other benchmarks; the pairs are kept in the workspace (`curate export
    WORKSPACE duplicates`) for the report, the filter and review."""
    from curate.items.duplicates.search import Duplicates

    summary = Duplicates(workspace, options).run()
    for c in summary["compared"]:
        click.echo(f"compared {c['name']}: {c['items']} items")
    if summary["splits_not_found"]:
        click.echo(f"splits not in the source: {', '.join(summary['splits_not_found'])}")
    if summary["long_items"]:
        click.echo(f"{summary['long_items']} items over {MAX_CHARS} characters: MinHash sampled at most "
                   f"{MAX_SHINGLES} of their 5-grams to propose candidates; the edit distance (at most {MAX_EDIT}) "
                   f"that decides a pair read their whole text")
    click.echo(f"{summary['pairs']} pairs in {summary['clusters']} clusters of copies")
    for (scope, field), n in sorted(summary["counts"].items()):
        click.echo(f"  {scope:7s} {field:9s} {n}")


COMMANDS = (duplicates,)
