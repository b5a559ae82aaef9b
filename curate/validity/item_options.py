"""The option of the commands reading item validity (`curate export WORKSPACE item-stats`, `curate
plant evaluate`), declared once and spelled as `curate score --fewshot`; kept apart from
``curate.validity.item_table`` so that loading the CLI does not load the analyses."""
from __future__ import annotations

from dataclasses import dataclass

from curate.core.options import Option

FEWSHOT = Option("fewshot", int, None, min=0, metavar="K",
                 help="Read the scores made after K shots (as curate score --fewshot K) [default: the shot count "
                      "with the most models scored; ties: the fewest shots].")


@dataclass(frozen=True)
class ByRule:
    """A shot count not named: the one item validity's rule picks among ``models``
    (``curate.validity.item_table.pick_fewshot``), as the audit plan works it out."""
    models: tuple[str, ...]
