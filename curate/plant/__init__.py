"""Planted errors with a known key: how precisely each detector finds broken items.

``curate plant`` copies a workspace's items into a new workspace with known errors injected at a
rate, with a seed (``inject``), copies the scores that still hold and re-scores the options that
changed (``build``), and writes the key to a file outside the new workspace, where no detector
reads it. ``curate plant evaluate`` ranks the items by every detector the workspace holds and
measures each against the key (``evaluate``). The demo benchmark's hand-written plants
(``curate.demo``) are the fixed, documented case of the same idea; these are generated.
"""
from __future__ import annotations

#: Plant kinds, in the order tables list them, with what each one does to an item.
KINDS = {
    "gold_move": "the gold label moved to another option (the options unchanged; scores reused)",
    "several_correct": "a distractor replaced by a copy or light paraphrase of the gold option",
    "no_right_answer": "the gold option replaced by an option of another item",
    "swapped_question": "the question (context) replaced by another item's: every option is nonsense",
}
