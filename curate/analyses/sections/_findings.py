"""The report's first screen: what the audit found, in one block the sections contribute to.

A section may define ``findings(m) -> list`` next to its ``render``: from the metrics alone, a
list of

- ``Flag(signal, n, of, note)``: a line "SIGNAL: n of `of` items", linked to the section (or to
  ``href``): how many items one signal flags;
- ``Sentence(text)``: a sentence of the block's plain-language paragraph (our prose with `code`
  spans, or parts with ``render.Lit`` workspace text, as a paragraph takes);
- ``Items(rows)``: the most likely broken items, ``(label, href, note)`` each, href to the item's
  page or anchor;
- ``Table(caption, frame)``: a small table (accuracy per model and mode, with intervals).

``block`` gathers every section's contributions, in report order, into one ("box", "findings",
...) render block: the paragraph first, then the flags beside the tables and the items, then
links to the sections, so a reader of the first screen (1280 x 800) sees what the audit found
before any detail. A new signal adds its line by adding ``findings`` to its own section file.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

ANCHOR = "findings"


@dataclass(frozen=True)
class Flag:
    signal: str
    n: int
    of: int
    note: str = ""
    href: str | None = None     # default: the contributing section's anchor


@dataclass(frozen=True)
class Sentence:
    text: str | list


@dataclass(frozen=True)
class Items:
    rows: list = field(default_factory=list)   # (label, href or None, note)


@dataclass(frozen=True)
class Table:
    caption: str
    frame: pd.DataFrame


def percent(n: int, of: int) -> str:
    return f"{100 * n / of:.1f}%" if of else "n/a"


def block(contributions: list[tuple[str, list]], contents: list[tuple[str, str]]) -> tuple:
    """The findings block from ``(section anchor, its findings)`` pairs in report order, and
    ``(heading, anchor)`` of every section shown (the "details follow" links)."""
    flags, sentences, items, tables = [], [], [], []
    for anchor, found in contributions:
        for f in found:
            if isinstance(f, Flag):
                flags.append((f.signal, f.href or f"#{anchor}", f"{f.n} of {f.of} items ({percent(f.n, f.of)})"
                              + (f", {f.note}" if f.note else "")))
            elif isinstance(f, Sentence):
                sentences += [f.text] if isinstance(f.text, str) else list(f.text)
                sentences.append(" ")
            elif isinstance(f, Items):
                items += f.rows
            elif isinstance(f, Table):
                tables += [("p", f.caption), ("table", f.frame)]
    left = [("h3", "Items flagged, per signal")] + ([("links", flags)] if flags else
                                                     [("p", "No signal flags any item here.")])
    right = tables + ([("h3", "Review first"), ("links", items)] if items else [])
    body = [("h2", "What this audit found")]
    if sentences:
        body.append(("p", sentences[:-1]))
    body.append(("cols", [left, right]) if right else ("cols", [left]))
    if contents:
        body.append(("nav", "Details follow:", [(heading, f"#{anchor}") for heading, anchor in contents]))
    return ("box", ANCHOR, body)
