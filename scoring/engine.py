"""The forward pass: many requests per batch, each context computed once.

Each request is a prefix and its continuations. Attention lets every continuation see the
prefix and its own earlier tokens only, and position ids restart after the prefix for each
continuation, so each continuation gets exactly the numbers it would get alone after the
prefix (as lm-eval computes it), while the prefix is computed once (``scoring.layout``).

Two ways to get the hidden states: Llama-family models run through ``scoring.llama`` on the
real tokens only; any other causal LM runs through its own transformers forward on padded
rows. Either way only the hidden states that predict a wanted token reach the output
projection, and the log-softmax is taken in float32 a few rows at a time (see ``head``), so no
(tokens x vocabulary) tensor is ever kept for a whole batch.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from scoring import layout, llama
from scoring.encode import Request
from scoring.linear import fused_available, linear

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
    """A batch's real tokens in packed order (see ``scoring.layout``) and what to read off them.

    Each wanted prediction has the packed index of the hidden state that predicts it
    (``source``), its ``target`` token, and the ``group`` it adds to (one group per request
    prefix, one per continuation)."""
    tokens: torch.Tensor      # (tokens,)
    positions: torch.Tensor   # (tokens,) position ids: a continuation's restart after its prefix
    spans: list[layout.Span]
    source: np.ndarray
    target: np.ndarray
    group: np.ndarray
    n_groups: int


def pack(requests: list[Request]) -> Packed:
    tokens, positions, spans, source, target, group = [], [], [], [], [], []
    groups = 0
    for req in requests:
        first, p = len(tokens), len(req.prefix)
        fed = [max(len(c) - 1, 0) for c in req.conts]  # a continuation's last token is predicted, never fed
        spans.append(layout.Span(first, p, fed))
        tokens += req.prefix
        positions += range(p)
        prefix_group, groups = groups, groups + 1
        if req.prefix_lp and p > 1:
            source += range(first, first + p - 1)
            target += req.prefix[1:]
            group += [prefix_group] * (p - 1)
        for cont, n in zip(req.conts, fed):
            start = len(tokens)
            tokens += cont[:n]
            positions += range(p, p + n)
            if cont:
                source += [first + p - 1] + list(range(start, start + n))
                target += cont
                group += [groups] * len(cont)
            groups += 1
    return Packed(torch.tensor(tokens, dtype=torch.long), torch.tensor(positions, dtype=torch.long), spans,
                  np.array(source, dtype=np.int64), np.array(target, dtype=np.int64),
                  np.array(group, dtype=np.int64), groups)


def fast_path(model):
    """The packed Llama runner for ``model`` (it only reads the config: cheap), or None for other
    models."""
    return llama.PackedLlama(model) if llama.supports(model) else None


def hidden_states(model, batch: Packed, *, pad_id: int = 0) -> torch.Tensor:
    """The final hidden state of every real token, in packed order: (tokens, hidden)."""
    fast = fast_path(model)
    if fast is None:
        return generic_hidden(model, batch, pad_id=pad_id)
    device = next(model.parameters()).device
    return fast.hidden(batch.tokens.to(device), batch.positions.to(device),
                       layout.row_groups(batch.spans, len(batch.tokens)))


def generic_hidden(model, batch: Packed, *, pad_id: int = 0) -> torch.Tensor:
    """``hidden_states`` through the model's own transformers forward on padded rows (the block
    mask as an additive 4D attention mask): works for any causal LM."""
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    rows = layout.rows(batch.spans, batch.tokens, batch.positions, pad_id)
    mask = rows.mask.to(device)
    additive = torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill_(~mask, torch.finfo(dtype).min)
    base = getattr(model, model.base_model_prefix)
    hidden = base(input_ids=rows.ids.to(device), position_ids=rows.positions.to(device),
                  attention_mask=additive[:, None], use_cache=False).last_hidden_state
    return hidden.reshape(-1, hidden.shape[-1])[rows.fed.to(device)]


def logit_transform(model, logits: torch.Tensor) -> torch.Tensor:
    """Output logits with the transforms some architectures apply after the projection
    (Granite's scaling, Gemma's soft-capping), computed in float32; returned as they are when
    the model has none."""
    config = model.config
    scaling = getattr(config, "logits_scaling", None)
    cap = getattr(config, "final_logit_softcapping", None)
    if scaling:
        logits = logits.float() / scaling
    if cap:
        logits = torch.tanh(logits.float() / cap) * cap
    return logits


def head(model, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The float32 log-sum-exp of the output logits and their argmax, for each row of ``states``.

    The projection runs HEAD_ROWS rows at a time; the reduction then runs REDUCE_ROWS rows at a
    time, so the logits it reads are still in cache (a whole chunk's float32 logits would be
    read from memory several times over). The log-sum-exp comes out of torch's fused
    ``log_softmax`` (two passes over the row) as the top logit minus its log-probability:
    exact to float32 rounding, as the top log-probability is close to zero."""
    output = model.get_output_embeddings()
    lse = torch.empty(len(states), dtype=torch.float32, device=states.device)
    best = torch.empty(len(states), dtype=torch.long, device=states.device)
    fused = fused_available(states)
    for start in range(0, len(states), HEAD_ROWS):
        chunk = linear(states[start:start + HEAD_ROWS], output, fused=fused)
        for sub in range(0, len(chunk), REDUCE_ROWS):
            logits = logit_transform(model, chunk[sub:sub + REDUCE_ROWS])
            top, arg = logits.max(dim=-1, keepdim=True)
            at = slice(start + sub, start + sub + len(logits))
            best[at] = arg[:, 0]
            lse[at] = (top.float() - torch.log_softmax(logits, dim=-1, dtype=torch.float32).gather(1, arg))[:, 0]
    return lse, best


def target_logits(model, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The output logit of ``targets[i]`` at ``states[i]``: one dot product each, accumulated in
    float32. In bfloat16 this is closer to the float32 model's number than the projection's
    rounded output (measured: mean |logprob_sum - float32| 0.129 against 0.139 on 200 items)."""
    output = model.get_output_embeddings()
    logit = (states.float() * output.weight[targets].float()).sum(dim=-1)
    if output.bias is not None:
        logit = logit + output.bias[targets].float()
    return logit_transform(model, logit)


@torch.inference_mode()
def score_requests(model, requests: list[Request], *, pad_id: int) -> list[Result]:
    """Score a batch of requests in one forward pass."""
    batch = pack(requests)
    hidden = hidden_states(model, batch, pad_id=pad_id)
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
