"""A plain Llama checkpoint folder loaded for scoring without transformers' model classes.

Importing transformers' model stack costs about 3.5 s per process on this project's 2-core CPU
(it pulls in torch.distributed, torch._dynamo and every integration), which is more than
scoring 40 HellaSwag items takes. Scoring a Llama needs none of it: ``scoring.llama`` runs the
layers itself and only reads their weights. So for a local folder holding a plain Llama (a
``config.json`` this module reads exactly, ``safetensors`` weights), ``load`` builds a bare module
tree with transformers' parameter names, loads the checkpoint into it with strict key checking,
and returns it. Anything else (another architecture, rope scaling, a key it does not know, a
``.bin`` checkpoint) gets None, and the caller loads the model through transformers.

The module tree has no forward of its own: ``scoring.forward`` runs it through
``scoring.llama.PackedLlama`` as it runs a transformers Llama. tests/test_scoring_fast.py checks
that both loads give identical scores.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from curate.core.reading import read_json
from scoring.llama import supports_config

# LlamaConfig's defaults for the keys a config.json may leave out; the sizes must be present.
DEFAULTS = {"hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "pretraining_tp": 1,
            "tie_word_embeddings": False, "num_key_value_heads": None, "head_dim": None,
            "max_position_embeddings": 2048}
REQUIRED = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
            "rms_norm_eps")


def read_config(folder: Path) -> SimpleNamespace | None:
    """The folder's config with defaults filled in, or None when it is not a Llama that
    ``scoring.llama`` runs (``supports_config``) with unscaled rotary embeddings (the only
    frequencies this module computes itself)."""
    path = folder / "config.json"
    if not path.is_file():
        return None
    raw = read_json(path, "a model's config.json")
    if raw.get("model_type") != "llama" or any(k not in raw for k in REQUIRED):
        return None
    config = {**DEFAULTS, **raw}
    rope = raw.get("rope_parameters") or {}
    if raw.get("rope_scaling") or rope.get("rope_type", "default") != "default" \
            or rope.get("partial_rotary_factor", 1.0) != 1.0:
        return None
    theta = rope.get("rope_theta", raw.get("rope_theta"))
    if theta is None:
        return None
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": float(theta)}
    config["num_key_value_heads"] = config["num_key_value_heads"] or config["num_attention_heads"]
    config["head_dim"] = config["head_dim"] or config["hidden_size"] // config["num_attention_heads"]
    config = SimpleNamespace(**config)
    return config if supports_config(config) else None


class Norm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(size))
        self.variance_epsilon = eps


class Rotary(nn.Module):
    """The default rotary frequencies, computed as transformers computes them."""

    def __init__(self, config):
        super().__init__()
        dim, base = config.head_dim, config.rope_parameters["rope_theta"]
        steps = torch.arange(0, dim, 2, dtype=torch.float, device="cpu")  # real numbers, also on meta
        self.register_buffer("inv_freq", 1.0 / (base ** (steps / dim)), persistent=False)
        self.attention_scaling = 1.0


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        q, kv, bias = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim, c.attention_bias
        self.input_layernorm = Norm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(c.hidden_size, q, bias=bias)
        self.self_attn.k_proj = nn.Linear(c.hidden_size, kv, bias=bias)
        self.self_attn.v_proj = nn.Linear(c.hidden_size, kv, bias=bias)
        self.self_attn.o_proj = nn.Linear(q, c.hidden_size, bias=bias)
        self.post_attention_layernorm = Norm(c.hidden_size, c.rms_norm_eps)
        self.mlp = nn.Module()
        self.mlp.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.mlp.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.mlp.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)


class Body(nn.Module):
    """The decoder: embedding, layers, final norm. Its ``forward`` is a plain Llama over whole
    sequences, written as the paper's equations and nothing more; ``scoring.llama`` runs the same
    weights its fast way. The plain one is the reference the self-check compares against, and it
    scores rows too long for one batch in pieces, carrying the keys and values of earlier pieces
    (``cache``, as transformers 5 names it: a list of (keys, values) per layer)."""

    def forward(self, input_ids, position_ids=None, cache=None, **_):
        config = self.config
        heads, kv_heads, dim = config.num_attention_heads, config.num_key_value_heads, config.head_dim
        past = cache or [None] * len(self.layers)
        start = 0 if past[0] is None else past[0][0].shape[2]
        if position_ids is None:
            position_ids = torch.arange(start, start + input_ids.shape[1], device=input_ids.device)[None]
        angles = position_ids[..., None].float() * self.rotary_emb.inv_freq.float()
        x, kept = self.embed_tokens(input_ids), []
        scale = self.rotary_emb.attention_scaling
        cos = (torch.cat([angles.cos()] * 2, -1) * scale).to(x.dtype)[:, None]
        sin = (torch.cat([angles.sin()] * 2, -1) * scale).to(x.dtype)[:, None]
        batch, length = input_ids.shape
        for layer, cached in zip(self.layers, past):
            attn = layer.self_attn
            h = rms(layer.input_layernorm, x)
            q = attn.q_proj(h).view(batch, length, heads, dim).transpose(1, 2)
            k = attn.k_proj(h).view(batch, length, kv_heads, dim).transpose(1, 2)
            v = attn.v_proj(h).view(batch, length, kv_heads, dim).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            if cached is not None:
                k, v = torch.cat([cached[0], k], 2), torch.cat([cached[1], v], 2)
            kept.append((k, v))
            if start:  # after cached keys: each query sees them all, then its own causal part
                causal = torch.ones(length, start + length, dtype=torch.bool, device=x.device).tril(start)
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=causal, enable_gqa=heads != kv_heads)
            else:  # the same mask, said so that torch takes its fused causal kernel
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=heads != kv_heads)
            x = x + attn.o_proj(out.transpose(1, 2).reshape(batch, length, heads * dim))
            h = rms(layer.post_attention_layernorm, x)
            x = x + layer.mlp.down_proj(F.silu(layer.mlp.gate_proj(h)) * layer.mlp.up_proj(h))
        return SimpleNamespace(last_hidden_state=rms(self.norm, x), cache=kept)


def rms(norm, x):
    """LlamaRMSNorm: normalized in float32, scaled in the input's dtype."""
    scaled = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * scaled.to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], -1)


class LlamaWeights(nn.Module):
    """A Llama's parameters under transformers' names (``model.layers.0.self_attn.q_proj.weight``
    ...), for ``scoring.llama.PackedLlama`` to run."""

    base_model_prefix = "model"

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model = Body()
        self.model.config = config
        # Built on the meta device and filled by the checkpoint: no initialization. (An Embedding
        # initialized on meta imports torch._dynamo, 2 s; handing it its weight skips that.)
        self.model.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size,
                                               _weight=torch.empty(config.vocab_size, config.hidden_size))
        self.model.layers = nn.ModuleList(Layer(config) for _ in range(config.num_hidden_layers))
        self.model.norm = Norm(config.hidden_size, config.rms_norm_eps)
        self.model.rotary_emb = Rotary(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed_tokens

    def forward(self, input_ids, logits_to_keep: int = 0, **kwargs):
        """Logits of whole sequences, as LlamaForCausalLM gives them (its head is the projection);
        ``logits_to_keep`` > 0: of the last that many positions only, as it takes them."""
        hidden = self.model(input_ids, **kwargs).last_hidden_state
        return SimpleNamespace(logits=self.lm_head(hidden[:, -logits_to_keep:] if logits_to_keep else hidden))


def checkpoint_files(folder: Path) -> list[Path] | None:
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(read_json(index, "a checkpoint index")["weight_map"].values()))
        return [folder / n for n in names]
    return None


def load(folder, dtype: torch.dtype, device: str = "cpu") -> LlamaWeights | None:
    """The folder's Llama in ``dtype`` on ``device``, or None when this module does not
    reproduce it exactly (the caller then uses transformers)."""
    from safetensors.torch import load_file

    folder = Path(folder)
    config = read_config(folder) if folder.is_dir() else None
    files = checkpoint_files(folder) if config else None
    if files is None:
        return None
    state = {}
    for f in files:
        state.update(load_file(f))
    with torch.device("meta"):
        model = LlamaWeights(config)
    expected = set(model.state_dict())
    if config.tie_word_embeddings:  # the output layer is the embedding, as transformers ties it
        expected.discard("lm_head.weight")
        state.pop("lm_head.weight", None)
    if set(state) != expected:
        return None
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=False, assign=True)
    if config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    return model.requires_grad_(False).to(device).eval()
