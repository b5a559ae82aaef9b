"""The `curate duplicates` command: a thin shell over ``curate.items.duplicates.search``."""
from __future__ import annotations

from pathlib import Path

import click

from curate.click_types import finite
from curate.items.duplicates.detect import MAX_CHARS, MAX_EDIT, MAX_SHINGLES, THRESHOLD


@click.command("duplicates")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--splits", default="all", show_default=True,
              help="The benchmark's other splits to compare with: 'all' (every one of train, dev, validation, test "
                   "its source holds), 'none', or names separated by commas.")
@click.option("--against", multiple=True, metavar="SPEC",
              help="Another benchmark to compare with (repeatable): a workspace folder, or BENCHMARK[:DATA][@SPLIT] "
                   "for a built-in benchmark (DATA: a local file or folder, or a Hub id).")
@click.option("--threshold", type=click.FloatRange(0.5, 1.0), callback=finite, default=THRESHOLD, show_default=True,
              help="Similarity (0-1) of the normalised texts from which two items are near duplicates.")
def duplicates(workspace, splits, against, threshold):
    """Find exact and near-duplicate items of WORKSPACE: among themselves, across the benchmark's
    splits and against other benchmarks; the pairs are kept in the workspace (`curate export
    WORKSPACE duplicates`) for the report, the filter and review."""
    from curate.items.duplicates.search import search

    names = [s.strip() for s in splits.split(",") if s.strip()]
    if not names:
        raise click.BadParameter("name splits, or 'all' or 'none'", param_hint="--splits")
    summary = search(workspace, splits=None if names in (["all"], ["none"]) else names,
                     all_splits=names == ["all"], against=tuple(against), threshold=threshold)
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
