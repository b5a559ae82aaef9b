"""The options of `curate init` that say what to read (and the audit config's ``benchmark``
keys of the same names), declared once: ``curate.core.options`` derives the click options, the
config schema's properties and the options object (``IngestOptions``, with ``data``) that
``curate.items.ingest.Ingest`` takes whole.

Not in ``INGEST``: ``--data`` (``DATA``: the config splits it into ``path`` and ``hub``, which
resolve differently); not here: ``--benchmark`` (the adapters' registry) and ``--columns``
(``curate.items.adapters.columns``), `curate init`'s own (``curate.items.cli``).
"""
from __future__ import annotations

from curate.core.options import Option, defaults, options_class

INGEST = [
    Option("split", help="Split to ingest [default: the benchmark's, else validation].",
           config="Split to ingest (default: a built-in benchmark's own split, else validation)."),
    Option("config", help="Configuration of a Hub dataset (e.g. ARC-Challenge), or the subfolder of a local --data "
                          "folder holding one configuration [built-ins: their own].",
           config="The Hub dataset's configuration, e.g. ARC-Challenge; with path, the per-configuration subfolder "
                  "of a local Hub-layout folder."),
    Option("revision", help="Pin a Hub dataset to this commit/tag.",
           config="Hub commit sha or tag to pin (hub only)."),
    Option("copy_of", metavar="OWNER/NAME[@REV]",
           help="The Hub dataset a local --data file is a copy of; releases name it as the source."),
    Option("delimiter", max_length=1, help="CSV: the field delimiter [default: detected].",
           config="CSV field delimiter (path only; default: detected)."),
    Option("encoding", help="CSV or JSON: the file's encoding [default: UTF-8, or detected for CSV].",
           config="Encoding of a CSV or JSON file (path only; default: UTF-8, or detected for CSV)."),
    Option("limit", int, min=1, nullable=True, help="Ingest only the first N rows.",
           config="Ingest only the first N rows."),
]

DEFAULTS = defaults(INGEST)

#: Where the rows come from: a local path or a Hub id (None: a built-in's own Hub dataset).
DATA = Option("data", help="Local file/folder (.jsonl .json .parquet .csv .arrow) or a Hub dataset id "
                            "(built-in benchmarks: default their Hub id).")
IngestOptions = options_class("IngestOptions", [DATA, *INGEST])
