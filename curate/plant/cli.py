"""`curate plant SOURCE TARGET` and `curate plant evaluate WORKSPACE --key KEY`."""
from __future__ import annotations

import json
from pathlib import Path

import click

from curate.click_types import DefaultGroup
from curate.core.options import Option, click_options
from curate.plant.options import EVALUATE, PLANT

#: What `curate plant evaluate` measures, beside how (``EVALUATE``).
MEASURED = [
    Option("key", required=True, path="file", help="The key `curate plant` wrote."),
    Option("decisions", multiple=True, path="folder",
           help="A `curate filter --out` folder made on WORKSPACE: each stage is a detector (repeatable)."),
]


class PlantGroup(DefaultGroup):
    """`curate plant SOURCE TARGET` plants (the ``new`` command); `curate plant evaluate`
    measures."""

    default_command = "new"


@click.group("plant", cls=PlantGroup)
def plant():
    """Plant known errors into a copy of a workspace (`curate plant SOURCE TARGET`), then measure
    every detector against the key (`curate plant evaluate TARGET --key KEY`). See docs/plant.md."""


@plant.command("new")
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("target", type=click.Path(path_type=Path))
@click_options(PLANT)
def new(source, target, **options):
    """Copy SOURCE's items into a new workspace TARGET with errors planted; the key goes outside it."""
    from curate.plant.build import plant_workspace

    summary = plant_workspace(source, target, **options)
    counts = ", ".join(f"{kind} {n}" for kind, n in summary["counts"].items())
    click.echo(f"planted {sum(summary['counts'].values())} of {summary['items']} items ({counts}) into {target}")
    for r in summary["rescored"]:
        click.echo(f"  re-scored {r['model']}: {r['computed_units']} units computed")
    for label, n in summary["dropped_scores"].items():
        click.echo(f"  left out {label}: {n} scores dropped (its scores of changed items were not re-scored)")
    click.echo(f"key: {summary['key']} (keep it away from the detectors)")


@plant.command("evaluate")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click_options(MEASURED)
@click_options(EVALUATE)
def evaluate(workspace, key, decisions, json_output, **options):
    """Precision@k, recall@k (k = number planted) and AUROC per detector and planted kind."""
    from curate.plant.evaluate import evaluate_workspace

    table, notes = evaluate_workspace(workspace, key, decisions=decisions, **options)
    if json_output:
        click.echo(json.dumps({"rows": table.astype(object).where(table.notna(), None).to_dict("records"),
                               "notes": notes}, indent=1))
        return
    for note in notes:
        click.echo(f"note: {note}")
    click.echo(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


COMMANDS = (plant,)
