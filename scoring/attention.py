"""Our rows under the model's own attention rules.

A batch is laid out as rows (``scoring.layout``): each request's prefix, then its continuations,
with position ids that restart after the prefix and a block mask that lets each continuation see
the prefix and itself only. Models restrict attention further, each in its own way: sliding
windows (Mistral, Qwen2, Gemma 2 and 3 on alternate layers, Cohere 2, ...), chunks (Llama 4), and
whatever comes next. In transformers each rule is a *mask function* that the model's own forward
builds for each of its layer types and hands to the attention implementation's mask builder
(``masking_utils``).

Here that builder is ours: it evaluates the model's mask function at the tokens' *position ids*
(so a window counts positions exactly as a one-sequence forward does) and intersects it with the
block mask. Nothing about windows, chunks or layer types is known here; whatever the model asks
for is kept. Two ways to use it:

- ``packed``: the model runs over the batch's packed tokens (one sequence, no padding in its
  linear layers) under our attention implementation (``NAME``), which gathers each group of rows
  (``scoring.layout.row_groups``) and runs the model's own attention function on it (``sdpa``,
  or the model's ``eager`` with its soft-capping and sinks);
- ``padded``: the model runs over padded rows with its usual attention implementation, and only
  its mask builder is replaced while the forward runs. This serves models whose attention does not
  go through transformers' attention interface (Falcon, GPT-J).
"""
from __future__ import annotations

import contextvars
import sys
from contextlib import contextmanager
from dataclasses import dataclass

import torch

NAME = "benchcurate_rows"  # our attention implementation, registered with transformers once
_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("benchcurate_rows_layout", default=None)


def allowed(mask_function, block: torch.Tensor, batch, q_pos: torch.Tensor, kv_pos: torch.Tensor) -> torch.Tensor:
    """``block`` (boolean) and the model's ``mask_function`` evaluated for ``batch`` rows at query
    and key positions (index tensors that broadcast to ``block``'s shape)."""
    head = torch.zeros((), dtype=torch.long, device=block.device)
    return block & mask_function(batch, head, q_pos, kv_pos)


def mask_format(mask: torch.Tensor, implementation: str, dtype: torch.dtype) -> torch.Tensor:
    """A boolean mask as the implementation takes it: ``eager`` adds it to the scores."""
    if implementation == "sdpa":
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, torch.finfo(dtype).min)


# --- packed: our attention implementation --------------------------------------------------------

@dataclass
class PackedLayout:
    """What our attention implementation needs for one forward: the row groups (with each slot's
    position), where each packed token's output sits, and the model's own implementation."""
    groups: list            # scoring.layout.Group
    positions: list         # per group: (rows, longest) position ids of its slots
    slot: torch.Tensor      # (tokens,) see scoring.layout.RowGroups
    implementation: str     # the model's own: "sdpa" or "eager"
    past: list = ()         # cached prefixes: {attention module: (keys, values)} (scoring.prefix_cache)
    record: dict | None = None  # when given: each attention module's keys and values, saved into it


def past_length(past: dict) -> int:
    return next(iter(past.values()))[0].shape[1]


def group_masks(*, mask_function, dtype=torch.float32, **_) -> list[torch.Tensor]:
    """Our mask builder (registered as ``NAME``): per row group, the block mask and the model's
    rule for this layer type, in the form the model's own attention function takes."""
    layout = _ACTIVE.get()
    zero = torch.zeros((), dtype=torch.long, device=layout.slot.device)  # one packed sequence: batch row 0
    masks = []
    for g, pos in zip(layout.groups, layout.positions):
        block, keys = g.mask, pos
        if g.past >= 0:  # a cached prefix at positions 0..L-1 comes before the row's own keys
            n = past_length(layout.past[g.past])
            keys = torch.cat([torch.arange(n, device=pos.device).expand(len(pos), n), pos], dim=1)
            block = torch.cat([block.new_ones((*block.shape[:2], n)), block], dim=-1)
        masks.append(mask_format(allowed(mask_function, block[:, None], zero, pos[:, None, :, None],
                                         keys[:, None, None, :]), layout.implementation, dtype))
    return masks


def rows_attention(module, query, key, value, attention_mask, **kwargs):
    """Our attention implementation: ``query``/``key``/``value`` are (1, heads, tokens, dim) over
    the packed tokens; each row group is gathered and attended by the model's own function with
    its mask from ``group_masks``. Returns (1, tokens, heads, dim) as transformers' functions do."""
    layout = _ACTIVE.get()
    own = own_attention(module, layout.implementation)
    q, k, v = query[0], key[0], value[0]
    if layout.record is not None:
        layout.record[module] = (k.clone(), v.clone())
    out = query.new_empty((sum(g.index.numel() for g in layout.groups), q.shape[0], v.shape[-1]))
    at = 0
    for group, mask in zip(layout.groups, attention_mask):
        rows, length = group.shape

        def take(x, cached=None):
            x = x[:, group.index].unflatten(1, (rows, length)).transpose(0, 1)
            return x if cached is None else torch.cat([cached.expand(rows, -1, -1, -1), x], dim=2)

        old_k, old_v = layout.past[group.past][module] if group.past >= 0 else (None, None)
        attended, _ = own(module, take(q), take(k, old_k), take(v, old_v), mask, **kwargs)
        out[at:at + rows * length] = attended.reshape(rows * length, *attended.shape[2:])
        at += rows * length
    return out[layout.slot][None], None


def own_attention(module, implementation: str):
    """The model's attention function for ``implementation``: transformers' ``sdpa``, or the
    ``eager_attention_forward`` of the module's own modeling file."""
    if implementation == "sdpa":
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
        return ALL_ATTENTION_FUNCTIONS["sdpa"]
    return getattr(sys.modules[type(module).__module__], "eager_attention_forward")


def register() -> None:
    from transformers.masking_utils import AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface
    AttentionInterface.register(NAME, rows_attention)
    AttentionMaskInterface.register(NAME, group_masks)


@contextmanager
def packed(model, groups, positions: torch.Tensor, past=(), record=None):
    """While active, ``model`` attends with ``rows_attention`` over the row ``groups`` (a
    ``scoring.layout.RowGroups``) of packed tokens at ``positions``; a group whose ``past`` is
    ``c`` attends first to the cached keys and values ``past[c]``, and ``record`` (a dict) receives
    each attention module's keys and values (``scoring.prefix_cache``)."""
    register()
    config = model.config
    implementation = config._attn_implementation
    if implementation not in ("sdpa", "eager"):
        raise ValueError(f"attention implementation {implementation!r} cannot take a block mask")
    device = positions.device
    moved = [type(g)(g.index.to(device), g.mask.to(device), g.past) for g in groups.groups]
    layout = PackedLayout(moved, [positions[g.index].view(g.shape) for g in moved], groups.slot.to(device),
                          implementation, past, record)
    token = _ACTIVE.set(layout)
    config._attn_implementation_internal = NAME
    try:
        yield
    finally:
        config._attn_implementation_internal = implementation
        _ACTIVE.reset(token)


# --- padded: the model's own implementation, our mask builder ------------------------------------

@contextmanager
def padded(model, positions: torch.Tensor, block: torch.Tensor):
    """While active, every mask ``model`` builds for its (rows, length) input is the model's
    rule at ``positions`` (rows, length) within ``block`` (rows, length, length)."""
    from transformers import masking_utils

    implementation = model.config._attn_implementation
    if implementation not in ("sdpa", "eager"):
        raise ValueError(f"attention implementation {implementation!r} cannot take a block mask")
    interface = masking_utils.ALL_MASK_ATTENTION_FUNCTIONS
    own = interface[implementation]

    def folded(*, mask_function, **kwargs):
        def rule(b, h, q, kv):
            return allowed(mask_function, block[b, q, kv], b, positions[b, q], positions[b, kv])
        kwargs.update(attention_mask=None, allow_is_causal_skip=False, use_vmap=False)
        return own(mask_function=rule, **kwargs)

    had_local = implementation in interface._local_mapping
    interface[implementation] = folded
    try:
        yield
    finally:
        if had_local:
            interface[implementation] = own
        else:
            del interface[implementation]
