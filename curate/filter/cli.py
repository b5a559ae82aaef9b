"""`curate filter`: thin command over ``curate.filter.run_filter``."""
from __future__ import annotations

from pathlib import Path

import click

from curate.filter.options import FILTER
from curate.core.options import click_options


@click.command("filter")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--rules", "rules_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Rules file (YAML, schemas/rules.schema.json), e.g. rules/goldenswag.yaml.")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for decisions.parquet, stages.csv, rules.yaml and summary.json.")
@click_options(FILTER)
def filter_command(workspace, rules_path, out, annotator, tokenizer):
    """Apply ordered filter stages to WORKSPACE and write per-item decisions."""
    from curate.filter import run_filter

    summary = run_filter(workspace, rules_path, out, annotator=annotator, tokenizer=tokenizer)
    click.echo(f"{'stage':<28}{'matched':>9}{'removed':>9}{'left':>8}")
    click.echo(f"{'start':<28}{'':>9}{'':>9}{summary['items']:>8}")
    for row in summary["stages"]:
        click.echo(f"{row['stage']:<28}{row['matched']:>9}{row['removed_here']:>9}{row['left']:>8}")
    click.echo(f"kept {summary['kept']} of {summary['items']} items; decisions in {out}")
