"""The options of `curate analyze`, declared once: ``curate.core.options`` derives the click options
and the options object (``AnalyzeOptions``) that ``curate.analyses.report.Analyze`` takes whole."""
from __future__ import annotations

from pathlib import Path

from curate.core.options import Option, defaults, options_class


def names_of(value) -> tuple[str, ...] | None:
    """Repeated and comma-separated names as one tuple (``--modes full,zero --mode placeholder``);
    None when none is given (every one the workspace holds)."""
    if value is None:
        return None
    parts = [value] if isinstance(value, str) else list(value)
    names = tuple(name.strip() for part in parts for name in str(part).split(",") if name.strip())
    return names or None


ANALYZE = [
    Option("out", flag="--out", required=True, path="out",
           help="Folder for metrics.json, report.html, report.md, core_items.csv and the plots."),
    Option("normalization", help="Normalization for predictions beyond the accuracy table (default: seq_mean, char, "
                                 "sum, token, byte: the first every (model, mode) has)."),
    Option("models", flag="--model", multiple=True, convert=names_of, help="Only these models (repeatable; default all)."),
    Option("modes", metavar="MODES", multiple=True, convert=names_of, aliases=("--mode",),
           help="Only these prompt modes, comma-separated as curate score takes them (default all)."),
    Option("length_units", flag="--length-unit", multiple=True, default=("chars",), convert=names_of,
           help="chars, bytes or tokens:<built-in model or tokenizer folder>, e.g. tokens:smollm2-135m (repeatable)."),
    Option("core_mode", default="zero", help="Mode of the core analysis (none: no core section)."),
    Option("core_threshold", int, 7, min=1, help="k reported as the core subset (its size and detectable difference)."),
    Option("alpha", float, 0.05, min=0, max=1, min_open=True, max_open=True),
    Option("n_resamples", int, 2000, min=100, flag="--bootstrap", help="Paired bootstrap resamples."),
    Option("seed", int, 0, help="Seed of the bootstrap's numpy RNG."),
    Option("decisions", convert=Path, help="A `curate filter --out` folder made on this workspace: the report counts "
                                           "what it removes (the audit passes its own)."),
]

DEFAULTS = defaults(ANALYZE)
AnalyzeOptions = options_class("AnalyzeOptions", ANALYZE)
