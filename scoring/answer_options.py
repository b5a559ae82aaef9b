"""The options of `curate import-answers` (and of each of the audit config's ``answers.imports``),
declared once: ``curate.core.options`` derives the click options, the config schema's properties
and the options object (``ImportAnswersOptions``). The files to read are the command's PATHS and
an import's ``path``, not an option."""
from __future__ import annotations

from curate.core.names import MAX_LENGTH, model_name
from curate.core.options import Option, defaults, options_class
from curate.items.references import HOW, OPTION_HOW
from scoring.answer_imports import get, names

#: What each format reads, as `--format`'s help and the config schema say it.
FORMATS_TEXT = " ".join(f"{name}: {get(name).DESCRIPTION}." for name in names())

IMPORT_ANSWERS = [
    Option("format", flag="--format", required=True, choices=tuple(names()), help=FORMATS_TEXT, config=FORMATS_TEXT),
    Option("model", convert=model_name, max_length=MAX_LENGTH,
           help="Store under this model name (default: the log's or results file's; a table's model column).",
           config="Store the answers under this model name (default: the log's or results file's; a table's model "
                  "column)."),
    Option("filter", flag="--filter",
           help="lm-eval-generate: the filter whose answers to read, when the samples hold several.",
           config="lm-eval-generate only: the filter whose answers to read, when the samples hold several."),
    Option("item_as", choices=HOW[1:], metavar="id|own|row",
           help="table: how the item column names items: the workspace's item id, the benchmark's own id (an id "
                "column the ingest kept) or the row [default: each cell as it reads; one naming two items two "
                "ways, as most cells of the column read, or refused when no way reads more].",
           config="table only: how the item column names items: id (the workspace's item id), own (the benchmark's "
                  "own id) or row (default: each cell as it reads; one naming two items two ways, as most cells of "
                  "the column read)."),
    Option("choice_as", choices=OPTION_HOW[1:], metavar="index|letter|text",
           help="table: how the choice column names options: 0-based index, letter (A first) or the option's text "
                "[default: each cell as it reads; one naming two options two ways, such as MMLU's option '2' of "
                "['8', '2', '24', '120'], as most cells of the column read, or refused when no way reads more].",
           config="table only: how the choice column names options: index (0-based), letter (A first) or text "
                  "(default: each cell as it reads; one naming two options two ways, as most cells of the column "
                  "read)."),
    Option("encoding", help="table: the CSV or JSON file's encoding [default: UTF-8, or detected for CSV].",
           config="table only: the CSV or JSON file's encoding (default: UTF-8, or detected for CSV)."),
    Option("delimiter", help="table: the CSV field delimiter [default: detected].",
           config="table only: the CSV field delimiter (default: detected)."),
]

DEFAULTS = defaults(IMPORT_ANSWERS)
ImportAnswersOptions = options_class("ImportAnswersOptions", IMPORT_ANSWERS)


def reading(options) -> dict:
    """The keywords ``scoring.answer_imports.import_answers`` and ``read_files`` take from an
    options object (every option but the format)."""
    return {o.name: getattr(options, o.name) for o in IMPORT_ANSWERS if o.name != "format"}
