"""The forward pass: many requests per batch, each context computed once.

Each request is a prefix and its continuations. Attention lets every continuation see the
prefix and its own earlier tokens only, and position ids restart after the prefix for each
continuation, so each continuation gets exactly the numbers it would get alone after the
prefix (as lm-eval computes it), while the prefix is computed once (``scoring.layout``).

Four runners give the final hidden states, each tested against a plain one-sequence forward:

- ``llama``: Llama models through ``scoring.llama`` on the real tokens only, fused kernels;
- ``packed``: any other transformers model through its own modules over the packed tokens, our
  row groups only inside attention (``scoring.attention``);
- ``padded``: its own forward over padded rows, for models whose attention code does not go
  through transformers' attention interface;
- ``sequences``: its own forward over one plain row per continuation, the prefix copied into
  each (``layout.sequences``, lm-eval's layout, no prefix shared): for models with layers that
  cannot take a block mask (Mamba, RWKV-like and hybrid state-space models).

Which one serves a model is decided once per model by a probe (``runner_for``): the first of
them whose numbers on a few synthetic requests equal the model's own one-sequence forward. A
model none of them reproduces is refused. The logits are always the model's own (its own head
code on the wanted hidden states, ``scoring.logits``), and the log-softmax is taken in float32 a
few rows at a time, so no (tokens x vocabulary) tensor is ever kept for a whole batch. A request
longer than the batch budget is run in pieces with the model's own key/value cache.
"""
from __future__ import annotations

import random
import weakref
from dataclasses import dataclass

import numpy as np
import torch

from curate.core.errors import CurateError
from scoring import layout, llama, reference
from scoring.encode import Request, Result, Unit
from scoring.logits import decoder_name, input_device, own_logits

HEAD_LOGITS = 256 * 49152  # logits per head call on a CPU (256 rows of a 49k vocabulary): fast, and ~50 MB
REDUCE_ROWS = 8            # logit rows per softmax on a CPU: 8 x vocabulary floats stay in a core's L2 cache
GPU_HEAD_LOGITS = 2048 * 49152  # on a GPU: one softmax per head call (~400 MB), few launches and copies


def head_sizes(model, device: torch.device) -> tuple[int, int]:
    """(rows per head call, rows per softmax). A CPU reduces a few rows at a time while they are
    in cache; a GPU is held back by launches and copies to the host, so it reduces a call's rows
    at once."""
    vocab = model.get_output_embeddings().weight.shape[0]
    if device.type == "cpu":
        return max(REDUCE_ROWS, HEAD_LOGITS // vocab // REDUCE_ROWS * REDUCE_ROWS), REDUCE_ROWS
    step = max(1, GPU_HEAD_LOGITS // vocab)
    return step, step


@dataclass
class Packed:
    """A batch's real tokens in packed order (see ``scoring.layout``) and what to read off them.

    Each wanted prediction has the packed index of the hidden state that predicts it
    (``source``), its ``target`` token, and the ``group`` it adds to (one group per request
    prefix, one per continuation). A request asking for ``stats`` has its predictions' indices
    in ``stats_at`` (None for the others); ``moments`` marks them, and ``extra`` those of them
    no option score reads (a prefix whose log-probabilities were not asked for)."""
    tokens: torch.Tensor      # (tokens,)
    positions: torch.Tensor   # (tokens,) position ids: a continuation's restart after its prefix
    spans: list[layout.Span]
    source: np.ndarray
    target: np.ndarray
    group: np.ndarray
    n_groups: int
    stats_at: list | None = None
    moments: np.ndarray | None = None
    extra: np.ndarray | None = None


def pack(requests: list[Request]) -> Packed:
    tokens, positions, spans, source, target, group, stats_at, extra = [], [], [], [], [], [], [], []
    groups = 0
    for req in requests:
        first, p = len(tokens), len(req.prefix)
        fed = [max(len(c) - 1, 0) for c in req.conts]  # a continuation's last token is predicted, never fed
        spans.append(layout.Span(first, p, fed))
        tokens += req.prefix
        positions += range(p)
        prefix_group, groups = groups, groups + 1
        at = []
        if (req.prefix_lp or req.stats is not None) and p > 1:
            at += range(len(source), len(source) + p - 1)
            source += range(first, first + p - 1)
            target += req.prefix[1:]
            group += [prefix_group] * (p - 1)
            extra += [not req.prefix_lp] * (p - 1)
        for k, (cont, n) in enumerate(zip(req.conts, fed)):
            start = len(tokens)
            tokens += cont[:n]
            positions += range(p, p + n)
            if cont:
                if k == req.stats:
                    at += range(len(source), len(source) + len(cont))
                source += [first + p - 1] + list(range(start, start + n))
                target += cont
                group += [groups] * len(cont)
                extra += [False] * len(cont)
            groups += 1
        stats_at.append(np.array(at, dtype=np.int64) if req.stats is not None else None)
    moments = np.zeros(len(source), dtype=bool)
    for at in stats_at:
        if at is not None:
            moments[at] = True
    return Packed(torch.tensor(tokens, dtype=torch.long), torch.tensor(positions, dtype=torch.long), spans,
                  np.array(source, dtype=np.int64), np.array(target, dtype=np.int64),
                  np.array(group, dtype=np.int64), groups, stats_at, moments, np.array(extra, dtype=bool))


# --- the runners --------------------------------------------------------------------------------

def base_model(model):
    """The decoder under the output layer (``model.model``, ``model.transformer``, ...)."""
    return getattr(model, decoder_name(model))


def dispatched(model) -> bool:
    """Whether accelerate placed the model over several devices (``device_map``)."""
    return bool(getattr(model, "hf_device_map", None)) and len(set(model.hf_device_map.values())) > 1


def packed_hidden(model, runner: str, tokens: torch.Tensor, positions: torch.Tensor, rows, *, past=(),
                  record=None) -> torch.Tensor:
    """Final hidden states (tokens, hidden) of packed ``tokens`` through the llama or packed runner,
    attention by ``rows`` (a ``scoring.layout.RowGroups``). ``past``: cached keys and values a group
    attends to first; ``record``: receives each layer's keys and values (``scoring.prefix_cache``,
    a list for the llama runner, a dict for the packed one)."""
    from scoring import attention

    if runner == "llama":
        return llama.PackedLlama(model).hidden(tokens, positions, rows, past=past, record=record)
    with attention.packed(model, rows, positions, past=past, record=record):
        return base_model(model)(input_ids=tokens[None], position_ids=positions[None], use_cache=False,
                                 attention_mask=torch.ones((1, len(tokens)), dtype=torch.long,
                                                           device=tokens.device)).last_hidden_state[0]


def hidden_states(model, batch: Packed, runner: str, *, pad_id: int = 0) -> torch.Tensor:
    """The final hidden state of every real token, in packed order: (tokens, hidden)."""
    from scoring import attention

    device = input_device(model)
    tokens, positions = batch.tokens.to(device), batch.positions.to(device)
    if runner in ("llama", "packed"):
        return packed_hidden(model, runner, tokens, positions, layout.row_groups(batch.spans, len(tokens)))
    if runner == "sequences":  # right padding: a causal model's real tokens never see it
        rows = layout.sequences(batch.spans, batch.tokens, pad_id)
        hidden = base_model(model)(input_ids=rows.ids.to(device), use_cache=False).last_hidden_state
        return hidden.reshape(-1, hidden.shape[-1])[rows.fed.to(hidden.device)]
    rows = layout.rows(batch.spans, batch.tokens, batch.positions, pad_id)
    ids, positions = rows.ids.to(device), rows.positions.to(device)
    with attention.padded(model, positions, rows.mask.to(device)):
        hidden = base_model(model)(input_ids=ids, position_ids=positions, attention_mask=torch.ones_like(ids),
                                   use_cache=False).last_hidden_state
    return hidden.reshape(-1, hidden.shape[-1])[rows.fed.to(hidden.device)]


def runnable(model) -> list[str]:
    """The runners that could serve ``model``, fastest first. The Llama runner reads weights
    directly, so a model accelerate spread over devices or offloaded takes the module runners."""
    fast = ["llama"] if llama.supports(model) and not dispatched(model) else []
    return fast + (["packed", "padded"] if hasattr(model.config, "_attn_implementation") else []) + ["sequences"]


_CHOSEN: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def runner_for(model) -> str:
    """The fastest runner that reproduces ``model``'s own one-sequence numbers on a probe of
    synthetic requests (decided once per model); a CurateError when none does."""
    if model in _CHOSEN:
        return _CHOSEN[model]
    requests = probe_requests(model.get_input_embeddings().num_embeddings)  # not every config has vocab_size
    try:
        expected = reference.score(model, requests)
    except Exception as exc:  # nothing to compare against: the model cannot run as a causal LM
        raise CurateError(f"architecture {architecture(model)} cannot be scored: its own forward fails on a plain "
                          f"sequence ({type(exc).__name__}: {first_line(exc)})") from None
    failures = []
    for name in runnable(model):
        try:
            got = score_requests(model, requests, pad_id=0, runner=name)
        except Exception as exc:  # a model whose code cannot take this runner's layout
            failures.append(f"{name}: {type(exc).__name__}: {first_line(exc)}")
            continue
        worst = reference.worst_difference(requests, got, expected, model_dtype(model))
        if worst is None:
            _CHOSEN[model] = name
            return name
        failures.append(f"{name}: {worst}")
    raise CurateError(f"architecture {architecture(model)} cannot be scored exactly by this engine (probe against "
                      f"its own forward: {'; '.join(failures) or 'no runner applies'})")


def first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def probe_requests(vocab: int) -> list[Request]:
    """Small requests that exercise what packing changes: several continuations after one prefix
    (restarted positions, block mask), a one-token prefix, empty and one-token continuations,
    prefix log-probs."""
    rng = random.Random(0)

    def ids(n):
        return [rng.randrange(vocab) for _ in range(n)]
    return [Request(ids(7), [ids(4), ids(1), ids(6)], [0, 1, 2], prefix_lp=True),
            Request(ids(1), [ids(3), []], [0, 1]),
            Request(ids(12), [ids(2), ids(5)], [0, 1], prefix_lp=True)]


def exact_length(model) -> int | None:
    """The longest sequence this engine reproduces exactly, or None for no limit. Rotary embeddings
    that rescale past a length (``dynamic``, ``longrope``: Phi-3's long-context models, ...) take
    their frequencies from the longest position in the whole forward pass, so past that length a
    sequence's numbers would depend on what else shares its batch and on how a long row is cut."""
    limits = []
    for module in model.modules():
        kinds = getattr(module, "rope_type", None)
        if not kinds:
            continue
        for layer_type, kind in (kinds.items() if isinstance(kinds, dict) else [(None, kinds)]):
            if "dynamic" in kind:
                limits.append(int(module.original_max_seq_len))
            elif kind == "longrope":
                params = model.config.rope_parameters
                limits.append(int((params[layer_type] if layer_type else params)["original_max_position_embeddings"]))
    return min(limits, default=None)


def longest_sequence(request: Request) -> int:
    """Positions a request's longest sequence spans: its prefix and its longest continuation."""
    return len(request.prefix) + max((len(c) for c in request.conts), default=0)


def model_dtype(model) -> str:
    return str(model.get_input_embeddings().weight.dtype).removeprefix("torch.")


def architecture(model) -> str:
    return f"{type(model).__name__} ({getattr(model.config, 'model_type', '?')})"


# --- long rows: in pieces, with the model's own cache --------------------------------------------

def long_hidden(model, tokens: torch.Tensor, piece: int):
    """(start, hidden states) of one plain sequence, ``piece`` tokens at a time, each piece
    attending to the keys and values the model cached for the earlier ones: memory grows with the
    piece, not with the sequence."""
    device, base, cache = input_device(model), base_model(model), None
    for start in range(0, len(tokens), piece):
        ids = tokens[start:start + piece].to(device)[None]
        positions = torch.arange(start, start + ids.shape[1], device=device)[None]
        # ``cache``: transformers 5's name (``past_key_values`` warns that it is deprecated)
        out = base(input_ids=ids, position_ids=positions, cache=cache, use_cache=True)
        cache = out.cache
        yield start, out.last_hidden_state[0]


def split(request: Request) -> list[Request]:
    """One request per continuation (each a plain sequence); the prefix log-probs on the first,
    the statistics on the one they were asked for."""
    return [Request(request.prefix, [c], [j], request.purpose, request.prefix_lp and k == 0,
                    0 if k == request.stats else None)
            for k, (c, j) in enumerate(zip(request.conts, request.options))]


def score_long(model, request: Request, piece: int) -> Result:
    """A one-continuation request scored ``piece`` tokens at a time (``long_hidden``)."""
    batch = pack([request])
    out = [np.zeros(len(batch.source)), np.zeros(len(batch.source), dtype=bool),
           np.full(len(batch.source), np.nan), np.full(len(batch.source), np.nan)]
    for start, hidden in long_hidden(model, batch.tokens, piece):
        inside = (batch.source >= start) & (batch.source < start + len(hidden))
        got = read_off(model, hidden, batch.source[inside] - start, batch.target[inside], batch.moments[inside],
                       batch.extra[inside])
        for array, part in zip(out, got):
            array[inside] = part
    return collect([request], batch, *out)[0]


def merge(parts: list[Result]) -> Result:
    """The results of ``split`` requests as one."""
    return Result(parts[0].prefix_sum, [p.cont_sums[0] for p in parts], [p.cont_greedy[0] for p in parts],
                  next((p.stats for p in parts if p.stats is not None), None))


# --- from hidden states to log-probabilities -----------------------------------------------------

def moments(lp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of log-probabilities ``lp``: the mean and standard deviation of ``log p(z)`` for
    ``z`` drawn from that row's distribution (Min-K%++'s ``mu`` and ``sigma``)."""
    p = lp.exp()
    live = p > 0  # a token the model rules out (-inf) adds nothing to either moment
    mean = torch.where(live, p * lp, 0).sum(-1)
    var = torch.where(live, p * (lp - mean[:, None]) ** 2, 0).sum(-1)
    return mean, var.sqrt()


def predictions(model, hidden: torch.Tensor, source: np.ndarray, target: np.ndarray):
    """For each wanted prediction: the float32 log-probability of ``target`` at hidden state
    ``source``, and whether it is the top token (``predict`` without moments)."""
    return predict(model, hidden, source, target)[:2]


def predict(model, hidden: torch.Tensor, source: np.ndarray, target: np.ndarray, want: np.ndarray | None = None):
    """(log-probability, greedy, mu, sigma) of each wanted prediction: ``predictions``, and for
    those marked in ``want`` the ``moments`` of their position's distribution (NaN elsewhere). One
    head row per distinct source state (a prefix's last state predicts the first token of every
    continuation); the model's own logits (``own_logits``) for a few hundred rows at a time
    (``head_sizes``), reduced a few rows at a time on a CPU while they are still in cache."""
    rows, inverse = np.unique(source, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(rows) + 1))
    states = hidden[torch.from_numpy(rows).to(hidden.device)]
    logprob = np.zeros(len(source))
    greedy = np.zeros(len(source), dtype=bool)
    mu, sigma = np.full(len(source), np.nan), np.full(len(source), np.nan)
    row_wants = np.zeros(len(rows), dtype=bool)
    if want is not None:
        row_wants[inverse[want]] = True
    step, reduce = head_sizes(model, states.device)
    for start in range(0, len(rows), step):
        logits = own_logits(model, states[start:start + step])
        for sub in range(0, len(logits), reduce):
            first, last = start + sub, min(start + sub + reduce, len(rows))
            lp = torch.log_softmax(logits[sub:sub + reduce].float(), dim=-1)
            pairs = order[bounds[first]:bounds[last]]
            local = inverse[pairs] - first  # each pair's row in this reduction
            at = torch.from_numpy(local).to(lp.device)
            want_t = torch.from_numpy(target[pairs]).to(lp.device)
            logprob[pairs] = lp[at, want_t].double().cpu().numpy()
            greedy[pairs] = (lp.argmax(dim=-1)[at] == want_t).cpu().numpy()
            wanted = np.flatnonzero(row_wants[first:last])
            if len(wanted):  # the moments of the rows that want them only (a GPU reduces many rows at once)
                row_mu, row_sd = np.full(last - first, np.nan), np.full(last - first, np.nan)
                row_mu[wanted], row_sd[wanted] = (m.double().cpu().numpy()
                                                  for m in moments(lp[torch.from_numpy(wanted).to(lp.device)]))
                mu[pairs], sigma[pairs] = row_mu[local], row_sd[local]
    return logprob, greedy, mu, sigma


def read_off(model, hidden: torch.Tensor, source: np.ndarray, target: np.ndarray, want: np.ndarray,
             extra: np.ndarray):
    """``predict`` for a batch with statistics asked for. The predictions the option scores read
    go through the head exactly as they would without statistics (same rows, same head calls, so
    the same numbers to the last bit); the ``extra`` ones (read for statistics only) after them."""
    if not extra.any():
        return predict(model, hidden, source, target, want if want.any() else None)
    out = [np.zeros(len(source)), np.zeros(len(source), dtype=bool), np.full(len(source), np.nan),
           np.full(len(source), np.nan)]
    for part in (~extra, extra):
        got = predict(model, hidden, source[part], target[part], want[part])
        for array, values in zip(out, got):
            array[part] = values
    return tuple(out)


def collect(requests: list[Request], batch: Packed, logprob: np.ndarray, greedy: np.ndarray,
            mu: np.ndarray | None = None, sigma: np.ndarray | None = None) -> list[Result]:
    """Per-request sums of the predictions, by group, and the statistics asked for."""
    sums = np.bincount(batch.group, weights=logprob, minlength=batch.n_groups)
    misses = np.bincount(batch.group, weights=~greedy, minlength=batch.n_groups)
    results, s = [], 0
    for i, req in enumerate(requests):
        k = len(req.conts)
        at = batch.stats_at[i] if batch.stats_at else None
        results.append(Result(float(sums[s]) if req.prefix_lp else 0.0,
                              [float(x) for x in sums[s + 1:s + 1 + k]],
                              [bool(m == 0) for m in misses[s + 1:s + 1 + k]],
                              None if at is None else (logprob[at], mu[at], sigma[at])))
        s += 1 + k
    return results


@torch.inference_mode()
def score_requests(model, requests: list[Request], *, pad_id: int, runner: str | None = None,
                   max_tokens: int | None = None) -> list[Result]:
    """Score a batch of requests in one forward pass (``runner``: default ``runner_for(model)``).

    A request with more than ``max_tokens`` input tokens is split into one request per
    continuation; those that fit join the batch, and each longer one is scored alone in pieces of
    ``max_tokens`` tokens (``score_long``), so memory stays within the budget."""
    runner = runner or runner_for(model)
    work = [[r] if not max_tokens or r.n_input <= max_tokens else split(r) for r in requests]
    short = [r for parts in work for r in parts if not max_tokens or r.n_input <= max_tokens]
    done = {}
    if short:
        batch = pack(short)
        hidden = hidden_states(model, batch, runner, pad_id=pad_id)
        got = read_off(model, hidden, batch.source, batch.target, batch.moments, batch.extra)
        done = {id(r): res for r, res in zip(short, collect(short, batch, *got))}
    results = []
    for request, parts in zip(requests, work):
        # A model on the sequences runner has no key/value cache to continue from: its long
        # sequences run whole, one at a time.
        got = [done[id(p)] if id(p) in done else
               score_requests(model, [p], pad_id=pad_id, runner=runner)[0] if runner == "sequences" else
               score_long(model, p, max_tokens) for p in parts]
        results.append(got[0] if parts[0] is request else merge(got))
    return results


# --- what the engine cannot score -------------------------------------------------------------

def refuse_inexact(model, units: list[Unit], items) -> None:
    """A CurateError naming the first unit with a sequence longer than the engine reproduces
    exactly for this model (``scoring.forward.exact_length``), before anything is scored."""
    limit = exact_length(model)
    for unit in units if limit else []:
        longest = max(longest_sequence(r) for r in unit.requests)
        if longest > limit:
            raise CurateError(
                f"item {items[unit.item_index]['item_id']} ({unit.mode}): a sequence of {longest} tokens, but "
                f"{architecture(model)} rescales its rotary embedding past {limit} tokens by the length of each "
                f"forward pass, which batched scoring cannot reproduce exactly, so items this long are not scored "
                f"with this model")


def refuse_unscorable(model, units: list[Unit], items, window: int) -> None:
    """A CurateError naming the first unit that cannot be scored at all, before anything is
    scored: an option longer than the model's window (no context would be left and positions
    past the window do not exist; lm-eval refuses it too), or a token id the model has no
    embedding for (a tokenizer that does not belong to the model)."""
    rows = model.get_input_embeddings().num_embeddings
    too_long = [(u, j, n) for u in units for j, n in enumerate(u.n_tokens) if n > window]
    if too_long:
        unit, j, n = too_long[0]
        raise CurateError(f"item {items[unit.item_index]['item_id']} ({unit.mode}, {unit.formulation}): option {j} is "
                          f"{n} tokens, longer than the model's window of {window} tokens, so it cannot be scored "
                          f"(lm-eval refuses it too); {len(too_long)} option(s) in all. Score a model with a longer "
                          f"window, or ingest the benchmark without these items")
    for unit in units:
        top = max(max(seq) for r in unit.requests for seq in (r.prefix, *r.conts) if seq)
        if top >= rows:
            raise CurateError(f"item {items[unit.item_index]['item_id']} ({unit.mode}, {unit.formulation}): the "
                              f"tokenizer gives token id {top}, but the model has {rows} token embeddings: the "
                              f"tokenizer does not belong to this model")
