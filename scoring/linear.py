"""Linear layers with the elementwise step that follows them fused in (oneDNN on CPU).

A Llama block is seven matrix products and, around them, passes over memory that cost almost as
much on a small model: silu on the gate, gate x up, two residual additions. torch ships oneDNN's
fused linear ops for its own compiler (``torch.ops.mkldnn._linear_pointwise``, the kernels
Inductor emits for CPU); they apply the elementwise step to each output tile while it is still
in cache, in float32 before the result is rounded, so in bfloat16 they are also a little closer
to the float32 numbers. In float32 oneDNN is also faster than torch's default matrix product on
these narrow shapes (measured on the 2-core AMD EPYC: 170 against 130 GFLOP/s).

Elsewhere (a GPU, float16, a torch built without oneDNN) the same functions are the plain ops.
tests/test_scoring_fast.py checks both ways give the same numbers.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

FUSED_DTYPES = (torch.float32,)  # in bfloat16 measured no faster than the plain ops


def fused_available(x: torch.Tensor) -> bool:
    """Whether the oneDNN kernels can take ``x``: a CPU tensor in float32 or bfloat16, with a
    torch that has them."""
    return (x.device.type == "cpu" and x.dtype in FUSED_DTYPES and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_linear_pointwise"))


def linear(x: torch.Tensor, layer: torch.nn.Linear, *, fused: bool) -> torch.Tensor:
    if fused:
        return torch.ops.mkldnn._linear_pointwise(x, layer.weight, layer.bias, "none", [], "")
    return layer(x)


def linear_silu(x: torch.Tensor, layer: torch.nn.Linear, *, fused: bool) -> torch.Tensor:
    """silu(layer(x))"""
    if fused:
        return torch.ops.mkldnn._linear_pointwise(x, layer.weight, layer.bias, "swish", [], "")
    return F.silu(layer(x))


def linear_mul(x: torch.Tensor, layer: torch.nn.Linear, other: torch.Tensor, *, fused: bool) -> torch.Tensor:
    """layer(x) * other"""
    if fused:
        return torch.ops.mkldnn._linear_pointwise.binary(x, other, layer.weight, layer.bias, "mul")
    return layer(x) * other


def linear_add(x: torch.Tensor, layer: torch.nn.Linear, other: torch.Tensor, *, fused: bool) -> torch.Tensor:
    """layer(x) + other (a residual connection)"""
    if fused:
        return torch.ops.mkldnn._linear_pointwise.binary(x, other, layer.weight, layer.bias, "add")
    return other + layer(x)
