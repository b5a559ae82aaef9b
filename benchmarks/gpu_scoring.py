"""Scoring on a CUDA device: speed and exactness where a GPU is lent (results: docs/gpu.md).

The lent machine cannot fetch weights, and SmolLM2's GGUF (98 MB) is more than travels to it, so
by default the model is SmolLM2-135M's architecture and tokenizer (``--random-from FOLDER``: a
folder with its config and tokenizer files) with seeded random weights: a forward pass costs what
the real model's costs, and the self-check's exactness does not depend on the weights (accuracy
does, so none is printed). ``--model`` scores a real model instead.

Per dtype, in one process on one device, after an untimed warm-up run, each run twice (the
faster counts; both are in the JSON):

- HellaSwag, the first N validation items, full mode 0-shot: seconds, items/s, tokens fed; the
  same with the output layer read as on a CPU (``scoring.forward.head_sizes``); then with
  ``--text-scores`` (its extra share of the time: issue 30's target is 0.30);
- 5-shot MMLU on three whole subjects (letters, lm-eval's formulation for MMLU), with the prefix
  cache and without (``prefix_cache_mb=0``): seconds, the speed ratio and beside it the work ratio
  (tokens fed without the cache over tokens fed with it).

Every run's self-check (its first units against the model's plain forward) must pass; the largest
difference it saw and the peak GPU memory are printed.

    python benchmarks/gpu_scoring.py --random-from SMOLLM2_FOLDER --dtypes float32,bfloat16 \\
        --out benchmarks/results/h100-scoring.txt
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.fewshot_speed import HELLASWAG, MMLU_DEV, MMLU_TEST, SUBJECTS, rows_of  # noqa: E402


def random_model(config_folder: Path, out: Path) -> str:
    """A model folder with ``config_folder``'s architecture and tokenizer and seeded random weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(config_folder)).save_pretrained(out)
    AutoTokenizer.from_pretrained(config_folder).save_pretrained(out)
    return str(out)


def timed(ws: Path, model: str, label: str, repeats: int = 2, **kwargs) -> dict:
    """The ``Score`` stage ``repeats`` times (a label of its own each time), with the
    device's peak memory measured around it: the fastest run's summary, every run's seconds in
    ``runs`` (a GPU's first run of new shapes pays for kernel choices the next reuses)."""
    import torch

    from scoring.run import Score

    cuda = torch.cuda.is_available()
    runs = []
    for r in range(repeats):
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        summary = Score.with_options(ws, model=model, modes=["full"], label=f"{label}-{r}", quiet=True, **kwargs).run()
        summary["wall"] = time.perf_counter() - start
        summary["peak_mib"] = torch.cuda.max_memory_allocated() / 2**20 if cuda else float("nan")
        assert summary["self_check"]["items"] > 0, summary["self_check"]
        runs.append(summary)
    best = min(runs, key=lambda s: s["score_seconds"])
    best["runs"] = [round(s["score_seconds"], 3) for s in runs]
    return best


def cpu_head(run):
    """``run()`` with the output layer read as on a CPU (``scoring.forward.head_sizes``): how the
    GPU path went before it reduced a head call's rows at once."""
    from scoring import forward

    real = forward.head_sizes
    forward.head_sizes = lambda model, device: real(model, forward.torch.device("cpu"))
    try:
        return run()
    finally:
        forward.head_sizes = real


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="A model name or folder (default: random weights).")
    parser.add_argument("--random-from", type=Path, default=None, help="Config and tokenizer folder.")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--hellaswag-items", type=int, default=1000)
    parser.add_argument("--mmlu-items", type=int, default=None, help="The first N of the three subjects' items.")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    import torch

    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions

    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    results: dict = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                     "torch": torch.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = args.model or random_model(args.random_from, tmp / "model")
        hellaswag = Ingest(tmp / "hs", IngestOptions(data=str(HELLASWAG),
                                                     limit=args.hellaswag_items), get_adapter("hellaswag")).run()
        warm = Ingest(tmp / "warm", IngestOptions(data=str(HELLASWAG), limit=50), get_adapter("hellaswag")).run()
        subjects = tmp / "mmlu.jsonl"
        subject_rows = [r for r in rows_of(MMLU_TEST) if r["subject"] in SUBJECTS][:args.mmlu_items]
        subjects.write_text("".join(json.dumps(r) + "\n" for r in subject_rows))
        mmlu = Ingest(tmp / "mmlu", IngestOptions(data=str(subjects)), get_adapter("mmlu")).run()
        say(f"{results['device']}, torch {results['torch']}, model {args.model or 'SmolLM2-135M random weights'}")
        for dtype in args.dtypes.split(","):
            common = {"dtype": dtype, "device": args.device}
            timed(warm, model, label=f"warm-{dtype}", repeats=1, text_scores=True, **common)
            full = timed(hellaswag, model, label=f"{dtype}-full", **common)
            before = cpu_head(lambda: timed(hellaswag, model, label=f"{dtype}-cpuhead", **common))
            text = timed(hellaswag, model, label=f"{dtype}-text", text_scores=True, **common)
            shots = {"fewshot": "5", "fewshot_pool": str(MMLU_DEV), "seq_mean": False}
            cached = timed(mmlu, model, label=f"{dtype}-cache", **shots, **common)
            plain = timed(mmlu, model, label=f"{dtype}-nocache", prefix_cache_mb=0, **shots, **common)
            n = args.hellaswag_items
            say(f"{dtype}, runner {full['runner']}:")
            say(f"  HellaSwag {n} items full mode: {full['score_seconds']:.2f} s ({n / full['score_seconds']:.0f} "
                f"items/s, {full['tokens']} tokens), peak {full['peak_mib']:.0f} MiB, self-check "
                f"{full['self_check']['max_abs_diff']:.2e}")
            say(f"  the same with a CPU's head sizes (a softmax per 8 rows, as before): {before['score_seconds']:.2f} s "
                f"= {before['score_seconds'] / full['score_seconds']:.2f}x the time (same work)")
            say(f"  + --text-scores: {text['score_seconds']:.2f} s, extra "
                f"{(text['score_seconds'] - full['score_seconds']) / full['score_seconds']:+.3f} of full mode "
                f"(target <= 0.30), self-check {text['self_check']['max_abs_diff']:.2e}")
            fed = [run["prefix_cache"]["fed_tokens"] for run in (plain, cached)]
            say(f"  5-shot MMLU {len(subject_rows)} items: cache {cached['score_seconds']:.2f} s, no cache "
                f"{plain['score_seconds']:.2f} s = {plain['score_seconds'] / cached['score_seconds']:.2f}x "
                f"(work ratio {fed[0] / fed[1]:.2f}x), peak {cached['peak_mib']:.0f} MiB, self-check "
                f"{cached['self_check']['max_abs_diff']:.2e}")
            results[dtype] = {"full": full, "cpu_head": before, "text": text, "cache": cached, "nocache": plain}
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
