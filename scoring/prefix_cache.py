"""Token prefixes shared by many rows of a run, each computed once and kept as keys and values.

A few-shot run repeats one header (a subject's description and its five dev examples, some 500
tokens) before every item of a subject; an instruction or HellaSwag's activity label repeats in
the same way. ``score_requests`` computes every request's prefix in full. Here:

- ``shared_groups`` finds them: the requests' prefixes sorted, the longest prefix common to
  neighbours read off, and the requests split into groups, each sharing its first L tokens, so
  that the tokens saved, (members - 1) x L over all groups, is largest (L is never the whole of a
  member's prefix: its last token must be fed to predict its continuations);
- ``Caches.get`` computes a group's shared tokens once through the model's runner and keeps every
  layer's keys and values (``Cached``), at most ``--prefix-cache-mb`` of them;
- ``score_with_caches`` scores a batch: each request's remaining tokens at positions after its
  shared prefix, its rows attending first to the prefix's cached keys and values, then, as in
  ``score_requests``, to their own prefix and themselves. Requests with and without a cached
  prefix share one forward pass.

The numbers are those of the model's own one-sequence forward (the same runners, head and
log-softmax; ``tests/test_prefix_cache.py`` and the self-check compare them). Runners that take
a cache: ``llama`` and ``packed`` (through ``scoring.attention``); on the others (``padded``,
``sequences``) and for a prefix whose keys and values do not fit the bound every row is computed
in full by ``score_requests``: recomputed, never dropped.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np
import torch

from scoring import layout
from scoring.encode import Request, Result, Unit
from scoring.forward import collect, pack, packed_hidden, predict, predictions, read_off, runner_for, score_requests
from scoring.logits import input_device

CACHING_RUNNERS = ("llama", "packed")
MIN_SHARED = 64  # shorter common prefixes save less than their own row groups and cache forward cost (0-shot HellaSwag)


# --- finding shared prefixes ---------------------------------------------------------------------

def common_length(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def shared_groups(prefixes: list[list[int]], min_shared: int = MIN_SHARED) -> list[tuple[int, list[int]]]:
    """Groups of at least two prefixes as (shared length L, their indices): every member starts
    with the same L >= ``min_shared`` tokens and has at least one more; the groups maximize the
    tokens saved, sum of (members - 1) x L. Prefixes in no group are not listed."""
    order = sorted(range(len(prefixes)), key=lambda i: prefixes[i])
    cap = [len(prefixes[i]) - 1 for i in order]  # a member's last prefix token is always fed
    lcp = [min(common_length(prefixes[a], prefixes[b]), cap[k], cap[k + 1])
           for k, (a, b) in enumerate(zip(order, order[1:]))]
    groups = []
    # Each range of sorted prefixes either shares its smallest neighbour overlap m as one group,
    # or splits where the overlap is m and each part decides alone (the LCP interval tree).
    stack = [(0, len(order) - 1)]
    decided: dict[tuple[int, int], tuple[int, list]] = {}
    while stack:
        lo, hi = stack[-1]
        if hi <= lo:
            decided[lo, hi] = (0, [])
            stack.pop()
            continue
        m = min(lcp[lo:hi])
        cuts = [lo] + [k + 1 for k in range(lo, hi) if lcp[k] == m] + [hi + 1]
        parts = [(a, b - 1) for a, b in zip(cuts, cuts[1:])]
        todo = [p for p in parts if p not in decided]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        split_saving = sum(decided[p][0] for p in parts)
        split_groups = [g for p in parts for g in decided[p][1]]
        whole = (hi - lo) * m if m >= min_shared else 0
        decided[lo, hi] = (whole, [(m, (lo, hi))]) if whole > 0 and whole >= split_saving else \
            (split_saving, split_groups)
    for length, (lo, hi) in decided[0, len(order) - 1][1] if order else []:
        groups.append((length, sorted(order[lo:hi + 1])))
    return sorted(groups, key=lambda g: g[1][0])


def shared_lengths(requests: list[Request], min_shared: int = MIN_SHARED) -> list[int]:
    """Per request, the length of the prefix it shares with other requests (0: none)."""
    out = [0] * len(requests)
    for length, members in shared_groups([r.prefix for r in requests], min_shared):
        for i in members:
            out[i] = length
    return out


# --- the cached keys and values ------------------------------------------------------------------

@dataclass
class Cached:
    """A shared prefix computed once: each layer's keys and values as the runner keeps them,
    the final hidden states (for the prefix's own log-probabilities and the prediction of the
    first token after it), and their size in bytes."""
    tokens: tuple
    layers: object           # llama: [(keys, values)] per layer; packed: {attention module: (keys, values)}
    hidden: torch.Tensor     # (L, hidden)
    nbytes: int
    _own: float | None = field(default=None, repr=False)
    _stats: tuple | None = field(default=None, repr=False)

    def own_logprob(self, model) -> float:
        """Sum of the log-probabilities of the prefix's tokens from the second on."""
        if self._own is None:
            source = np.arange(len(self.tokens) - 1)
            logprob, _ = predictions(model, self.hidden, source, np.array(self.tokens[1:], dtype=np.int64))
            self._own = float(logprob.sum())
        return self._own

    def own_stats(self, model) -> tuple:
        """``Result.stats`` of the prefix's tokens from the second on, computed once."""
        if self._stats is None:
            source = np.arange(len(self.tokens) - 1)
            logprob, _, mu, sigma = predict(model, self.hidden, source, np.array(self.tokens[1:], dtype=np.int64),
                                            np.ones(len(source), dtype=bool))
            self._stats = (logprob, mu, sigma)
        return self._stats


def tensor_bytes(layers) -> int:
    pairs = layers.values() if isinstance(layers, dict) else layers
    return sum(t.numel() * t.element_size() for pair in pairs for t in pair)


def compute(model, runner: str, tokens: tuple) -> Cached:
    """Feed ``tokens`` as one plain sequence through ``runner``, recording its keys and values."""
    device = input_device(model)
    ids = torch.tensor(tokens, dtype=torch.long, device=device)
    rows = layout.row_groups([layout.Span(0, len(tokens), [])], len(tokens))
    record = [] if runner == "llama" else {}
    hidden = packed_hidden(model, runner, ids, torch.arange(len(tokens), device=device), rows, record=record)
    return Cached(tokens, record, hidden, tensor_bytes(record) + hidden.numel() * hidden.element_size())


_PER_TOKEN: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def bytes_per_token(model) -> int:
    """What one cached prefix token takes (all layers' keys and values, its hidden state),
    measured once per model on a two-token prefix."""
    if model not in _PER_TOKEN:
        runner = runner_for(model)
        _PER_TOKEN[model] = compute(model, runner, (0, 0)).nbytes // 2 if runner in CACHING_RUNNERS else 0
    return _PER_TOKEN[model]


class Caches:
    """The shared prefixes computed so far, at most ``max_bytes`` of them: a prefix is kept from
    its first batch to its last (``keep_only``); one that would not fit is not cached and its
    rows are computed in full."""

    def __init__(self, model, max_bytes: int):
        self.model, self.max_bytes, self.held = model, max_bytes, {}
        self.prefixes = self.prefix_tokens = self.fed = 0  # what was computed, for the run's summary

    def fits(self, length: int) -> bool:
        return 0 < length * bytes_per_token(self.model) <= self.max_bytes

    def keep_only(self, wanted) -> None:
        self.held = {k: v for k, v in self.held.items() if k in wanted}

    def get(self, tokens: tuple) -> Cached:
        if tokens not in self.held:
            self.held[tokens] = compute(self.model, runner_for(self.model), tokens)
            self.prefixes, self.prefix_tokens = self.prefixes + 1, self.prefix_tokens + len(tokens)
        return self.held[tokens]

    def summary(self) -> dict:
        """Shared prefixes computed, their tokens, and all tokens fed (those and every row after its
        cached prefix, or whole)."""
        return {"prefixes": self.prefixes, "prefix_tokens": self.prefix_tokens,
                "fed_tokens": self.prefix_tokens + self.fed}



# --- scoring against the cache -------------------------------------------------------------------

def after(request: Request, shared: int) -> Request:
    """The part of ``request`` fed after its first ``shared`` prefix tokens."""
    return Request(request.prefix[shared:], request.conts, request.options, request.purpose, request.prefix_lp,
                   request.stats)


def plan_rows(spans: list[layout.Span], past_of: list[int], n_tokens: int) -> layout.RowGroups:
    """``layout.row_groups`` per cached prefix (a group's rows all attend to the same one)."""
    groups, slot, offset = [], torch.empty(n_tokens, dtype=torch.long), 0
    for past in sorted(set(past_of)):
        part = [s for s, p in zip(spans, past_of) if p == past]
        rows = layout.row_groups(part, n_tokens)
        for g in rows.groups:
            groups.append(layout.Group(g.index, g.mask, past))
        for s in part:
            n = s.prefix + sum(s.conts)
            slot[s.first:s.first + n] = rows.slot[s.first:s.first + n] + offset
        offset += sum(g.index.numel() for g in rows.groups)
    return layout.RowGroups(groups, slot)


def hidden_with_past(model, runner: str, batch, rows: layout.RowGroups, caches: list[Cached]) -> torch.Tensor:
    device = input_device(model)
    return packed_hidden(model, runner, batch.tokens.to(device), batch.positions.to(device), rows,
                         past=[c.layers for c in caches])


def score_with_caches(model, requests: list[Request], shared: list[int], caches: Caches, *, pad_id: int,
                      max_tokens: int | None = None) -> list[Result]:
    """``score_requests(model, requests)``'s results, request i's first ``shared[i]`` prefix
    tokens taken from ``caches`` (0: none; a prefix that does not fit is computed in full)."""
    runner = runner_for(model)
    shared = [s if s and runner in CACHING_RUNNERS and caches.fits(s) else 0 for s in shared]
    caches.fed += sum(after(r, s).n_input for r, s in zip(requests, shared))
    if runner not in CACHING_RUNNERS:
        return score_requests(model, requests, pad_id=pad_id, runner=runner, max_tokens=max_tokens)
    alone = [i for i, r in enumerate(requests)  # longer than the budget: in pieces, in full
             if max_tokens and after(r, shared[i]).n_input > max_tokens]
    skip = set(alone)
    here = [i for i in range(len(requests)) if i not in skip]
    results: dict[int, Result] = {}
    if alone:
        results.update(zip(alone, score_requests(model, [requests[i] for i in alone], pad_id=pad_id, runner=runner,
                                                 max_tokens=max_tokens)))
    if here:
        results.update(zip(here, forward(model, runner, [requests[i] for i in here], [shared[i] for i in here],
                                         caches)))
    return [results[i] for i in range(len(requests))]


@torch.inference_mode()
def forward(model, runner: str, requests: list[Request], shared: list[int], caches: Caches) -> list[Result]:
    """One forward pass over the requests' tokens after their cached prefixes."""
    keys = list(dict.fromkeys(tuple(r.prefix[:s]) for r, s in zip(requests, shared) if s))
    held = [caches.get(k) for k in keys]
    slot = {k: j for j, k in enumerate(keys)}
    past_of = [slot[tuple(r.prefix[:s])] if s else -1 for r, s in zip(requests, shared)]
    batch = pack([after(r, s) for r, s in zip(requests, shared)])
    extra_source, extra_target, extra_group, group = [], [], [], 0
    stats_only, stats_wanted = [], []  # per extra prediction: read for statistics only / for them too
    for i, (span, s, past, request) in enumerate(zip(batch.spans, shared, past_of, requests)):
        batch.positions[span.first:span.first + span.prefix + sum(span.conts)] += s
        if s and (request.prefix_lp or request.stats is not None):  # the first token after the cached part,
            if request.stats is not None:                             # predicted by its last state
                at = len(batch.source) + len(extra_source)
                batch.stats_at[i] = np.concatenate([[at], batch.stats_at[i]]).astype(np.int64)
            extra_source.append(len(batch.tokens) + past)
            extra_target.append(request.prefix[s])
            extra_group.append(group)
            stats_only.append(not request.prefix_lp)
            stats_wanted.append(request.stats is not None)
        group += 1 + len(request.conts)
    hidden = hidden_with_past(model, runner, batch, plan_rows(batch.spans, past_of, len(batch.tokens)), held)
    if held:
        hidden = torch.cat([hidden, torch.stack([c.hidden[-1] for c in held]).to(hidden.device)])
    source = np.concatenate([batch.source, np.array(extra_source, dtype=np.int64)])
    target = np.concatenate([batch.target, np.array(extra_target, dtype=np.int64)])
    batch.group = np.concatenate([batch.group, np.array(extra_group, dtype=np.int64)])
    extra = np.concatenate([batch.extra, np.array(stats_only, dtype=bool)])
    want = np.concatenate([batch.moments, np.array(stats_wanted, dtype=bool)])
    results = collect(requests, batch, *read_off(model, hidden, source, target, want, extra))
    for result, request, s, past in zip(results, requests, shared, past_of):
        if s and request.prefix_lp:
            result.prefix_sum += held[past].own_logprob(model)
        if s and result.stats is not None:
            result.stats = tuple(np.concatenate(pair) for pair in zip(held[past].own_stats(model), result.stats))
    return results


def score_shared_requests(model, requests: list[Request], *, pad_id: int, max_tokens: int | None = None,
                          max_bytes: int = 2**40) -> list[Result]:
    """``score_requests``'s results with the prefixes these requests share computed once (the
    self-check scores a run's first units this way, as the run does)."""
    return score_with_caches(model, requests, shared_lengths(requests), Caches(model, max_bytes), pad_id=pad_id,
                             max_tokens=max_tokens)


# --- a run's plan --------------------------------------------------------------------------------

@dataclass
class Batch:
    units: list[Unit]
    shared: list[int]  # per request of the units, in order: its cached prefix length (0: none)

    @property
    def requests(self) -> list[Request]:
        return [r for u in self.units for r in u.requests]

    def prefixes(self) -> set[tuple]:
        return {tuple(r.prefix[:s]) for r, s in zip(self.requests, self.shared) if s}


def plan(units: list[Unit], batch_tokens: int, *, model=None, max_bytes: int = 0,
         min_shared: int = MIN_SHARED) -> list[Batch]:
    """The run's batches: the units whose requests share a prefix (whose keys and values fit
    ``max_bytes``) next to each other, so each prefix is computed once and held only while its
    batches run; each batch's rows (after their cached prefixes) x longest row within
    ``batch_tokens``, its cached prefixes within ``max_bytes`` together; longest groups first."""
    requests = [r for u in units for r in u.requests]
    per_token = bytes_per_token(model) if model is not None and max_bytes > 0 else 0
    lengths = ([n if n * per_token <= max_bytes else 0 for n in shared_lengths(requests, min_shared)]
               if per_token else [0] * len(requests))
    shared, k = [], 0
    for u in units:
        shared.append(lengths[k:k + len(u.requests)])
        k += len(u.requests)
    rows = [max(after(r, s).n_input for r, s in zip(u.requests, sh)) for u, sh in zip(units, shared)]
    group = [next((tuple(r.prefix[:s]) for r, s in zip(u.requests, sh) if s), ("unit", i))
             for i, (u, sh) in enumerate(zip(units, shared))]
    longest: dict = {}
    for g, n in zip(group, rows):
        longest[g] = max(longest.get(g, 0), n)
    first = {g: i for i, g in reversed(list(enumerate(group)))}
    order = sorted(range(len(units)), key=lambda i: (-longest[group[i]], first[group[i]], -rows[i], units[i].item_index,
                                                     units[i].mode, units[i].formulation, units[i].fewshot))
    out, current, n_rows, top, held = [], [], 0, 0, {}
    for i in order:
        unit = units[i]
        new = {tuple(r.prefix[:s]): s for r, s in zip(unit.requests, shared[i]) if s}
        grown_rows, grown_top, grown_held = n_rows + len(unit.requests), max(top, rows[i]), {**held, **new}
        if current and (grown_rows * grown_top > batch_tokens or sum(grown_held.values()) * per_token > max_bytes):
            out.append(Batch([units[j] for j in current], [s for j in current for s in shared[j]]))
            current, grown_rows, grown_top, grown_held = [], len(unit.requests), rows[i], new
        current.append(i)
        n_rows, top, held = grown_rows, grown_top, grown_held
    if current:
        out.append(Batch([units[j] for j in current], [s for j in current for s in shared[j]]))
    return out
