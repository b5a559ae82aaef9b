"""The measurements behind length, near-duplicate and correctness conditions, on real items."""
from __future__ import annotations

import numpy as np
import pandas as pd
from rapidfuzz import fuzz

from curate.items import lengths as measured
from curate.filter import features


def test_relative_spread_and_gold_longest():
    lengths = np.array([[10, 7, 10, 5], [4, 4, 4, 4], [3, 9, 6, np.nan]])
    assert np.allclose(measured.relative_spread(lengths), [0.5, 0.0, 2 / 3])
    gold = np.array([0, 1, 1])
    assert measured.gold_is_longest(lengths, gold).tolist() == [True, True, True]        # ties count
    assert measured.gold_is_longest(lengths, gold, strict=True).tolist() == [False, False, True]
    assert features.in_range(np.array([0.1, 0.2, 0.3, 0.4]), {"gt": 0.15, "le": 0.3}).tolist() == [False, True, True, False]


def test_chars_bytes_and_context_texts():
    item = {"options": ["café", "tea"], "prompts": {"full": "Order:", "zero": ""}}
    assert measured.texts([item], "context+option", "full") == [["Order: café", "Order: tea"]]
    assert measured.texts([item], "context+option", "zero") == [["café", "tea"]]
    texts = measured.texts([item], "options", "full")
    assert measured.measure(texts, "chars").tolist() == [[4, 3]]
    assert measured.measure(texts, "bytes").tolist() == [[5, 3]]


def test_near_duplicates_on_real_hellaswag_items(hellaswag_ws):
    from curate.items.store import Workspace
    with Workspace.open(hellaswag_ws) as ws:
        items = ws.items()[:500]
    sims = features.max_pair_similarity([it["options"] for it in items], fuzz.ratio)
    assert sims.shape == (500,) and (sims >= 0).all() and (sims <= 100).all()
    # The most similar pair found really is that similar.
    i = int(sims.argmax())
    opts = items[i]["options"]
    assert max(fuzz.ratio(a, b) for a in opts for b in opts if a is not b) == sims[i]


def test_correct_counts_count_models_that_pick_gold():
    preds = pd.DataFrame({"model": ["a", "b", "c", "a", "b", "c"], "item_id": ["x", "x", "x", "y", "y", "y"],
                          "pred": [0, 0, 1, 2, 2, 2]})
    counts = features.correct_counts(preds, {"x": 0, "y": 1}, ["a", "b", "c"], ["x", "y"])
    assert counts.tolist() == [2, 0]
    assert features.correct_counts(preds, {"x": 0, "y": 1}, ["c"], ["x", "y"]).tolist() == [0, 0]
