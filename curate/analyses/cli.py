"""`curate analyze WORKSPACE --out DIR`: a thin shell over ``analyze_workspace``."""
from __future__ import annotations

from pathlib import Path

import click

from curate.click_types import finite


@click.command("analyze")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for metrics.json, report.html, report.md, core_items.csv and the plots.")
@click.option("--normalization", default=None,
              help="Normalization for predictions beyond the accuracy table (default: seq_mean, char, sum, "
                   "token, byte: the first every (model, mode) has).")
@click.option("--model", "models", multiple=True, help="Only these models (repeatable; default all).")
@click.option("--modes", "modes_list", default=None, metavar="MODES",
              help="Only these prompt modes, comma-separated as curate score takes them (default all).")
@click.option("--mode", "modes", multiple=True, hidden=True)  # the old spelling, repeatable
@click.option("--length-unit", "length_units", multiple=True, default=("chars",), show_default=True,
              help="chars, bytes or tokens:<built-in model or tokenizer folder>, e.g. tokens:smollm2-135m (repeatable).")
@click.option("--core-mode", default="zero", show_default=True, help="Mode of the core analysis (none: no core section).")
@click.option("--core-threshold", type=click.IntRange(min=1), default=7, show_default=True,
              help="k reported as the core subset (its size and detectable difference).")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05, show_default=True,
              callback=finite)
@click.option("--bootstrap", "n_resamples", type=click.IntRange(min=100), default=2000, show_default=True,
              help="Paired bootstrap resamples.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap's numpy RNG.")
def analyze(workspace, out_dir, normalization, models, modes_list, modes, length_units, core_mode, core_threshold,
            alpha, n_resamples, seed):
    """Run the audit analyses on WORKSPACE and write the report into --out."""
    from curate.analyses.report import analyze_workspace

    modes = (*modes, *(m.strip() for m in (modes_list or "").split(",") if m.strip()))

    metrics = analyze_workspace(workspace, out_dir, normalization=normalization, models=models or None,
                                modes=modes or None, length_units=length_units, core_mode=core_mode,
                                core_threshold=core_threshold, alpha=alpha, n_resamples=n_resamples, seed=seed)
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
