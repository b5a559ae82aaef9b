"""The options of `curate import-scores` (and of each of the audit config's ``scoring.imports``),
declared once: ``curate.core.options`` derives the config schema's properties and the options
object (``ImportScoresOptions``) the audit builds from its config. The formats are the
registry's (``scoring.imports``)."""
from __future__ import annotations

from curate.core.options import Option, defaults, options_class
from scoring.imports import get, names

#: What each format reads, as `--format`'s choices and the config schema say it.
FORMATS_TEXT = " ".join(f"{name}: {get(name).DESCRIPTION}." for name in names())

IMPORT_SCORES = [
    Option("format", flag="--format", required=True, choices=tuple(names()), help=FORMATS_TEXT, config=FORMATS_TEXT),
    Option("dir", flag="--dir", path="folder", help="The folder to import (or give PATHS).",
           config="Folder of the scores, relative to the config file."),
    Option("label", help="Store under this model name (lm-eval-samples; default: the results file's)."),
    Option("replace", bool, False,
           help="Replace stored scores of the same model and mode that came from elsewhere (refused without it)."),
    Option("quiet", bool, False, help="No progress bar."),
]

DEFAULTS = defaults(IMPORT_SCORES)
ImportScoresOptions = options_class("ImportScoresOptions", IMPORT_SCORES)
