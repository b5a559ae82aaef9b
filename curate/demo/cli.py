"""`curate demo plants`: how many of the demo's planted defects each filter stage caught."""
from __future__ import annotations

from pathlib import Path

import click

from curate.core.options import Option, click_options

PLANTS = [
    Option("count", choices=("matched", "first"), default="matched",
           help="matched: every stage whose condition held; first: only the stage that removed the item."),
    Option("plants_file", flag="--plants", path="file", help="Ground truth file (default: the demo's plants.json)."),
    Option("out", path="write-file", help="Also write the table (.csv, .jsonl or .parquet)."),
]


@click.group("demo")
def demo():
    """The demo benchmark with planted, documented defects (curate/demo/README.md)."""


@demo.command("plants")
@click.argument("decisions", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click_options(PLANTS)
def plants(decisions, count, plants_file, out):
    """Count caught plants per stage from DECISIONS, a `curate filter --out` folder."""
    from curate.demo import load_decisions, load_plants, score_plants
    from curate.core.exports import FORMATS

    if out and out.suffix.lower() not in FORMATS:  # before the table is printed, not after
        raise click.UsageError(f"--out {out}: use a {', '.join(FORMATS)} file")
    frame, stages = load_decisions(decisions)
    benchmarks = sorted({str(i).split("/", 1)[0] for i in frame["item_id"]})
    if plants_file is None and benchmarks != ["demo"]:  # the plants are the demo's rows, matched by number
        raise click.UsageError(f"{decisions}: these decisions are on {', '.join(benchmarks)} items, not the demo "
                               "benchmark's; the demo's plants.json describes the demo's rows only (give --plants)")
    table = score_plants(frame, load_plants(plants_file), stages, count=count)
    click.echo(table.to_string())
    if out:
        from curate.core.exports import write_records
        write_records(table.reset_index().to_dict("records"), out)
        click.echo(f"wrote {out}")


COMMANDS = (demo,)
