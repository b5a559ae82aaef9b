"""`curate analyze WORKSPACE --out DIR`: a thin shell over ``analyze_workspace``."""
from __future__ import annotations

from pathlib import Path

import click

from curate.analyses.options import ANALYZE
from curate.core.options import click_options


@click.command("analyze")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for metrics.json, report.html, report.md, core_items.csv and the plots.")
@click.option("--model", "models", multiple=True, help="Only these models (repeatable; default all).")
@click.option("--modes", "modes_list", default=None, metavar="MODES",
              help="Only these prompt modes, comma-separated as curate score takes them (default all).")
@click.option("--mode", "modes", multiple=True, hidden=True)  # the old spelling, repeatable
@click.option("--length-unit", "length_units", multiple=True, default=("chars",), show_default=True,
              help="chars, bytes or tokens:<built-in model or tokenizer folder>, e.g. tokens:smollm2-135m (repeatable).")
@click_options(ANALYZE)
def analyze(workspace, out_dir, normalization, models, modes_list, modes, length_units, core_mode, core_threshold,
            alpha, n_resamples, seed, decisions):
    """Run the audit analyses on WORKSPACE and write the report into --out."""
    from curate.analyses.report import analyze_workspace

    modes = (*modes, *(m.strip() for m in (modes_list or "").split(",") if m.strip()))

    metrics = analyze_workspace(workspace, out_dir, normalization=normalization, models=models or None,
                                modes=modes or None, length_units=length_units, core_mode=core_mode,
                                core_threshold=core_threshold, alpha=alpha, n_resamples=n_resamples, seed=seed,
                                decisions=decisions)
    s = metrics["settings"]
    how = s["normalization"] or "generation only"
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
    click.echo(f"wrote {out_dir / 'report.html'}, report.md, metrics.json")
