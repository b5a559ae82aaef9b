"""Exact and near-duplicate items, from their text alone (pure functions).

An item is compared as the benchmark writes it: its question (its context parts) and its
options as a set, so reordered options do not hide a copy. Texts are normalised first
(Unicode NFKC, case folded, punctuation dropped, white space collapsed): two items whose
normalised texts are equal are *exact* duplicates. Near duplicates are found in two steps:
MinHash over character 5-grams with locality-sensitive hashing (``datasketch``) proposes
candidate pairs cheaply, and each candidate is verified with an edit-distance similarity
(``rapidfuzz``'s normalised Indel ratio), so a pair is reported only when its texts really are
that close:

- ``both``: the whole text (question and options) is at least ``threshold`` similar and at most
  ``MAX_EDIT`` characters apart, and each of the question and the option set at least
  ``PART_THRESHOLD`` similar: a copy, perhaps edited;
- ``question``: the question alone is as similar and as close, and long enough
  (``QUESTION_WORDS``) to be more than a stock stem, with other options: the same question asked
  again.

A huge item (a long passage pasted into a question) costs a bounded amount of work: a text over
``MAX_CHARS`` characters is *long*; MinHash hashes at most ``MAX_SHINGLES`` of its 5-grams, and the
edit distances that decide a pair are banded to ``MAX_EDIT`` (rapidfuzz's ``score_cutoff``), which
reads the whole text in time proportional to its length. Only a similarity of two texts more than
``MAX_EDIT`` apart, one of them long (the option sets of a same-question pair, say), is measured on
part of them.

Texts that differ in a number are different questions however close (MMLU's "What is 3 + 5?"
and "What is 4 + 5?", template items filled with other values): a near pair must hold the same
numbers. The question's similarity is taken part by part where both items have the same parts (the
lowest part counts), so BoolQ's several questions on one passage, or MMLU's "Statement 1 |
Statement 2" items under one True/False option set, are not called copies of each other. An
option set shared by items with different questions is common (True/False, yes/no templates)
and is not reported.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import numpy as np
from datasketch import MinHash, MinHashLSH
from rapidfuzz.distance import Indel

#: Default similarity (0-1, of the normalised question + options) from which a pair is reported.
THRESHOLD = 0.85
#: LSH proposes pairs whose estimated 5-gram Jaccard is about this or more; well below what the
#: similarity threshold implies, so a one-word change in a short item is still proposed.
LSH_THRESHOLD = 0.4
#: Each of question and options must be this similar for a ``both`` pair.
PART_THRESHOLD = 0.7
#: At most this many characters inserted or deleted (normalised text) for a near duplicate: a
#: copy is lightly edited, whereas items written from one long template (MMLU's moral scenarios,
#: one passage with several questions) differ in a whole clause however similar in ratio.
MAX_EDIT = 40
#: A question-only match needs a question of at least this many words.
QUESTION_WORDS = 8
NUM_PERM = 128
SHINGLE = 5
#: A normalised text over this many characters is long (no item in ../shared/data is: the longest
#: has 4,751); the two caps below apply to long texts only, so shorter ones are compared in full.
MAX_CHARS = 10_000
#: MinHash hashes at most this many of a long text's distinct 5-grams, those with the smallest hashes: a
#: sample chosen by the text itself, so a copy keeps nearly the same sample wherever it was edited.
#: It only proposes candidates; the edit distance below decides.
MAX_SHINGLES = 10_000
_PUNCT = re.compile(r"[^\w\s]|_", re.UNICODE)
_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class Entry:
    """One item to compare: ``key`` names it (an item id), ``collection`` says where it comes
    from (``workspace``, another split, another benchmark), ``question`` and ``options`` are its
    text as written."""
    key: str
    collection: str
    question: tuple[tuple[str, str], ...]   # (part name, text) in the benchmark's order
    options: tuple[str, ...]


@dataclass(frozen=True)
class Pair:
    a: str                 # keys, ordered by (collection, key)
    b: str
    collection_a: str
    collection_b: str
    similarity: float      # of the whole normalised text (1.0 for exact duplicates)
    question_similarity: float
    options_similarity: float
    field: str             # "both" or "question": see the module docstring
    exact: bool


def normalise(text: str) -> str:
    """The text two copies share after case, spacing and punctuation edits."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE.sub(" ", _PUNCT.sub(" ", text)).strip()


def question_parts(item: dict) -> tuple[tuple[str, str], ...]:
    """The question as the benchmark writes it: the item's text context parts, in order."""
    parts = item.get("context_parts") or {}
    return tuple((k, v) for k, v in parts.items() if isinstance(v, str) and v.strip())


def entry(item: dict, collection: str) -> Entry:
    return Entry(item["item_id"], collection, question_parts(item), tuple(item["options"]))


@dataclass(frozen=True)
class _Text:
    parts: dict          # part name -> normalised text
    question: str
    options: str
    whole: str
    numbers: tuple       # the numbers in the question, then in the options, sorted within each


def _text(e: Entry) -> _Text:
    parts = {k: normalise(v) for k, v in e.question}
    question = " ".join(parts.values())
    options = " | ".join(sorted(normalise(o) for o in e.options))
    numbers = (tuple(sorted(_NUMBER.findall(question))), tuple(sorted(_NUMBER.findall(options))))
    return _Text(parts, question, options, f"{question} || {options}", numbers)


def _clip(text: str) -> str:
    """A long text's first and last ``MAX_CHARS // 2`` characters; a shorter text whole."""
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS // 2] + text[-(MAX_CHARS // 2):]


def _similarity(a: str, b: str) -> float:
    """Indel similarity (0-1): exact when the texts are at most ``MAX_EDIT`` apart or neither is
    long; otherwise that of their clipped texts, so a long text never costs a comparison
    quadratic in its length."""
    apart = Indel.distance(a, b, score_cutoff=MAX_EDIT)  # banded: linear in the texts' length
    if apart <= MAX_EDIT:
        return 1.0 - apart / (len(a) + len(b)) if a or b else 1.0  # rapidfuzz's own formula
    return Indel.normalized_similarity(_clip(a), _clip(b))


def _question_similarity(x: _Text, y: _Text) -> float:
    if x.parts.keys() == y.parts.keys() and len(x.parts) > 1:
        return min(_similarity(x.parts[k], y.parts[k]) for k in x.parts)
    return _similarity(x.question, y.question)


def _shingles(text: str) -> list[int]:
    """The text's byte 5-grams as 32-bit hashes, computed in numpy (each 5-gram is read as a
    40-bit integer and mixed by a multiplicative hash): what MinHash hashes one by one. Of a long
    text, only the ``MAX_SHINGLES`` smallest distinct hashes."""
    data = np.frombuffer(text.encode("utf-8").ljust(SHINGLE, b" "), dtype=np.uint8).astype(np.uint64)
    grams = np.lib.stride_tricks.sliding_window_view(data, SHINGLE) @ (np.uint64(256) ** np.arange(SHINGLE, dtype=np.uint64))
    hashes = (grams * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)
    if len(text) > MAX_CHARS:
        hashes = np.unique(hashes)[:MAX_SHINGLES]  # np.unique sorts
    return hashes.tolist()


def _verdict(x: _Text, y: _Text, threshold: float) -> tuple[str, float, float, float] | None:
    """(field, similarity, question similarity, options similarity), or None: not a pair."""
    if x.numbers[0] != y.numbers[0]:
        return None
    # Either field needs texts at most MAX_EDIT apart: measured first, banded, it settles most
    # candidates cheaply however long their texts.
    apart = Indel.distance(x.whole, y.whole, score_cutoff=MAX_EDIT)
    question_apart = Indel.distance(x.question, y.question, score_cutoff=MAX_EDIT)
    if apart > MAX_EDIT and question_apart > MAX_EDIT:
        return None
    q = _question_similarity(x, y)
    o = _similarity(x.options, y.options)
    whole = _similarity(x.whole, y.whole)
    if (whole >= threshold and x.numbers == y.numbers and apart <= MAX_EDIT
            and q >= PART_THRESHOLD and o >= PART_THRESHOLD):
        return "both", whole, q, o
    if (q >= threshold and question_apart <= MAX_EDIT
            and min(len(x.question.split()), len(y.question.split())) >= QUESTION_WORDS):
        return "question", q, q, o
    return None


def find_pairs(entries: list[Entry], *, threshold: float = THRESHOLD, cross_only: set[str] | None = None,
               progress=None, long: list[Entry] | None = None) -> list[Pair]:
    """Every pair of entries whose normalised texts are at least ``threshold`` similar, best
    first. ``cross_only`` restricts the pairs to those with at least one entry in these
    collections (pairs wholly inside another benchmark are not this audit's business). The
    entries whose text is long (the caps applied) are appended to ``long`` when given, for the
    search to say so."""
    texts = [_text(e) for e in entries]
    if long is not None:
        long.extend(e for e, t in zip(entries, texts) if len(t.whole) > MAX_CHARS)
    wanted = (lambda i, j: True) if cross_only is None else (
        lambda i, j: entries[i].collection in cross_only or entries[j].collection in cross_only)
    lsh = MinHashLSH(threshold=LSH_THRESHOLD, num_perm=NUM_PERM)
    hashes = MinHash.generator((_shingles(t.whole) for t in texts), num_perm=NUM_PERM, hashfunc=int)
    candidates: set[tuple[int, int]] = set()
    by_text: dict[str, int] = {}
    for i, (t, h) in enumerate(zip(texts, hashes)):
        for j in lsh.query(h):  # the index holds the first of each exact group: pair with it here,
            candidates.add((min(j, i), max(j, i)))  # with the rest of its group below
        if by_text.setdefault(t.whole, i) == i:
            lsh.insert(i, h)
        if progress is not None:
            progress.update(1)
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(texts):  # every member of an exact group pairs with every other
        groups.setdefault(t.whole, []).append(i)
    for members in groups.values():
        candidates.update((members[x], members[y]) for x in range(len(members)) for y in range(x + 1, len(members)))
    for j, i in list(candidates):  # a pair with an exact group's first is a pair with each member
        candidates.update((min(m, i), max(m, i)) for m in groups[texts[j].whole] if m != i)
    pairs = []
    for i, j in candidates:
        if not wanted(i, j):
            continue
        verdict = _verdict(texts[i], texts[j], threshold)
        if verdict is None:
            continue
        field, sim, q, o = verdict
        a, b = sorted((i, j), key=lambda k: (entries[k].collection, entries[k].key))
        pairs.append(Pair(entries[a].key, entries[b].key, entries[a].collection, entries[b].collection,
                          round(sim, 6), round(q, 6), round(o, 6), field, texts[i].whole == texts[j].whole))
    pairs.sort(key=lambda p: (-p.similarity, p.a, p.b))
    return pairs


def clusters(pairs: list[Pair]) -> dict[tuple[str, str], int]:
    """Cluster number per (collection, key): connected components of the pairs (union-find),
    numbered from 0 in order of each cluster's smallest member."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def root(k):
        while parent.setdefault(k, k) != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for p in pairs:
        ra, rb = root((p.collection_a, p.a)), root((p.collection_b, p.b))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    members: dict = {}
    for k in list(parent):
        members.setdefault(root(k), []).append(k)
    order = sorted(members, key=lambda r: min(members[r]))
    return {k: n for n, r in enumerate(order) for k in members[r]}
