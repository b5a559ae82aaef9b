"""Planted duplicates with a known key: how the duplicate search's recall and precision are measured.

A copy of an item is written as a careless re-entry would be: other letter case, doubled and
trailing white space, punctuation added or dropped, its options in another order (the gold
follows its option), and one word of the question replaced by a word from another item.
"""
from __future__ import annotations

import random
import re

_WORD = re.compile(r"[A-Za-z]{4,}")


def respelled(text: str, rng: random.Random) -> str:
    """``text`` as a careless re-entry writes it: lower case, a stop or a space added or not
    (also `curate plant`'s light paraphrase of a gold option)."""
    return text.lower() + rng.choice(["", ".", " "])


def edited_copy(item: dict, rng: random.Random, vocabulary: list[str], *, key: str) -> dict:
    """A lightly edited copy of ``item``, with item id ``key``."""
    parts = dict(item["context_parts"])
    name = max((k for k, v in parts.items() if isinstance(v, str)), key=lambda k: len(parts[k]))
    text = parts[name]
    words = list(_WORD.finditer(text))
    if words:
        w = rng.choice(words)
        text = text[:w.start()] + rng.choice([v for v in vocabulary if v.lower() != w.group().lower()]) + text[w.end():]
    text = text.upper() if rng.random() < 0.5 else text.lower()
    text = re.sub(r" ", "  ", text, count=2) + " "
    text = text.rstrip(" ?.") if text.rstrip().endswith(("?", ".")) else text.rstrip() + "?"
    parts[name] = text
    order = list(range(len(item["options"])))
    rng.shuffle(order)
    options = [respelled(item["options"][j], rng) for j in order]
    return {**item, "item_id": key, "context_parts": parts, "options": options, "gold": order.index(item["gold"])}


def plant(items: list[dict], rate: float, seed: int) -> tuple[list[dict], dict[str, str]]:
    """``items`` plus edited copies of ``rate`` of them (at least one), and the key: copy id ->
    original id."""
    rng = random.Random(seed)
    vocabulary = sorted({w.group() for it in items for v in it["context_parts"].values()
                         if isinstance(v, str) for w in _WORD.finditer(v)})
    chosen = rng.sample(items, max(1, round(rate * len(items))))
    copies = [edited_copy(it, rng, vocabulary, key=f"{it['item_id']}/copy") for it in chosen]
    return items + copies, {c["item_id"]: it["item_id"] for c, it in zip(copies, chosen)}


def recall_precision(pairs, key: dict[str, str], baseline_clusters: dict[str, int]) -> tuple[float, float]:
    """Recall: the share of copies paired with their original. Precision: of the pairs that
    involve a copy, the share pairing it with its original or with an item the search already
    called a copy of the original before anything was planted (``baseline_clusters``)."""
    found, involving, right = set(), 0, 0
    for p in pairs:
        for copy, other in ((p.a, p.b), (p.b, p.a)):
            if copy not in key:
                continue
            involving += 1
            original = key[copy]
            same = other == original or (original in baseline_clusters and
                                         baseline_clusters.get(other) == baseline_clusters[original])
            right += same
            if other == original:
                found.add(copy)
    return len(found) / len(key), (right / involving if involving else 1.0)
