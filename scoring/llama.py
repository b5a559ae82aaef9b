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
    return supports_config(model.config)


def supports_config(config) -> bool:
    """The same question asked of a config (a transformers config or any object with its
    attributes)."""
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

    def rotary(self, positions: torch.Tensor) -> torch.Tensor:
        """Each token's rotation (T, 1, head_dim / 2) as complex numbers: cos and sin computed
        as transformers computes them, in float32."""
        rope = self.base.rotary_emb
        freqs = positions[:, None].float() * rope.inv_freq.float()
        cos, sin = freqs.cos() * rope.attention_scaling, freqs.sin() * rope.attention_scaling
        return torch.complex(cos, sin)[:, None]

    def hidden(self, ids: torch.Tensor, positions: torch.Tensor, rows, past=(), record=None) -> torch.Tensor:
        """Final hidden states (T, d) of T packed tokens; attention by ``rows`` (a
        ``scoring.layout.RowGroups``). A group whose ``past`` is ``c`` attends first to the keys
        and values ``past[c]`` holds (per layer, (kv_heads, L, head_dim), as ``record`` saves
        them: ``scoring.prefix_cache``); ``record`` (a list) receives each layer's keys and values."""
        n_q, n_kv, dim, tokens = self.heads, self.kv_heads, self.head_dim, len(ids)
        x = self.base.embed_tokens(ids)
        turn = self.rotary(positions)
        # On a CPU torch's attention kernel is faster in float32 than in bfloat16 (and exact);
        # q, k and v are small, so the upcast costs little.
        attn_dtype = torch.float32 if x.device.type == "cpu" else x.dtype
        groups = [(g.index.to(x.device), past_mask(g, past, x.device), g.shape, g.past) for g in rows.groups]
        slot = rows.slot.to(x.device)
        fused = fused_available(x)
        # Queries, keys and values of all tokens, side by side, and the attention outputs of all rows.
        qkv = torch.empty((tokens, n_q + 2 * n_kv, dim), dtype=attn_dtype, device=x.device)
        attended = torch.empty((sum(n * length for _, _, (n, length), _ in groups), n_q * dim), dtype=x.dtype,
                               device=x.device)
        for number, layer in enumerate(self.base.layers):
            attn, mlp = layer.self_attn, layer.mlp
            h = rms_norm(layer.input_layernorm, x)
            rotate_into(qkv[:, :n_q], linear(h, attn.q_proj, fused=fused).view(tokens, n_q, dim), turn)
            rotate_into(qkv[:, n_q:n_q + n_kv], linear(h, attn.k_proj, fused=fused).view(tokens, n_kv, dim), turn)
            qkv[:, n_q + n_kv:] = linear(h, attn.v_proj, fused=fused).view(tokens, n_kv, dim)
            if record is not None:
                record.append(tuple(qkv[:, part].transpose(0, 1).contiguous()
                                    for part in (slice(n_q, n_q + n_kv), slice(n_q + n_kv, None))))
            at = 0
            for index, mask, (n, length), cached in groups:
                heads = qkv[index].view(n, length, n_q + 2 * n_kv, dim).transpose(1, 2)
                keys, values = heads[:, n_q:n_q + n_kv], heads[:, n_q + n_kv:]
                if cached >= 0:  # the shared prefix's keys and values come first
                    old_keys, old_values = past[cached][number]
                    keys = torch.cat([old_keys.expand(n, -1, -1, -1), keys], dim=2)
                    values = torch.cat([old_values.expand(n, -1, -1, -1), values], dim=2)
                out = F.scaled_dot_product_attention(heads[:, :n_q], keys, values, attn_mask=mask,
                                                     enable_gqa=n_q != n_kv)
                attended[at:at + n * length].view(n, length, n_q, dim).copy_(out.transpose(1, 2))
                at += n * length
            x = linear_add(attended[slot], attn.o_proj, x, fused=fused)
            h = rms_norm(layer.post_attention_layernorm, x)
            gate = linear_silu(h, mlp.gate_proj, fused=fused)
            x = linear_add(linear_mul(h, mlp.up_proj, gate, fused=fused), mlp.down_proj, x, fused=fused)
        return rms_norm(self.base.norm, x)


def past_mask(group, past, device) -> torch.Tensor:
    """A group's mask (rows, 1, length, keys): its block mask, after the cached prefix's keys
    (every row sees all of them) when it attends to one."""
    mask = group.mask[:, None].to(device)
    if group.past < 0:
        return mask
    cached = past[group.past][0][0].shape[1]
    return torch.cat([mask.new_ones((*mask.shape[:3], cached)), mask], dim=-1)


def rotate_into(out: torch.Tensor, x: torch.Tensor, turn: torch.Tensor) -> None:
    """Writes ``x`` (T, heads, head_dim) with its rotary embedding applied into ``out``, computed
    in float32 as one complex product per pair.

    Llama pairs dimension j with j + head_dim/2; here each pair is stored side by side (the
    interleaved order). Queries and keys both take that order, so their dot products, all that
    attention reads of them, are what transformers' order gives."""
    t, heads, dim = x.shape
    pairs = torch.empty((t, heads, dim // 2, 2), dtype=torch.float32, device=x.device)
    pairs.copy_(x.view(t, heads, 2, dim // 2).transpose(2, 3))
    out.copy_(torch.view_as_real(torch.view_as_complex(pairs) * turn).view(t, heads, dim))


def rms_norm(norm, x: torch.Tensor) -> torch.Tensor:
    """A LlamaRMSNorm module's function in one fused call."""
    return F.rms_norm(x, x.shape[-1:], norm.weight, norm.variance_epsilon)
