"""The engine's runners against each other and against plain transformers.

Llama-family models run through ``scoring.llama`` (packed tokens, fused weights); every other
model through its own modules (``packed``) or its own padded forward (``padded``). All must give
the numbers a plain, one sequence at a time transformers forward gives. Small random models built
from a config (no download) cover what SmolLM2 does not: attention biases, other head counts, a
non-Llama architecture (tests/test_scoring_architectures.py covers every family).
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
    from scoring.forward import score_requests
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
    from scoring.forward import runner_for
    monkeypatch.setattr(layout, "GROUP_KEYS", group_keys)
    model = tiny(LlamaConfig, **kwargs)
    assert runner_for(model) == "llama"
    check_against_brute_force(model, random_requests(500, 12), tol=1e-4)


@pytest.mark.parametrize("runner", ["packed", "padded"])
def test_other_architectures_take_their_own_modules(runner, monkeypatch):
    """GPT-2 is probed onto the packed runner; the padded one gives the same numbers."""
    from transformers import AutoModelForCausalLM, GPT2Config

    from scoring import forward, layout
    monkeypatch.setattr(layout, "GROUP_KEYS", 40)  # many attention groups
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(GPT2Config(vocab_size=500, n_embd=64, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0)).eval()
    assert forward.runner_for(model) == "packed"
    monkeypatch.setitem(forward._CHOSEN, model, runner)
    check_against_brute_force(model, random_requests(500, 12, seed=1), tol=1e-4)


def test_smollm2_llama_runner_equals_its_own_modules_on_real_items(tmp_path):
    """The Llama runner and the model's own modules (packed and padded) over the same real batch
    (every mode, so empty contexts and the seq_mean rows too) give the same hidden states in
    float32, up to the rounding of different matrix-product kernels (oneDNN in the Llama runner)."""
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from curate.items.store import Workspace
    from scoring import forward
    from scoring.encode import build_unit
    from scoring.models import load, resolve

    model, tok = load(resolve("smollm2-135m"))
    ws = Ingest(tmp_path / "ws", IngestOptions(data=str(HELLASWAG), limit=4), get_adapter("hellaswag")).run()
    items = Workspace.open(ws).items()
    requests = [r for mode in ("full", "zero", "placeholder", "choice-only") for i, it in enumerate(items)
                for r in build_unit(tok, i, mode, it["prompts"][mode], it["options"], max_length=8192).requests]
    batch = forward.pack(requests)
    with torch.inference_mode():
        fast = forward.hidden_states(model, batch, "llama")
        for runner in ("packed", "padded"):
            own = forward.hidden_states(model, batch, runner, pad_id=tok.pad_token_id)
            torch.testing.assert_close(fast, own, rtol=1e-4, atol=1e-4)


def scores_of(model, requests):
    from scoring.forward import score_requests
    return [(r.prefix_sum, r.cont_sums, r.cont_greedy) for r in score_requests(model, requests, pad_id=0)]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_smollm2_loaded_without_transformers_models_scores_identically(dtype):
    """``load(..., scoring_only=True)`` reads the built-in's folder straight into
    ``scoring.llama_folder.LlamaWeights``; its tokenizer skips AutoTokenizer. Same numbers to
    the last bit, same tokenizer."""
    from scoring.encode import build_unit
    from scoring.llama_folder import LlamaWeights
    from scoring.models import load, resolve
    from scoring.models import tokenizer_hash

    ref = resolve("smollm2-135m")
    lean, lean_tok = load(ref, dtype=dtype, scoring_only=True)
    full, tok = load(ref, dtype=dtype)
    assert isinstance(lean, LlamaWeights) and not isinstance(full, LlamaWeights)
    assert type(lean_tok) is type(tok) and tokenizer_hash(lean_tok) == tokenizer_hash(tok)
    assert lean.lm_head.weight is lean.model.embed_tokens.weight  # tied, as in transformers
    assert torch.equal(lean.model.rotary_emb.inv_freq, full.model.rotary_emb.inv_freq)
    requests = [r for mode, ctx in (("full", "A man is sitting on a roof. He"), ("zero", ""))
                for r in build_unit(tok, 0, mode, ctx, [" starts pulling up roofing.", " is using wrap."],
                                    max_length=8192).requests]
    assert scores_of(lean, requests) == scores_of(full, requests)


def test_llama_folder_reads_only_what_it_reproduces(tmp_path):
    """A tiny Llama saved by transformers loads (even with a config that leaves out the optional
    keys) and scores as transformers' own load of the same folder; rope scaling, another
    architecture or an unknown weight give None (the caller falls back to transformers)."""
    import json

    from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig

    from scoring import llama_folder

    model = tiny(LlamaConfig, num_key_value_heads=2, attention_bias=True, tie_word_embeddings=True)
    model.save_pretrained(tmp_path / "llama")
    requests = random_requests(500, 6, seed=2)
    lean = llama_folder.load(tmp_path / "llama", torch.float32)
    assert isinstance(lean, llama_folder.LlamaWeights)
    assert scores_of(lean, requests) == scores_of(model, requests)

    config_path = tmp_path / "llama" / "config.json"
    saved = json.loads(config_path.read_text())
    minimal = {k: saved[k] for k in ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                                     "num_attention_heads", "num_key_value_heads", "vocab_size", "rms_norm_eps",
                                     "attention_bias", "tie_word_embeddings")}
    config_path.write_text(json.dumps({**minimal, "rope_theta": saved["rope_parameters"]["rope_theta"]}))
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "llama").eval()
    assert scores_of(llama_folder.load(tmp_path / "llama", torch.float32), requests) == scores_of(reloaded, requests)

    config_path.write_text(json.dumps({**saved, "rope_parameters": {"rope_type": "linear", "factor": 2.0,
                                                                    "rope_theta": 10000.0}}))
    assert llama_folder.load(tmp_path / "llama", torch.float32) is None
    config_path.write_text(json.dumps(saved))
    from safetensors.torch import load_file, save_file
    weights = load_file(tmp_path / "llama" / "model.safetensors")
    save_file({**weights, "model.extra.weight": torch.zeros(2)}, tmp_path / "llama" / "model.safetensors")
    assert llama_folder.load(tmp_path / "llama", torch.float32) is None

    gpt2 = AutoModelForCausalLM.from_config(GPT2Config(vocab_size=500, n_embd=64, n_layer=2, n_head=4))
    gpt2.save_pretrained(tmp_path / "gpt2")
    assert llama_folder.load(tmp_path / "gpt2", torch.float32) is None


def test_llama_folder_plain_forward_is_transformers_forward(tmp_path):
    """``LlamaWeights``' own plain forward (the self-check's reference for the built-in model, and
    how a row longer than a batch is run) gives transformers' logits, whole or in two pieces with
    its key/value cache."""
    from transformers import LlamaConfig

    from scoring import llama_folder
    model = tiny(LlamaConfig, num_key_value_heads=2, attention_bias=True)
    model.save_pretrained(tmp_path / "llama")
    lean = llama_folder.load(tmp_path / "llama", torch.float32)
    ids = torch.tensor([random.Random(3).choices(range(500), k=40)])
    with torch.no_grad():
        expected = model(input_ids=ids).logits
        torch.testing.assert_close(lean(ids).logits, expected, atol=1e-5, rtol=1e-5)
        first = lean.model(ids[:, :17])
        second = lean.model(ids[:, 17:], cache=first.cache)
        pieces = torch.cat([first.last_hidden_state, second.last_hidden_state], dim=1)
        torch.testing.assert_close(lean.lm_head(pieces), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", ["llama-folder", "qwen2-sliding", "gpt2"])
def test_requests_longer_than_the_budget_are_scored_in_pieces(arch, tmp_path):
    """With ``max_tokens`` below a request's length, the request is split by continuation and each
    too-long sequence runs in pieces through the model's own cache (sliding windows included):
    the numbers of a plain one-sequence forward, to 1e-4."""
    from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig, Qwen2Config

    from scoring import llama_folder
    from scoring.forward import score_requests
    if arch == "llama-folder":
        tiny(LlamaConfig, num_key_value_heads=2).save_pretrained(tmp_path / "llama")
        model = llama_folder.load(tmp_path / "llama", torch.float32)
    elif arch == "qwen2-sliding":
        model = tiny(Qwen2Config, num_key_value_heads=2, use_sliding_window=True, sliding_window=6,
                     max_window_layers=1)
    else:
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(GPT2Config(vocab_size=500, n_embd=64, n_layer=2, n_head=4)).eval()
    requests = random_requests(500, 6, seed=4)
    for req in requests:
        req.prefix = req.prefix * 2  # up to 60 tokens: many pieces of 7
    results = score_requests(model, requests, pad_id=0, max_tokens=7)
    for req, res in zip(requests, results):
        sums, greedy, prefix_sum = brute_force(model, req)
        assert res.cont_sums == pytest.approx(sums, abs=1e-4)
        assert res.cont_greedy == greedy
        if req.prefix_lp:
            assert res.prefix_sum == pytest.approx(prefix_sum, abs=1e-4)
