"""The options of `curate annotate` (and the audit config's ``annotators[]`` entries), declared
once; ``claude_options`` also serves `curate generate`, which asks Claude the same way.

``curate.core.options`` derives the click options, the config schema's properties and the options
object (``AnnotateOptions``) ``annotate.run.Annotate`` takes whole.
"""
from __future__ import annotations

from curate.core.options import Option, defaults, options_class

QUIET = Option("quiet", bool, False, help="No progress bar.", aliases=("--no-progress",))
LIMIT = Option("limit", int, min=1, help="Only the first N items (row order).")


def claude_options(parse_retries: int, parse_help: str) -> list[Option]:
    """What a stage asking Claude through the API takes (requests in flight, spend, retries)."""
    return [
        Option("concurrency", int, 4, min=1, help="anthropic: requests in flight.", config="Requests in flight at once."),
        Option("max_cost", float, min=0, min_open=True, nullable=True,
               help="anthropic: send a request only when its worst case (re-asks included) fits: this run never "
                    "spends more than USD.",
               config="Stop before spending more than this many US dollars (per round)."),
        Option("retries", int, 6, min=0, backend="anthropic",
               help="anthropic: retries per request on 408/429/5xx/529, timeouts and connection errors."),
        Option("parse_retries", int, parse_retries, min=0, backend="anthropic", help=parse_help),
        Option("backoff", float, 1.0, min=0, backend="anthropic",
               help="anthropic: first retry delay in seconds (doubles each time)."),
        Option("timeout", float, 60.0, min=0.1, backend="anthropic", help="anthropic: seconds per API request."),
        Option("key_header", backend="anthropic",
               help="anthropic: also send ANTHROPIC_API_KEY in this header (for compatible servers reading e.g. "
                    "x-api-key)."),
    ]


ANNOTATE = [
    Option("round", int, required=True, min=1, max=2, help="Round 1 (quality labels) or 2 (which options are right)."),
    Option("annotator", required=True,
           help="anthropic:MODEL (e.g. anthropic:claude-haiku-4-5) or a local model, local:NAME or NAME (e.g. "
                "smollm2-135m)."),
    Option("batch", bool, False, help="anthropic: send through the Message Batches API (half price, slower).",
           config="Use the Message Batches API (anthropic only)."),
    *claude_options(2, "Re-asks when a reply cannot be read; then the record is 'invalid'."),
    Option("dry_run", bool, False, help="Count items, tokens (the endpoint's count_tokens, else an upper bound) "
                                        "and the most it could cost; send nothing."),
    LIMIT,
    Option("poll_interval", float, 30.0, min=0, backend="anthropic", help="--batch: seconds between status checks."),
    QUIET,
]

DEFAULTS = defaults(ANNOTATE)
#: The annotate stage's options: one object, every value checked on construction.
AnnotateOptions = options_class("AnnotateOptions", ANNOTATE)

#: `curate import-verdicts`: judges' verdicts on items from files (annotate.verdict_import).
IMPORT_VERDICTS = [
    Option("format", flag="--format", required=True, choices=("table",),
           help="table: a table of judge, item (id, the benchmark's own id, or row), verdict (ok, error, wrong-key, "
                "several-correct, no-right-answer, unclear) and optional answer: .csv, .jsonl/.json or .parquet."),
    Option("judge", help="Store under this judge (for a table of one judge without a judge column)."),
]
ImportVerdictsOptions = options_class("ImportVerdictsOptions", IMPORT_VERDICTS)
