"""Other architectures against lm-evaluation-harness 0.4.13, side by side in one run.

1. Speed: random-weight models of about 135M parameters built from the Qwen2, Gemma 3, OLMo 2
   and GPT-NeoX configs (the real models' widths and head counts scaled down to that size;
   SmolLM2's 49k vocabulary and tokenizer; timing does not depend on weight values) score the
   first N HellaSwag validation items in full mode: lm-eval (hf backend, float32, batch 32, the
   saved model folder, its hellaswag task pointed at the local data file) and ``curate score`` in
   float32, each of ours in its own process (the same scores as lm-eval, ``--no-seq-mean``, and
   the default with the study's ``seq_mean``): wall and CPU time, ratio per architecture, peak
   resident memory, and parity with lm-eval on the way.
2. Parity: tiny random-weight models saved to disk (a Qwen2 with a 32-token sliding window on
   every layer, a Gemma 3 with its sliding/full layer pattern and a 32-token window, a GPT-NeoX)
   on the first 50 items: largest |logprob_sum - lm-eval| in float32, identical acc and acc_norm.

    python benchmarks/architectures.py [--items 200] [--parity-items 50] [--only qwen2,gpt_neox]
        [--skip-speed] [--skip-parity] [--out benchmarks/results/NAME]

Prints a table and writes NAME.json and NAME.txt (default: benchmarks/results/cpu-architectures).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "hellaswag" / "validation.jsonl.gz"

# About 135M parameters each with SmolLM2's 49152-token vocabulary.
SPEED_MODELS = {
    # Qwen2.5-0.5B's head size (64), grouped queries (5:1) and q/k/v biases; tied embeddings.
    "qwen2": {"hidden_size": 640, "intermediate_size": 3456, "num_hidden_layers": 14, "num_attention_heads": 10,
              "num_key_value_heads": 2, "tie_word_embeddings": True},
    # Gemma 3 270M as it is (width 640, 4 query heads of 256 over one key/value head, 18 layers,
    # five sliding layers of 512 per full one), but SmolLM2's vocabulary instead of 262k.
    "gemma3_text": {"hidden_size": 640, "intermediate_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 4,
                    "num_key_value_heads": 1, "head_dim": 256, "query_pre_attn_scalar": 256, "sliding_window": 512},
    # OLMo 2 1B's head size (64) and 4x MLP, fewer and narrower layers; untied embeddings.
    "olmo2": {"hidden_size": 640, "intermediate_size": 2560, "num_hidden_layers": 12, "num_attention_heads": 10,
              "num_key_value_heads": 10},
    # Pythia-160M's widths (768, 12 heads, 25% rotary), 9 of its 12 layers; untied embeddings.
    "gpt_neox": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 9, "num_attention_heads": 12,
                 "rotary_pct": 0.25},
}
PARITY_MODELS = {
    "qwen2-sliding": ("qwen2", {"use_sliding_window": True, "sliding_window": 32, "max_window_layers": 0}),
    "gemma3_text": ("gemma3_text", {"sliding_window": 32, "layer_types": ["sliding_attention"] * 3 + ["full_attention"]}),
    "gpt_neox": ("gpt_neox", {}),
}
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "initializer_range": 0.1}


def save_model(folder: Path, model_type: str, sizes: dict, tokenizer):
    """A seeded random-weight model of ``model_type`` with SmolLM2's tokenizer, saved to ``folder``
    (and returned)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    config = AutoConfig.for_model(model_type, vocab_size=len(tokenizer), max_position_embeddings=8192,
                                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                  pad_token_id=tokenizer.pad_token_id, **sizes)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model


def matmul_macs(model) -> tuple[int, int]:
    """Multiply-adds of the model's linear layers per token fed (every ``nn.Linear`` under the
    decoder) and per output-layer row (the output embedding): the work both tools must do, and
    almost all of it on these shapes (attention scores and elementwise passes are the rest)."""
    from torch import nn
    head = model.get_output_embeddings()
    layers = sum(m.in_features * m.out_features for m in model.modules() if isinstance(m, nn.Linear) and m is not head)
    return layers, head.weight.shape[0] * head.weight.shape[1]


def work_counts(items: list[dict], tokenizer, batch_size: int) -> dict:
    """What each tool feeds on the items in full mode (the same for every architecture, so counted
    once): we feed each context once and each continuation after it (``engine.pack``'s tokens) and
    apply the output layer once per distinct state that predicts a wanted token (its sources);
    lm-eval feeds each option's context + continuation (minus its last token) in batches of
    ``batch_size`` sorted by length, padded to the longest, and applies the output layer at every
    position."""
    from scoring.encode import build_units
    from scoring.forward import pack
    from scoring.run import unit_spec
    units = build_units(tokenizer, [unit_spec(i, it, "full", "cloze") for i, it in enumerate(items)],
                        max_length=8192, seq_mean=False)
    requests = [r for u in units for r in u.requests]
    batch = pack(requests)
    lengths = sorted((len(r.prefix) + len(c) - 1 for r in requests for c in r.conts), reverse=True)
    padded = sum(max(lengths[i:i + batch_size]) * len(lengths[i:i + batch_size])
                 for i in range(0, len(lengths), batch_size))
    return {"ours_tokens": len(batch.tokens), "ours_head_rows": len(np.unique(batch.source)),
            "lmeval_padded_tokens": padded}


def work_ratio(model, counts: dict) -> dict:
    """lm-eval's matrix-product work over ours (``work_counts``) for ``model``: the speed ratio
    either tool would reach if both ran their products at the same rate."""
    layer, head = matmul_macs(model)
    ratio = (counts["lmeval_padded_tokens"] * (layer + head)
             / (counts["ours_tokens"] * layer + counts["ours_head_rows"] * head))
    return {**counts, "ratio": ratio}


def scores_of(ws: Path, label: str, n: int) -> np.ndarray:
    from scoring.store import open_scores, read_scores
    with open_scores(ws) as store:
        frame = read_scores(store, models=[label])
    return frame["logprob_sum"].to_numpy().reshape(n, -1)


def compare(ours: np.ndarray, theirs: dict, items: list[dict]) -> dict:
    """Largest |difference| of logprob_sum and whether acc / acc_norm agree item by item."""
    gold = np.array([it["gold"] for it in items])
    chars = np.array([[len(o) for o in it["options"]] for it in items], dtype=float)
    ref = np.array([r["lls"] for r in theirs["items"]])
    return {"max_abs_diff": float(np.abs(ours - ref).max()),
            "acc_identical": bool(((ours.argmax(1) == gold).astype(float) == [r["acc"] for r in theirs["items"]]).all()),
            "acc_norm_identical": bool((((ours / chars).argmax(1) == gold).astype(float)
                                        == [r["acc_norm"] for r in theirs["items"]]).all())}


def speed(folder: Path, ws: Path, items: list[dict], batch_size: int) -> dict:
    from benchmarks.lmeval_reference import run_lmeval
    from benchmarks.speed_and_parity import run_ours
    theirs = run_lmeval(str(folder), DATA, len(items), batch_size=batch_size)
    out = {"lmeval_seconds": theirs["seconds"], "lmeval_cpu_seconds": theirs["cpu_seconds"]}
    for name, seq_mean in (("same-scores", False), ("seq_mean", True)):
        label = f"{folder.name}@{name}"
        r = run_ours(ws, "float32", label, seq_mean, model=str(folder))
        out[name] = {"seconds": r["seconds"], "cpu_seconds": r["cpu_seconds"], "peak_rss_mb": r["peak_rss_mb"],
                     "runner": r["runner"], "self_check": r["self_check"],
                     "ratio_wall": theirs["seconds"] / r["seconds"], "ratio_cpu": theirs["cpu_seconds"] / r["cpu_seconds"],
                     **compare(scores_of(ws, label, len(items)), theirs, items)}
    return out


def parity(folder: Path, ws: Path, items: list[dict]) -> dict:
    from benchmarks.lmeval_reference import run_lmeval
    from scoring.run import Score
    theirs = run_lmeval(str(folder), DATA, len(items), batch_size=32)
    summary = Score.with_options(ws, model=str(folder), modes=["full"], label=folder.name, quiet=True).run()
    return {"runner": summary["runner"], **compare(scores_of(ws, folder.name, len(items)), theirs, items)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--parity-items", type=int, default=50)
    parser.add_argument("--lmeval-batch-size", type=int, default=32)
    parser.add_argument("--only", default=None, help="comma-separated architectures of the speed part")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-parity", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu-architectures")
    args = parser.parse_args(argv)

    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from curate.items.store import Workspace
    from scoring.models import load_tokenizer, resolve

    tokenizer = load_tokenizer(resolve("smollm2-135m"))
    report, lines = {"cpus": os.cpu_count(), "speed": {}, "parity": {}}, []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if not args.skip_speed:
            ws = Ingest(tmp / "speed-ws", IngestOptions(data=str(DATA),
                                                        limit=args.items), get_adapter("hellaswag")).run()
            items = Workspace.open(ws).items()
            counts = work_counts(items, tokenizer, args.lmeval_batch_size)
            for arch in (args.only.split(",") if args.only else SPEED_MODELS):
                folder = tmp / f"{arch}-135m"
                model = save_model(folder, arch, SPEED_MODELS[arch], tokenizer)
                result = {"parameters": model.num_parameters(), "work": work_ratio(model, counts)}
                del model
                result.update(speed(folder, ws, items, args.lmeval_batch_size))
                report["speed"][arch] = result
                print(json.dumps({arch: result}, indent=1), flush=True)
        if not args.skip_parity:
            ws = Ingest(tmp / "parity-ws", IngestOptions(data=str(DATA),
                                                         limit=args.parity_items), get_adapter("hellaswag")).run()
            items = Workspace.open(ws).items()
            for name, (arch, extra) in PARITY_MODELS.items():
                folder = tmp / f"tiny-{name}"
                save_model(folder, arch, {**TINY, **({} if arch != "gpt_neox" else {"rotary_pct": 0.25}), **extra},
                           tokenizer)
                with contextlib.redirect_stderr(io.StringIO()):
                    report["parity"][name] = parity(folder, ws, items)
                print(json.dumps({name: report["parity"][name]}), flush=True)

    lines.append(f"HellaSwag validation, full mode, float32, {os.cpu_count()} CPUs; lm-eval 0.4.13 hf backend, batch "
                 f"{args.lmeval_batch_size}; ours: curate score, each run its own process")
    if report["speed"]:
        lines.append(f"\nspeed, first {args.items} items (ratio = lm-eval's time / ours; same scores = --no-seq-mean; "
                     "work x = lm-eval's matrix-product work / ours: the ratio at equal product speed)")
        lines.append(f"{'architecture':<13} {'params':>7} {'lm-eval s':>9} {'ours s':>7} {'wall x':>7} {'cpu x':>6} "
                     f"{'+seq_mean x':>11} {'work x':>6} {'peak MB':>8} {'max |diff|':>10} acc/acc_norm same  runner")
        for arch, r in report["speed"].items():
            same, seq = r["same-scores"], r["seq_mean"]
            lines.append(f"{arch:<13} {r['parameters'] / 1e6:6.0f}M {r['lmeval_seconds']:9.1f} {same['seconds']:7.1f} "
                         f"{same['ratio_wall']:6.2f}x {same['ratio_cpu']:5.2f}x {seq['ratio_wall']:10.2f}x {r['work']['ratio']:5.2f}x "
                         f"{max(same['peak_rss_mb'], seq['peak_rss_mb']):8.0f} {same['max_abs_diff']:10.1e} "
                         f"{same['acc_identical'] and same['acc_norm_identical']!s:>17}  {same['runner']}")
    if report["parity"]:
        lines.append(f"\nparity, tiny random-weight models, first {args.parity_items} items")
        for name, r in report["parity"].items():
            lines.append(f"{name:<14} max |logprob_sum - lm-eval| {r['max_abs_diff']:.1e}; acc identical "
                         f"{r['acc_identical']}, acc_norm identical {r['acc_norm_identical']} ({r['runner']} runner)")
    text = "\n".join(lines)
    print("\n" + text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    args.out.with_suffix(".txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
