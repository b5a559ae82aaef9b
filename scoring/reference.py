"""The plain reference: each continuation scored alone by the model's own one-sequence forward.

``model(prefix + continuation, use_cache=False).logits``, log-softmax in float32, the continuation's tokens read
off: no packing, no shared prefix, no block mask, no head of ours. It is the independent oracle and
uses nothing of the engine it checks. The engine's numbers are checked against it by the probe that
picks a runner (``scoring.forward.runner_for``) and by the self-check before a scoring run stores
anything (``scoring.self_check``); tests check it against lm-evaluation-harness.

``TOLERANCE`` is how far the engine may be from it per predicted token, plus ``RELATIVE`` of the
reference's own size. Float32 differs only by the order of additions; in bfloat16 and float16
every layer's output is rounded, and packed rows take other kernels than one sequence does (the
Llama runner attends in float32 on a CPU), so the same numbers differ more, and more the further
a token's logit lies below the top one: SmolLM2-135M in bfloat16 on random tokens (the probe's)
gives -55.8 against its own forward's -54.9 for three tokens.
"""
from __future__ import annotations

import inspect

import torch

from scoring.encode import Result
from scoring.logits import input_device

TOLERANCE = {"float32": 2e-4, "bfloat16": 0.08, "float16": 0.03}  # nats per predicted token
FLOOR = {"float32": 1e-3, "bfloat16": 0.3, "float16": 0.1}       # nats per continuation, at least
RELATIVE = {"float32": 0.0, "bfloat16": 0.03, "float16": 0.005}   # of the reference's |log-probability|


@torch.inference_mode()
def score(model, requests) -> list:
    """A ``Result`` for each request (a ``scoring.encode.Request``), from one plain forward per
    distinct fed sequence: continuations whose ``prefix + continuation[:-1]`` are equal (every
    one-token continuation of a lettered item) are read off one forward, as lm-eval groups them;
    the logits of that forward are the same whichever of them is read."""
    device, results = input_device(model), []
    for req in requests:
        p = len(req.prefix)
        sums, greedy, prefix_sum = [0.0] * len(req.conts), [False] * len(req.conts), 0.0
        fed = {}
        for k, cont in enumerate(req.conts):
            fed.setdefault(tuple(req.prefix + cont[:-1]), []).append(k)
        for tokens, which in fed.items():
            first = 0 if req.prefix_lp else p - 1  # positions whose log-probabilities are read
            read = Positions(model, torch.tensor([list(tokens)], device=device), first)
            for k in which:
                sums[k], greedy[k] = read(range(p - 1, p - 1 + len(req.conts[k])), req.conts[k])
            if req.prefix_lp:
                prefix_sum, _ = read(range(p - 1), req.prefix[1:])
        results.append(Result(prefix_sum, sums, greedy))
    return results


class Positions:
    """The model's own forward over ``ids`` (1, T), read at positions ``first`` on: float32
    log-softmax of its logits, as lm-eval takes it. Only those positions' logits are asked of the
    model where its forward takes ``logits_to_keep``, and the log-softmax runs 256 positions at a
    time: a 1000-token row's logits alone are 200 MB for a 49k vocabulary, and a float32 copy of
    them all would double that."""

    def __init__(self, model, ids: torch.Tensor, first: int):
        # No cache: one forward needs none, and some models' default cache breaks on it
        # (Bamba's hybrid cache, an encoder-decoder's decoder used alone).
        keep = ids.shape[1] - first
        extra = {"logits_to_keep": keep} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
        self.logits, self.first = model(input_ids=ids, use_cache=False, **extra).logits[0][-keep:], first

    def __call__(self, positions, tokens) -> tuple[float, bool]:
        """(sum of the log-probabilities of ``tokens`` at ``positions``, whether each is the top token)."""
        at = torch.tensor(list(positions), dtype=torch.long, device=self.logits.device) - self.first
        want = torch.tensor(list(tokens), dtype=torch.long, device=self.logits.device)
        total, top = 0.0, True
        for i in range(0, len(at), 256):
            logprobs = torch.log_softmax(self.logits[at[i:i + 256]].float(), dim=-1)
            total += logprobs.gather(1, want[i:i + 256, None]).sum().item()
            top = top and bool((logprobs.argmax(-1) == want[i:i + 256]).all())
        return total, top


def allowed_difference(dtype: str, tokens: int, reference: float) -> float:
    return max(FLOOR[dtype], TOLERANCE[dtype] * tokens) + RELATIVE[dtype] * abs(reference)


def compared_numbers(req, a, b) -> list[tuple[str, float, float, int]]:
    """(what, ours, theirs, tokens) for each number of one request that the check compares."""
    pairs = [(f"continuation {k}", a.cont_sums[k], b.cont_sums[k], len(c)) for k, c in enumerate(req.conts)]
    if req.prefix_lp:
        pairs.append(("prefix", a.prefix_sum, b.prefix_sum, len(req.prefix) - 1))
    return pairs


def worst_difference(requests, ours, theirs, dtype: str, names=None) -> str | None:
    """None when every number of ``ours`` is within the tolerance of ``theirs``, else a line naming
    the worst one: request (``names[i]``, default its index), continuation, both numbers."""
    worst, line = 0.0, None
    for i, (req, a, b) in enumerate(zip(requests, ours, theirs)):
        where = names[i] if names else f"request {i}"
        for what, x, y, tokens in compared_numbers(req, a, b):
            allowed = allowed_difference(dtype, tokens, y)
            excess = abs(x - y) / allowed
            if excess > 1 and excess > worst:
                worst, line = excess, (f"{where}, {what}: {x:.6f} here, {y:.6f} by the model's own forward "
                                       f"(allowed difference {allowed:.2g})")
        if dtype == "float32" and a.cont_greedy != b.cont_greedy and line is None:
            line = f"{where}: greedy flags {a.cont_greedy} here, {b.cont_greedy} by the model's own forward"
    return line


def largest_difference(ours, theirs) -> float:
    return max((abs(x - y) for a, b in zip(ours, theirs)
                for x, y in zip([a.prefix_sum, *a.cont_sums], [b.prefix_sum, *b.cont_sums])), default=0.0)


def largest_compared(requests, ours, theirs, dtype: str) -> tuple[float, float]:
    """(largest difference among the numbers the check compares, the tolerance for that number),
    so a report can say how close to its limit the check came."""
    return max(((abs(x - y), allowed_difference(dtype, tokens, y)) for req, a, b in zip(requests, ours, theirs)
                for _, x, y, tokens in compared_numbers(req, a, b)), default=(0.0, FLOOR[dtype]))
