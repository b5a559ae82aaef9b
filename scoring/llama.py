"""A Llama-family decoder over packed tokens: transformers' numbers with less overhead.

The generic path (``engine.generic_hidden``) feeds transformers a padded (rows x longest) batch,
so every linear layer also runs on the padding, and each norm is several passes over memory. On a
CPU with a 135M model those extra passes cost about as much as the matrix products. Here the same
weights (the model's own modules, nothing copied) run over the real tokens only; the norm is
torch's ``rms_norm``; the linear layers go through ``scoring.linear`` (oneDNN with the following
elementwise step fused in, where that is faster); attention runs on small groups of rows
(``scoring.layout.row_groups``) through ``scaled_dot_product_attention``.

Used for models whose blocks are exactly Llama's (``supports``); anything else takes the generic
path. tests/test_scoring_fast.py checks both against a plain one-sequence transformers forward.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from scoring.linear import fused_available, linear, linear_add, linear_mul, linear_silu

ROPE_TYPES = ("default", "llama3", "linear")  # static frequencies: inv_freq is fixed at load


def supports(model) -> bool:
    """Whether ``model`` is a plain Llama decoder this module reproduces exactly."""
    config = model.config
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    return (config.model_type == "llama" and config.hidden_act == "silu"
            and not getattr(config, "mlp_bias", False) and getattr(config, "pretraining_tp", 1) == 1
            and rope.get("rope_type", "default") in ROPE_TYPES)


class PackedLlama:
    """Runs a transformers Llama model's layers over packed tokens."""

    def __init__(self, model):
        self.base, config = model.model, model.config
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads

    def rotary(self, positions: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin per token (T, 1, head_dim / 2), computed as transformers does (float32,
        then cast), so the rotated values match to the last bit."""
        rope = self.base.rotary_emb
        freqs = positions[:, None].float() * rope.inv_freq.float()
        cos, sin = freqs.cos() * rope.attention_scaling, freqs.sin() * rope.attention_scaling
        return cos.to(dtype)[:, None], sin.to(dtype)[:, None]

    def hidden(self, ids: torch.Tensor, positions: torch.Tensor, rows) -> torch.Tensor:
        """Final hidden states (T, d) of T packed tokens; attention by ``rows`` (a
        ``scoring.layout.RowGroups``)."""
        n_q, n_kv, dim = self.heads, self.kv_heads, self.head_dim
        x = self.base.embed_tokens(ids)
        cos, sin = self.rotary(positions, x.dtype)
        # On a CPU torch's attention kernel is faster in float32 than in bfloat16 (and exact);
        # q, k and v are small, so the upcast costs little.
        attn_dtype = torch.float32 if x.device.type == "cpu" else x.dtype
        groups = [(g.index.to(x.device), g.mask[:, None].to(x.device), g.shape) for g in rows.groups]
        slot = rows.slot.to(x.device)
        fused = fused_available(x)
        for layer in self.base.layers:
            attn, mlp = layer.self_attn, layer.mlp
            h = rms_norm(layer.input_layernorm, x)
            qk = torch.cat([linear(h, attn.q_proj, fused=fused).view(len(ids), n_q, dim),
                            linear(h, attn.k_proj, fused=fused).view(len(ids), n_kv, dim)], 1)
            first, second = qk[..., :dim // 2], qk[..., dim // 2:]
            qkv = torch.cat([torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1),
                             linear(h, attn.v_proj, fused=fused).view(len(ids), n_kv, dim)], 1).to(attn_dtype)
            outs = []
            for index, mask, (n, length) in groups:
                heads = qkv[index].view(n, length, n_q + 2 * n_kv, dim).transpose(1, 2)
                out = F.scaled_dot_product_attention(heads[:, :n_q], heads[:, n_q:n_q + n_kv], heads[:, n_q + n_kv:],
                                                     attn_mask=mask, enable_gqa=n_q != n_kv)
                outs.append(out.transpose(1, 2).reshape(n * length, n_q * dim))
            x = linear_add(torch.cat(outs)[slot].to(x.dtype), attn.o_proj, x, fused=fused)
            h = rms_norm(layer.post_attention_layernorm, x)
            gate = linear_silu(h, mlp.gate_proj, fused=fused)
            x = linear_add(linear_mul(h, mlp.up_proj, gate, fused=fused), mlp.down_proj, x, fused=fused)
        return rms_norm(self.base.norm, x)


def rms_norm(norm, x: torch.Tensor) -> torch.Tensor:
    """A LlamaRMSNorm module's function in one fused call."""
    return F.rms_norm(x, x.shape[-1:], norm.weight, norm.variance_epsilon)
