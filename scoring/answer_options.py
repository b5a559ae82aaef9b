"""The options of `curate import-answers` (and of each of the audit config's ``answers.imports``),
declared once: ``curate.core.options`` derives the click options, the config schema's properties
and the options object (``ImportAnswersOptions``). The files to read are the command's PATHS and
an import's ``path``, not an option."""
from __future__ import annotations

from curate.core.options import Option, defaults, options_class
from scoring.answer_imports import get, names

#: What each format reads, as `--format`'s help and the config schema say it.
FORMATS_TEXT = " ".join(f"{name}: {get(name).DESCRIPTION}." for name in names())

IMPORT_ANSWERS = [
    Option("format", flag="--format", required=True, choices=tuple(names()), help=FORMATS_TEXT, config=FORMATS_TEXT),
    Option("model", help="Store under this model name (default: the log's or results file's; a table's model column).",
           config="Store the answers under this model name (default: the log's or results file's; a table's model "
                  "column)."),
    Option("filter", flag="--filter",
           help="lm-eval-generate: the filter whose answers to read, when the samples hold several.",
           config="lm-eval-generate only: the filter whose answers to read, when the samples hold several."),
]

DEFAULTS = defaults(IMPORT_ANSWERS)
ImportAnswersOptions = options_class("ImportAnswersOptions", IMPORT_ANSWERS)
