"""`curate filter`: a thin command over ``curate.filter.run.Filter``."""
from __future__ import annotations

from pathlib import Path

import click

from curate.core.options import click_options
from curate.filter.options import FILTER, FilterOptions


@click.command("filter")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click_options(FILTER, into=FilterOptions)
def filter_command(workspace, options):
    """Apply ordered filter stages to WORKSPACE and write per-item decisions."""
    from curate.filter.run import Filter

    summary = Filter(workspace, options).run()
    click.echo(f"{'stage':<28}{'matched':>9}{'removed':>9}{'left':>8}")
    click.echo(f"{'start':<28}{'':>9}{'':>9}{summary['items']:>8}")
    for row in summary["stages"]:
        click.echo(f"{row['stage']:<28}{row['matched']:>9}{row['removed_here']:>9}{row['left']:>8}")
    click.echo(f"kept {summary['kept']} of {summary['items']} items; decisions in {options.out}")


COMMANDS = (filter_command,)
