"""The options of `curate filter` (and the audit config's ``filter`` overrides), declared once:
``curate.core.options`` derives the click options, the config schema's properties and the defaults
``curate.filter.engine.run_filter`` takes from this table."""
from __future__ import annotations

from curate.core.options import Option, defaults

FILTER = [
    Option("annotator", pattern=r"^\S+:\S+$",
           help="Annotator for conditions that name none (overrides defaults.annotator).",
           config="Annotator whose records the rules read, overriding the rules' default (e.g. one of the annotators "
                  "above)."),
    Option("tokenizer", help="Tokenizer for token lengths (overrides defaults.tokenizer): a built-in model name, "
                             "local folder or Hub id.",
           config="Tokenizer for token-length conditions, overriding the rules' default (built-in name, local folder "
                  "or Hub id)."),
]

DEFAULTS = defaults(FILTER)
