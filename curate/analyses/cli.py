"""`curate analyze WORKSPACE --out DIR`: a thin shell over ``curate.analyses.report.Analyze``."""
from __future__ import annotations

from pathlib import Path

import click

from curate.analyses.options import ANALYZE, AnalyzeOptions
from curate.core.options import click_options


@click.command("analyze")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click_options(ANALYZE, into=AnalyzeOptions)
def analyze(workspace, options):
    """Run the audit analyses on WORKSPACE and write the report into --out."""
    from curate.analyses.report import Analyze

    metrics = Analyze(workspace, options).run()
    s = metrics["settings"]
    how = s["normalization"] or "answers only, no scores"
    click.echo(f"analyzed {len(s['models'])} models x {len(s['modes'])} modes ({how}) "
               f"on {metrics['provenance']['items']} items")
    if metrics.get("generation", {}).get("present"):
        for r in metrics["generation"]["spread"]:
            click.echo(f"generation {r['model']} {r['mode']} [{r['template']}, {r['settings']}]: accuracy over "
                       f"{r['seeds']} seeds {r['mean']:.3f} (sd {r['sd'] if r['sd'] is not None else float('nan'):.3f}, "
                       f"range {r['range']:.3f}) on {r['n_items']} items")
    if "core" in metrics:
        c = metrics["core"]
        curve = " ".join(f"{round(100 * r['share'])}" for r in c["curve"])
        click.echo(f"{c['mode']}-prompt core, % of items at k=1..{c['models']}: {curve}"
                   + (f"; {c['n_at_threshold']} items at k>={c['threshold']}" if "threshold" in c else ""))
    click.echo(f"wrote {options.out / 'report.html'}, report.md, metrics.json")


COMMANDS = (analyze,)
