"""The two forward paths of the engine against each other and against plain transformers.

Llama-family models run through ``scoring.llama`` (packed tokens, fused weights); every other
model through its own transformers forward. Both must give the numbers a plain, one sequence at
a time transformers forward gives. Small random models built from a config (no download) cover
what SmolLM2 does not: attention biases, other head counts, and a non-Llama architecture.
"""
from __future__ import annotations

import random

import pytest
import torch

from conftest import HELLASWAG


def brute_force(model, request):
    """Each continuation scored alone with a plain forward over prefix + continuation."""
    sums, greedy, p = [], [], len(request.prefix)
    with torch.no_grad():
        for cont in request.conts:
            ids = torch.tensor([request.prefix + cont])
            logprobs = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
            wanted = logprobs[p - 1:p - 1 + len(cont)]
            sums.append(wanted[torch.arange(len(cont)), torch.tensor(cont)].sum().item())
            greedy.append(bool((wanted.argmax(-1) == torch.tensor(cont)).all()))
    # The prefix's own log-probs do not depend on what follows it: the last forward has them.
    prefix_sum = logprobs[torch.arange(p - 1), torch.tensor(request.prefix[1:], dtype=torch.long)].sum().item()
    return sums, greedy, prefix_sum


def random_requests(vocab: int, n: int, seed: int = 0):
    from scoring.encode import Request
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        prefix = [rng.randrange(vocab) for _ in range(rng.randint(1, 30))]
        conts = [[rng.randrange(vocab) for _ in range(rng.randint(1, 12))] for _ in range(rng.randint(1, 4))]
        out.append(Request(prefix, conts, list(range(len(conts))), prefix_lp=rng.random() < 0.5))
    return out


def check_against_brute_force(model, requests, tol):
    from scoring.engine import score_requests
    results = score_requests(model, requests, pad_id=0)
    for req, res in zip(requests, results):
        sums, greedy, prefix_sum = brute_force(model, req)
        assert res.cont_sums == pytest.approx(sums, abs=tol)
        assert res.cont_greedy == greedy
        if req.prefix_lp:
            assert res.prefix_sum == pytest.approx(prefix_sum, abs=tol)


def tiny(config_class, **kwargs):
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    config = config_class(vocab_size=500, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                          num_attention_heads=4, **kwargs)
    return AutoModelForCausalLM.from_config(config).eval()


@pytest.mark.parametrize("kwargs, group_keys", [({"num_key_value_heads": 2, "attention_bias": True}, 2048),
                                                ({"num_key_value_heads": 4, "attention_bias": False}, 40)])
def test_packed_llama_matches_transformers(kwargs, group_keys, monkeypatch):
    """With a small key budget the segments split into many attention groups."""
    from transformers import LlamaConfig

    from scoring import layout
    from scoring.engine import fast_path
    monkeypatch.setattr(layout, "GROUP_KEYS", group_keys)
    model = tiny(LlamaConfig, **kwargs)
    assert fast_path(model) is not None
    check_against_brute_force(model, random_requests(500, 12), tol=1e-4)


def test_other_architectures_take_the_generic_path():
    from transformers import AutoModelForCausalLM, GPT2Config

    from scoring.engine import fast_path
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(GPT2Config(vocab_size=500, n_embd=64, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0)).eval()
    assert fast_path(model) is None
    check_against_brute_force(model, random_requests(500, 12, seed=1), tol=1e-4)


def test_smollm2_packed_equals_generic_on_real_items(tmp_path):
    """Both paths over the same real batch (every mode, so empty contexts and the seq_mean
    rows too) give the same numbers in float32, up to the rounding of different matrix-product
    kernels (oneDNN on the packed path)."""
    from curate.adapters import get_adapter
    from curate.ingest import ingest
    from curate.store import Workspace
    from scoring import engine
    from scoring.encode import build_unit
    from scoring.models import load, resolve

    model, tok = load(resolve("smollm2-135m"))
    ws = ingest(tmp_path / "ws", data=str(HELLASWAG), adapter=get_adapter("hellaswag"), limit=4)
    items = Workspace.open(ws).items()
    requests = [r for mode in ("full", "zero", "placeholder", "choice-only") for i, it in enumerate(items)
                for r in build_unit(tok, i, mode, it["prompts"][mode], it["options"], max_length=8192).requests]
    batch = engine.pack(requests)
    with torch.inference_mode():
        fast = engine.hidden_states(model, batch)
        generic = engine.generic_hidden(model, batch, pad_id=tok.pad_token_id)
    torch.testing.assert_close(fast, generic, rtol=1e-4, atol=1e-4)
