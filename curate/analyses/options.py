"""The options of `curate analyze`, declared once: ``curate.core.options`` derives the click options
and the defaults ``curate.analyses.report.analyze_workspace`` takes from this table."""
from __future__ import annotations

from curate.core.options import Option, defaults

ANALYZE = [
    Option("normalization", help="Normalization for predictions beyond the accuracy table (default: seq_mean, char, "
                                 "sum, token, byte: the first every (model, mode) has)."),
    Option("core_mode", default="zero", help="Mode of the core analysis (none: no core section)."),
    Option("core_threshold", int, 7, min=1, help="k reported as the core subset (its size and detectable difference)."),
    Option("alpha", float, 0.05, min=0, max=1, min_open=True, max_open=True),
    Option("n_resamples", int, 2000, min=100, flag="--bootstrap", help="Paired bootstrap resamples."),
    Option("seed", int, 0, help="Seed of the bootstrap's numpy RNG."),
    Option("decisions", help="A `curate filter --out` folder made on this workspace: the report counts what it "
                             "removes (the audit passes its own)."),
]

DEFAULTS = defaults(ANALYZE)
