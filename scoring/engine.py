"""The forward pass: many requests per batch, each context computed once.

Each request becomes one row ``[prefix, cont_1[:-1], cont_2[:-1], ...]``. A block attention
mask lets every continuation see the prefix and its own earlier tokens only, and position ids
restart after the prefix for each continuation, so each continuation gets exactly the numbers
it would get alone after the prefix (as lm-eval computes it), while the prefix is computed once.

Two ways to get the hidden states: Llama-family models run through ``scoring.llama`` on the
real tokens only; any other causal LM runs through its own transformers forward on the padded
rows. Either way only the hidden states that predict a wanted token reach the output
projection, and the log-softmax is taken in float32 a few rows at a time (see ``head``), so no
(tokens x vocabulary) tensor is ever kept for a whole batch.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import torch

from scoring import llama
from scoring.encode import Request

HEAD_ROWS = 256   # hidden states per output-projection product (large enough to run at full speed)
REDUCE_ROWS = 8   # logit rows per softmax reduction: 8 x vocabulary floats stay in a core's L2 cache


@dataclass
class Result:
    """Per request: sum of the prefix tokens' log-probs (from the second token on; 0 when not
    asked), and each continuation's log-prob sum and whether it is the greedy continuation."""
    prefix_sum: float
    cont_sums: list[float]
    cont_greedy: list[bool]


@dataclass
class Packed:
    """A batch laid out for the model.

    ``ids``/``positions`` are (rows, length), padded; ``mask`` is the boolean block mask
    (rows, length, length); ``fed`` holds the flat padded index of each real token, in order
    (its position in ``fed`` is the token's packed index). Each wanted prediction has the
    packed index of the hidden state that predicts it (``source``), its ``target`` token, and
    the ``group`` it adds to (one group per request prefix, one per continuation)."""
    ids: torch.Tensor
    positions: torch.Tensor
    mask: torch.Tensor
    fed: torch.Tensor
    source: np.ndarray
    target: np.ndarray
    group: np.ndarray
    n_groups: int


def pack(requests: list[Request], pad_id: int) -> Packed:
    length = max(max(r.n_input for r in requests), 1)
    ids = torch.full((len(requests), length), pad_id, dtype=torch.long)
    pos = torch.zeros((len(requests), length), dtype=torch.long)
    mask = torch.zeros((len(requests), length, length), dtype=torch.bool)
    mask[:, torch.arange(length), torch.arange(length)] = True  # padding sees itself: no empty rows
    fed, source, target, group = [], [], [], []
    groups = 0
    for b, req in enumerate(requests):
        first = len(fed)  # packed index of this row's first token
        fed += range(b * length, b * length + req.n_input)
        p = len(req.prefix)
        ids[b, :p] = torch.tensor(req.prefix)
        pos[b, :p] = torch.arange(p)
        mask[b, :p, :p] = torch.ones(p, p, dtype=torch.bool).tril()
        prefix_group, groups = groups, groups + 1
        if req.prefix_lp and p > 1:
            source += range(first, first + p - 1)
            target += req.prefix[1:]
            group += [prefix_group] * (p - 1)
        start = p
        for cont in req.conts:
            n = len(cont) - 1  # the last token is predicted, never fed
            if n > 0:
                ids[b, start:start + n] = torch.tensor(cont[:-1])
                pos[b, start:start + n] = torch.arange(p, p + n)
                mask[b, start:start + n, :p] = True
                mask[b, start:start + n, start:start + n] = torch.ones(n, n, dtype=torch.bool).tril()
            if cont:
                source += [first + p - 1] + list(range(first + start, first + start + n))
                target += cont
                group += [groups] * len(cont)
            groups += 1
            start += max(n, 0)
    return Packed(ids, pos, mask, torch.tensor(fed, dtype=torch.long), np.array(source, dtype=np.int64),
                  np.array(target, dtype=np.int64), np.array(group, dtype=np.int64), groups)


_FAST: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def fast_path(model):
    """The packed Llama runner for ``model`` (built once per model), or None for other models."""
    if model not in _FAST:
        _FAST[model] = llama.PackedLlama(model) if llama.supports(model) else None
    return _FAST[model]


def hidden_states(model, batch: Packed) -> torch.Tensor:
    """The final hidden state of every real token, in packed order: (tokens, hidden)."""
    fast = fast_path(model)
    if fast is None:
        return generic_hidden(model, batch)
    device = next(model.parameters()).device
    fed = batch.fed.to(device)
    return fast.hidden(batch.ids.to(device).view(-1)[fed], batch.positions.to(device).view(-1)[fed], fed,
                       batch.mask.to(device))


def generic_hidden(model, batch: Packed) -> torch.Tensor:
    """``hidden_states`` through the model's own transformers forward on the padded rows, with
    the block mask as an additive 4D attention mask: works for any causal LM."""
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    mask = batch.mask.to(device)
    additive = torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill_(~mask, torch.finfo(dtype).min)
    base = getattr(model, model.base_model_prefix)
    hidden = base(input_ids=batch.ids.to(device), position_ids=batch.positions.to(device),
                  attention_mask=additive[:, None], use_cache=False).last_hidden_state
    return hidden.reshape(-1, hidden.shape[-1])[batch.fed.to(device)]


def logit_transform(model, logits: torch.Tensor) -> torch.Tensor:
    """Output logits in float32 with the transforms some architectures apply after the
    projection (Granite's scaling, Gemma's soft-capping)."""
    logits = logits.float()
    config = model.config
    scaling = getattr(config, "logits_scaling", None)
    if scaling:
        logits = logits / scaling
    cap = getattr(config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def head(model, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The float32 log-sum-exp of the output logits and their argmax, for each row of ``states``.

    The projection runs HEAD_ROWS rows at a time; the reduction then runs REDUCE_ROWS rows at a
    time, so the logits it reads are still in cache (a whole chunk's float32 logits would be
    read from memory several times over)."""
    output = model.get_output_embeddings()
    lse = torch.empty(len(states), dtype=torch.float32, device=states.device)
    best = torch.empty(len(states), dtype=torch.long, device=states.device)
    for start in range(0, len(states), HEAD_ROWS):
        chunk = output(states[start:start + HEAD_ROWS])
        for sub in range(0, len(chunk), REDUCE_ROWS):
            logits = logit_transform(model, chunk[sub:sub + REDUCE_ROWS])
            top, arg = logits.max(dim=-1, keepdim=True)
            at = slice(start + sub, start + sub + len(logits))
            best[at] = arg[:, 0]
            lse[at] = (logits - top).exp_().sum(dim=-1).log_() + top[:, 0]
    return lse, best


def target_logits(model, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The output logit of ``targets[i]`` at ``states[i]``: one dot product each, in float32."""
    output = model.get_output_embeddings()
    logit = (states.float() * output.weight[targets].float()).sum(dim=-1)
    if output.bias is not None:
        logit = logit + output.bias[targets].float()
    return logit_transform(model, logit)


@torch.inference_mode()
def score_requests(model, requests: list[Request], *, pad_id: int) -> list[Result]:
    """Score a batch of requests in one forward pass."""
    batch = pack(requests, pad_id)
    hidden = hidden_states(model, batch)
    # One head row per distinct predicting state: a prefix's last state predicts the first
    # token of every continuation.
    rows, inverse = np.unique(batch.source, return_inverse=True)
    states = hidden[torch.from_numpy(rows).to(hidden.device)]
    inverse = torch.from_numpy(inverse).to(hidden.device)
    targets = torch.from_numpy(batch.target).to(hidden.device)
    lse, best = head(model, states)
    logprob = target_logits(model, states[inverse], targets) - lse[inverse]
    logprob, greedy = logprob.double().cpu().numpy(), (best[inverse] == targets).cpu().numpy()
    sums = np.bincount(batch.group, weights=logprob, minlength=batch.n_groups)
    misses = np.bincount(batch.group, weights=~greedy, minlength=batch.n_groups)
    results, s = [], 0
    for req in requests:
        k = len(req.conts)
        results.append(Result(float(sums[s]) if req.prefix_lp else 0.0,
                              [float(x) for x in sums[s + 1:s + 1 + k]],
                              [bool(m == 0) for m in misses[s + 1:s + 1 + k]]))
        s += 1 + k
    return results
