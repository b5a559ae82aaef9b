"""The options of `curate duplicates`, declared once: ``curate.core.options`` derives the click
options and the options object (``DuplicatesOptions``) ``curate.items.duplicates.search.Duplicates``
takes whole."""
from __future__ import annotations

from curate.core.options import Option, options_class
from curate.items.duplicates.detect import THRESHOLD


def splits_of(value: str) -> str | tuple[str, ...]:
    """``all``, ``none``, or the split names separated by commas (a tuple)."""
    names = [s.strip() for s in str(value).split(",") if s.strip()]
    if not names:
        raise ValueError("name splits, or 'all' or 'none'")
    return names[0] if names in (["all"], ["none"]) else tuple(names)


DUPLICATES = [
    Option("splits", default="all", convert=splits_of,
           help="The benchmark's other splits to compare with: 'all' (every one of train, dev, validation, test "
                "its source holds), 'none', or names separated by commas."),
    Option("against", multiple=True, default=(), metavar="SPEC",
           help="Another benchmark to compare with (repeatable): a workspace folder, or BENCHMARK[:DATA][@SPLIT] "
                "for a built-in benchmark (DATA: a local file or folder, or a Hub id)."),
    Option("threshold", float, THRESHOLD, min=0.5, max=1.0,
           help="Similarity (0-1) of the normalised texts from which two items are near duplicates."),
]

DuplicatesOptions = options_class("DuplicatesOptions", DUPLICATES)
