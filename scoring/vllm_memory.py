"""How much memory vLLM takes, decided from what the machine has and what the model needs.

vLLM's own default asks for a share of the whole memory (``gpu_memory_utilization`` 0.92) and
refuses to start when that much is not free: on a CPU (where vLLM reads the share of the NUMA
node's memory it binds to) and on a GPU that other work uses, it fails by default. The vllm
backend (``scoring/backends/vllm.py``) asks its worker what vLLM will run on and how much memory
is free there (``scoring/vllm_worker.py``, ``machine``), then:

- on a CPU, gives vLLM a KV cache of its own size (``kv_cache_memory_bytes``): room for
  ``SEQUENCES`` sequences of ``max_model_len`` tokens (at least ``MIN_TOKENS`` tokens: a scoring
  call fills vLLM's scheduler, 8192 tokens a step), at most half of the node's available memory
  left after the weights (the other half for the forward pass's activations, whose logits alone
  take tokens x vocabulary x 4 bytes, and for other work), and never less than one sequence of
  ``max_model_len`` (which vLLM requires): below that, a refusal in one line;
- on GPUs, gives ``gpu_memory_utilization`` the share of each GPU that is free at start (at most
  vLLM's 0.92, ``GPU_MARGIN`` left free), refused in one line when that cannot hold the model's
  share of the weights and one sequence.

``-o kv-cache-gib`` and ``-o gpu-memory-utilization`` set them instead (vLLM's own meaning), and
so does ``$VLLM_CPU_KVCACHE_SPACE`` (GiB, vLLM's CPU setting) when the user sets it. The line
``describe`` writes says what was chosen and why; the run prints it and its record keeps it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from curate.core.errors import CurateError

GiB = 2**30
#: vLLM's own default share of a GPU.
VLLM_SHARE = 0.92
#: On a CPU: KV cache room for this many sequences of max_model_len, and at least MIN_TOKENS tokens.
SEQUENCES = 4
MIN_TOKENS = 32768
#: On a GPU: memory left free at start besides vLLM's share (its CUDA context, other work's growth).
GPU_MARGIN = 1 * GiB
#: What one value of each dtype takes.
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth")


@dataclass(frozen=True)
class Needs:
    """What the model needs: its weights in the run's dtype, the KV cache of one token (None:
    unknown), and the longest sequence vLLM will take."""
    weights: int
    kv_per_token: int | None
    max_model_len: int


def needs(folder: str, config, dtype: str, max_model_len: int) -> Needs:
    """The model's needs from its folder (the weight files' size, scaled to ``dtype``) and its
    config (layers x key-value heads x head size, keys and values, in ``dtype``)."""
    return Needs(weights_bytes(folder, config, dtype), kv_bytes_per_token(config, dtype), max_model_len)


def weights_bytes(folder: str, config, dtype: str) -> int:
    files = [p for pattern in WEIGHT_FILES for p in Path(folder).glob(pattern)] if Path(folder).is_dir() else []
    stored = DTYPE_BYTES.get(str(getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or "")
                             .removeprefix("torch."), 4)
    return int(sum(p.stat().st_size for p in files) * DTYPE_BYTES.get(dtype, 4) / stored)


def kv_bytes_per_token(config, dtype: str) -> int | None:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layers, heads = getattr(text, "num_hidden_layers", None), getattr(text, "num_attention_heads", None)
    if not layers or not heads:
        return None
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or getattr(text, "hidden_size", 0) // heads
    return 2 * layers * kv_heads * head_dim * DTYPE_BYTES.get(dtype, 4) or None


def kv_cache_env(environ) -> int | None:
    """$VLLM_CPU_KVCACHE_SPACE in bytes, when set (vLLM's CPU backend then takes it over anything given)."""
    value = (environ.get("VLLM_CPU_KVCACHE_SPACE") or "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) == 0:
        raise CurateError(f"$VLLM_CPU_KVCACHE_SPACE {value!r}: vLLM takes a whole number of GiB above 0 there")
    return int(value) * GiB


def plan(machine: dict, model: Needs, *, kv_cache_gib: float | None, utilization: float | None,
         tensor_parallel: int = 1, environ=None) -> tuple[dict, dict]:
    """(vllm.LLM's memory keywords, what was chosen: ``how`` says who chose it, ``short`` and
    ``line`` say it, briefly and in full)."""
    environ = {} if environ is None else environ
    if machine.get("device") == "cpu":
        return cpu_plan(machine, model, kv_cache_gib=kv_cache_gib, utilization=utilization,
                        env_kv=kv_cache_env(environ))
    if "gpus" in machine:
        return gpu_plan(machine, model, kv_cache_gib=kv_cache_gib, utilization=utilization,
                        tensor_parallel=tensor_parallel)
    chosen = {**({"kv_cache_memory_bytes": int(kv_cache_gib * GiB)} if kv_cache_gib else {}),
              **({"gpu_memory_utilization": utilization} if utilization else {})}
    return chosen, said("vllm", f"on {machine.get('device')}", "vLLM's own defaults (sized here only for CPUs and GPUs)"
                        + (f", {json.dumps(chosen)}" if chosen else ""), short="vLLM's own memory defaults")


def said(how: str, where: str, what: str, *, short: str, **facts) -> dict:
    """What was chosen, as the run record keeps it and the run prints it."""
    return {"how": how, "short": short, "line": f"vLLM memory ({where}): {what}", **facts}


def cpu_plan(machine: dict, model: Needs, *, kv_cache_gib, utilization, env_kv) -> tuple[dict, dict]:
    where = (f"CPU{'' if machine.get('node') is None else ' node ' + str(machine['node'])}: "
             f"{gib(machine['available'])} of {gib(machine['total'])} GiB available")
    if env_kv is not None:
        return {}, said("$VLLM_CPU_KVCACHE_SPACE", where, f"KV cache {gib(env_kv)} GiB from $VLLM_CPU_KVCACHE_SPACE",
                        short=f"KV cache {gib(env_kv)} GiB", kv_cache_bytes=env_kv)
    if kv_cache_gib:
        kv = int(kv_cache_gib * GiB)
        return {"kv_cache_memory_bytes": kv}, said("-o kv-cache-gib", where, f"KV cache {gib(kv)} GiB "
                                                   "(-o kv-cache-gib)", short=f"KV cache {gib(kv)} GiB",
                                                   kv_cache_bytes=kv)
    if utilization:
        return {"gpu_memory_utilization": utilization}, said(
            "-o gpu-memory-utilization", where, f"vLLM takes {utilization} of the node's memory "
            "(-o gpu-memory-utilization)", short=f"{utilization} of the node's memory")
    return auto_cpu(machine, model, where)


def auto_cpu(machine: dict, model: Needs, where: str) -> tuple[dict, dict]:
    """The default on a CPU (module docstring)."""
    budget = max(0, (machine["available"] - model.weights) // 2)
    if model.kv_per_token is None:  # a config this cannot read: 2 GiB, or the budget
        kv, one = min(2 * GiB, budget), 0
    else:
        one = model.kv_per_token * model.max_model_len
        kv = min(model.kv_per_token * max(SEQUENCES * model.max_model_len, MIN_TOKENS), budget)
    kv -= kv % (16 * 2**20)
    if kv < max(one, 1):
        raise CurateError(
            f"vLLM cannot fit this model here ({where}): the weights take {gib(model.weights)} GiB in this dtype and "
            f"one sequence of max_model_len {model.max_model_len} needs {gib(one)} GiB of KV cache, more than half "
            "of what is left (the rest is the forward pass's); free memory, lower -o max-model-len, or set "
            "-o kv-cache-gib")
    tokens = f"{kv // model.kv_per_token} tokens, " if model.kv_per_token else ""
    return {"kv_cache_memory_bytes": kv}, said(
        "sized to the machine", where, f"KV cache {gib(kv)} GiB ({tokens}sized to the machine: at most half of what "
        f"the {gib(model.weights)} GiB of weights leave; -o kv-cache-gib sets it)", short=f"KV cache {gib(kv)} GiB",
        kv_cache_bytes=kv, weights_bytes=model.weights, available_bytes=machine["available"],
        total_bytes=machine["total"])


def gpu_plan(machine: dict, model: Needs, *, kv_cache_gib, utilization, tensor_parallel: int) -> tuple[dict, dict]:
    gpus = machine["gpus"][:tensor_parallel] or [{"free": 0, "total": 1}]
    tightest = min(gpus, key=lambda g: g["free"] / g["total"])
    where = f"GPU: {gib(tightest['free'])} of {gib(tightest['total'])} GiB free on the fullest of {len(gpus)}"
    chosen = {"kv_cache_memory_bytes": int(kv_cache_gib * GiB)} if kv_cache_gib else {}
    kv = f", KV cache {gib(chosen['kv_cache_memory_bytes'])} GiB (-o kv-cache-gib)" if chosen else ""
    if utilization:
        return {**chosen, "gpu_memory_utilization": utilization}, said(
            "-o gpu-memory-utilization", where, f"vLLM takes {utilization} of each GPU (-o gpu-memory-utilization)"
            + kv, short=f"{utilization} of each GPU")
    share = int(min(VLLM_SHARE, (tightest["free"] - GPU_MARGIN) / tightest["total"]) * 100) / 100
    least = (model.weights + (model.kv_per_token or 0) * model.max_model_len) / tensor_parallel
    if share <= 0 or share * tightest["total"] < least:
        raise CurateError(
            f"vLLM cannot fit this model here ({where}): each GPU needs {gib(least)} GiB for its share of the weights "
            f"and one sequence of max_model_len {model.max_model_len}; free GPU memory, raise -o tensor-parallel-size, "
            "or lower -o max-model-len")
    return {**chosen, "gpu_memory_utilization": share}, said(
        "sized to the machine", where, f"vLLM takes {share} of each GPU (what was free at start, at most vLLM's "
        f"{VLLM_SHARE}; -o gpu-memory-utilization sets it){kv}", short=f"{share} of each GPU",
        gpu_memory_utilization=share)


def gib(n: float) -> str:
    return f"{n / GiB:.2f}"
