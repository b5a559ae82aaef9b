"""Where the tokens of a packed batch sit when attention runs.

A batch's real tokens are numbered in order (the packed index): each request's prefix, then the
fed tokens of each continuation (all but its last token). A continuation must see the prefix and
its own earlier tokens, never another continuation. Two layouts give exactly that:

- ``rows`` (for a model's own transformers forward): one padded row per request,
  ``[prefix, cont_1[:-1], cont_2[:-1], ...]``, with a block mask and position ids that restart
  after the prefix for each continuation;
- ``segments`` (for ``scoring.llama``, whose linear layers run on the packed tokens): one
  attention segment per prefix (causal over itself) and one per continuation (its tokens as
  queries over the prefix's keys and its own), batched in groups of similar length. No query is
  ever scored against another continuation's keys, so attention does about half the work.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

GROUP_KEYS = 2048  # key slots (segments x longest) per attention call


@dataclass
class Span:
    """One request in packed order: its first token's packed index, prefix length, and the
    number of fed tokens of each continuation."""
    first: int
    prefix: int
    conts: list[int]


@dataclass
class Rows:
    ids: torch.Tensor        # (rows, length), padded
    positions: torch.Tensor  # (rows, length)
    mask: torch.Tensor       # (rows, length, length) boolean block mask
    fed: torch.Tensor        # (tokens,) flat padded index of each packed token


def rows(spans: list[Span], tokens: torch.Tensor, positions: torch.Tensor, pad_id: int) -> Rows:
    length = max(max(s.prefix + sum(s.conts) for s in spans), 1)
    ids = torch.full((len(spans), length), pad_id, dtype=torch.long)
    pos = torch.zeros((len(spans), length), dtype=torch.long)
    mask = torch.zeros((len(spans), length, length), dtype=torch.bool)
    mask[:, torch.arange(length), torch.arange(length)] = True  # padding sees itself: no empty rows
    fed = []
    for b, span in enumerate(spans):
        n = span.prefix + sum(span.conts)
        fed += range(b * length, b * length + n)
        ids[b, :n] = tokens[span.first:span.first + n]
        pos[b, :n] = positions[span.first:span.first + n]
        p = span.prefix
        mask[b, :p, :p] = torch.ones(p, p, dtype=torch.bool).tril()
        start = p
        for c in span.conts:
            mask[b, start:start + c, :p] = True
            mask[b, start:start + c, start:start + c] = torch.ones(c, c, dtype=torch.bool).tril()
            start += c
    return Rows(ids, pos, mask, torch.tensor(fed, dtype=torch.long))


@dataclass
class Group:
    """Segments attended in one call: ``queries`` (segments x q_len) and ``keys``
    (segments x k_len) hold packed indices (padding points at a real token and is masked);
    ``mask`` is (segments, q_len, k_len)."""
    queries: torch.Tensor
    keys: torch.Tensor
    mask: torch.Tensor

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.mask.shape


@dataclass
class Segments:
    groups: list[Group]
    query_slot: torch.Tensor  # (tokens,) each packed token's place among all groups' queries


def segments(spans: list[Span], n_tokens: int) -> Segments:
    """Segments as (queries, keys, offset): query j sees keys up to offset + j."""
    prefixes, continuations = [], []
    for span in spans:
        prefix = list(range(span.first, span.first + span.prefix))
        prefixes.append((prefix, prefix, 0))
        start = span.first + span.prefix
        for c in span.conts:
            if c:
                own = list(range(start, start + c))
                continuations.append((own, prefix + own, span.prefix))
            start += c
    groups, query_slot, offset = [], torch.empty(n_tokens, dtype=torch.long), 0
    for kind in (prefixes, continuations):
        kind.sort(key=lambda s: -len(s[1]))
        start = 0
        while start < len(kind):
            k_len = len(kind[start][1])
            end = start + max(1, GROUP_KEYS // k_len)
            group = group_of(kind[start:end])
            n, q_len, _ = group.shape
            for b, (queries, _, _) in enumerate(kind[start:end]):
                query_slot[queries] = torch.arange(offset + b * q_len, offset + b * q_len + len(queries))
            groups.append(group)
            offset += n * q_len
            start = end
    return Segments(groups, query_slot)


def group_of(segs) -> Group:
    q_len, k_len = max(len(q) for q, _, _ in segs), max(len(k) for _, k, _ in segs)
    queries = torch.empty((len(segs), q_len), dtype=torch.long)
    keys = torch.empty((len(segs), k_len), dtype=torch.long)
    n_keys, offsets = torch.empty(len(segs), dtype=torch.long), torch.empty(len(segs), dtype=torch.long)
    for b, (q, k, off) in enumerate(segs):
        queries[b] = torch.tensor(q + [q[0]] * (q_len - len(q)))
        keys[b] = torch.tensor(k + [k[0]] * (k_len - len(k)))
        n_keys[b], offsets[b] = len(k), off
    j, key = torch.arange(q_len)[None, :, None], torch.arange(k_len)[None, None, :]
    mask = (key <= offsets[:, None, None] + j) & (key < n_keys[:, None, None])
    return Group(queries.view(-1), keys.view(-1), mask)
