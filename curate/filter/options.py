"""The options of `curate filter` (and the audit config's ``filter`` overrides), declared once:
``curate.core.options`` derives the click options, the config schema's properties and the options
object (``FilterOptions``) ``curate.filter.run.Filter`` takes whole."""
from __future__ import annotations

from curate.core.options import Option, defaults, options_class

FILTER = [
    Option("rules", flag="--rules", required=True, path="file",
           help="Rules file (YAML, schemas/rules.schema.json), e.g. rules/goldenswag.yaml.",
           config="Rules YAML (schemas/rules.schema.json), relative to the config file."),
    Option("out", flag="--out", required=True, path="out",
           help="Folder for decisions.parquet, stages.csv, rules.yaml and summary.json.",
           config="Folder for decisions.parquet and stages.csv."),
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
FilterOptions = options_class("FilterOptions", FILTER)
