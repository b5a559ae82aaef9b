"""Our scoring engine against lm-evaluation-harness, side by side in one run on one machine.

For the first N HellaSwag validation items in full mode with the built-in smollm2-135m:

1. lm-eval 0.4.13 (hf backend, float32, the converted model folder, its hellaswag task pointed
   at the local data file) -- wall time, per-option log-likelihoods, acc / acc_norm;
2. ``curate score`` in float32 and in bfloat16, each in its own process (wall time, peak RSS):
   once for the same scores as lm-eval (``seq_mean="none"``, the comparison the targets name)
   and once as ``curate score`` runs by default (also the study's seq_mean, which needs every
   context token's log-probability);
3. parity (largest |difference| of logprob_sum, identical acc / acc_norm), bf16 agreement with
   our float32 predictions, speed ratios, and our time as a multiple of the compute floor:
   (context tokens once + all option tokens) x 2 x parameters / matmul FLOP/s measured here.

On a CPU without native bfloat16 instructions (AVX2 only) the bfloat16 runs are skipped and the
report says so: torch converts in software there, slower than float32.

    python benchmarks/speed_and_parity.py --items 200 [--write-fixture] [--out results.json]

``--write-fixture`` stores lm-eval's output as the test fixture tests/test_scoring.py reads.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "hellaswag" / "validation.jsonl.gz"
FIXTURE = ROOT / "tests" / "fixtures" / "lmeval_hellaswag_smollm2_200.json"


def matmul_flops(dtype: str, size: int = 2048, repeats: int = 5) -> tuple[float, float]:
    """Best FLOP per wall second and per CPU second (all threads) of a square matrix product in
    ``dtype`` on this machine, now: the faster of torch's default product and oneDNN's (which
    our engine uses where it is faster), so the floor is never flattered. The CPU-second figure
    is steady when other work shares the machine; the wall figure is not."""
    import torch
    dt = getattr(torch, dtype)
    a, b = torch.randn(size, size, dtype=dt), torch.randn(size, size, dtype=dt)
    products = [lambda: a @ b]
    if torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        products.append(lambda: torch.ops.mkldnn._linear_pointwise(a, b, None, "none", [], ""))
    wall = cpu = float("inf")
    for product in products:
        product()
        for _ in range(repeats):
            start, cpu_start = time.perf_counter(), time.process_time()
            product()
            wall, cpu = min(wall, time.perf_counter() - start), min(cpu, time.process_time() - cpu_start)
    return 2 * size ** 3 / wall, 2 * size ** 3 / cpu


def run_ours(ws: Path, dtype: str, label: str, seq_mean: bool, model: str = "smollm2-135m") -> dict:
    """`curate score` in a child process: its summary, wall time and peak resident memory."""
    code = ("import json, sys; from scoring.run import Score; "
            f"s = Score.with_options({str(ws)!r}, model={model!r}, modes=['full'], dtype={dtype!r}, label={label!r}, "
            f"seq_mean={'0-shot' if seq_mean else 'none'!r}, quiet=True).run(); print('SUMMARY ' + json.dumps(s)); "
            "print('PEAK', open('/proc/self/status').read().split('VmHWM:')[1].split()[0])")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"scoring in {dtype} failed")
    summary = json.loads(next(l for l in out.splitlines() if l.startswith("SUMMARY "))[8:])
    # The child's own high-water mark (VmHWM): its ru_maxrss would include this process's memory
    # at the moment it was spawned (Linux keeps the larger of the two across exec).
    peak_kb = int(next(l for l in out.splitlines() if l.startswith("PEAK "))[5:])
    return {**summary, "wall_seconds": wall, "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_rss_mb": peak_kb / 1024}


def floor_tokens(items, tokenizer) -> int:
    """Each item's context tokens once plus all its option tokens (lm-eval's encoding)."""
    from scoring.encode import build_unit
    total = 0
    for i, item in enumerate(items):
        unit = build_unit(tokenizer, i, "full", item["prompts"]["full"], item["options"], max_length=8192,
                          seq_mean=False)
        total += sum(len(r.prefix) for r in unit.requests) + sum(unit.n_tokens)
    return total


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--lmeval-batch-size", type=int, default=32)
    parser.add_argument("--write-fixture", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    from benchmarks.lmeval_reference import run_lmeval
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from scoring.models import emulated_half, load, resolve
    from scoring.store import open_scores, read_scores

    ref = resolve("smollm2-135m")
    with tempfile.TemporaryDirectory() as tmp:
        ws = Ingest(Path(tmp) / "ws", IngestOptions(data=str(DATA), limit=args.items), get_adapter("hellaswag")).run()
        # A CPU without native bfloat16 (AVX2 only) converts in software: its bfloat16 runs would
        # be slower than float32 and its square bfloat16 product takes minutes, so neither is run.
        dtypes = ["float32"] + ([] if emulated_half("bfloat16", "cpu") else ["bfloat16"])
        flops = {d: matmul_flops(d) for d in dtypes}
        runs = {f"{d}{suffix}": (d, seq) for seq, suffix in ((False, ""), (True, "+seq_mean")) for d in dtypes}
        ours = {name: run_ours(ws, d, f"smollm2-135m@{name}", seq) for name, (d, seq) in runs.items()}
        theirs = run_lmeval(ref.path, DATA, args.items, batch_size=args.lmeval_batch_size)
        with open_scores(ws) as store:
            items = store.items()
            scores = read_scores(store)
    model, tokenizer = load(ref)
    params = model.num_parameters()
    tokens = floor_tokens(items, tokenizer)

    gold = np.array([it["gold"] for it in items])
    chars = np.array([[len(o) for o in it["options"]] for it in items], dtype=float)
    lls = {d: scores[scores["model"] == f"smollm2-135m@{d}"]["logprob_sum"].to_numpy().reshape(len(items), -1)
           for d in ours}
    ref_lls = np.array([r["lls"] for r in theirs["items"]])
    report = {
        "items": len(items), "parameters": params, "floor_tokens": tokens, "matmul_flops": flops,
        "lmeval_seconds": theirs["seconds"], "lmeval_acc": theirs["acc"], "lmeval_acc_norm": theirs["acc_norm"],
        "max_abs_diff_vs_lmeval": float(np.abs(lls["float32"] - ref_lls).max()),
        "acc_identical": bool(((lls["float32"].argmax(1) == gold).astype(float)
                               == [r["acc"] for r in theirs["items"]]).all()),
        "acc_norm_identical": bool((((lls["float32"] / chars).argmax(1) == gold).astype(float)
                                    == [r["acc_norm"] for r in theirs["items"]]).all()),
        "seq_mean_runs_agree": bool(np.abs(lls["float32+seq_mean"] - lls["float32"]).max() < 1e-4),
        "bfloat16_run": "bfloat16" in dtypes,
    }
    if "bfloat16" in dtypes:
        report.update({
            "bf16_agreement": float((lls["bfloat16"].argmax(1) == lls["float32"].argmax(1)).mean()),
            "bf16_agreement_norm": float(((lls["bfloat16"] / chars).argmax(1)
                                          == (lls["float32"] / chars).argmax(1)).mean()),
            "bf16_max_abs_diff": float(np.abs(lls["bfloat16"] - lls["float32"]).max())})
    for name, r in ours.items():
        d = runs[name][0]
        flop = tokens * 2 * params
        report[name] = {"seconds": r["seconds"], "cpu_seconds": r["cpu_seconds"], "score_seconds": r["score_seconds"],
                     "score_cpu_seconds": r["score_cpu_seconds"], "wall_seconds": r["wall_seconds"],
                     "peak_rss_mb": r["peak_rss_mb"],
                     "speedup_vs_lmeval_fp32_wall": theirs["seconds"] / r["seconds"],
                     "speedup_vs_lmeval_fp32_cpu": theirs["cpu_seconds"] / r["cpu_seconds"],
                     "floor_seconds": flop / flops[d][0], "x_floor_wall": r["score_seconds"] / (flop / flops[d][0]),
                     "floor_cpu_seconds": flop / flops[d][1],
                     "x_floor_cpu": r["score_cpu_seconds"] / (flop / flops[d][1])}
    report["lmeval_cpu_seconds"] = theirs["cpu_seconds"]
    print(json.dumps(report, indent=1))
    print(f"\n{len(items)} items, full mode, smollm2-135m ({params / 1e6:.0f}M parameters), {os.cpu_count()} CPUs")
    print(f"lm-eval 0.4.13 float32: {theirs['seconds']:.1f} s wall, {theirs['cpu_seconds']:.1f} CPU-s "
          f"(acc {theirs['acc']:.4f}, acc_norm {theirs['acc_norm']:.4f})")
    for name in ours:
        r = report[name]
        print(f"ours {name:<17} {r['seconds']:.1f} s wall, {r['cpu_seconds']:.1f} CPU-s end to end: "
              f"{r['speedup_vs_lmeval_fp32_wall']:.2f}x lm-eval float32 by wall time, "
              f"{r['speedup_vs_lmeval_fp32_cpu']:.2f}x by CPU time; scoring loop {r['x_floor_cpu']:.2f}x the compute "
              f"floor by CPU time ({r['x_floor_wall']:.2f}x by wall); peak RSS {r['peak_rss_mb']:.0f} MB")
    print(f"parity: max |logprob_sum - lm-eval| = {report['max_abs_diff_vs_lmeval']:.2e}; acc identical "
          f"{report['acc_identical']}, acc_norm identical {report['acc_norm_identical']}")
    if report["bfloat16_run"]:
        print(f"bfloat16 agrees with our float32 predictions on {100 * report['bf16_agreement']:.1f}% of items "
              f"(acc_norm: {100 * report['bf16_agreement_norm']:.1f}%); largest |logprob_sum| difference "
              f"{report['bf16_max_abs_diff']:.3f}")
    else:
        print("bfloat16: not run (this CPU has no native bfloat16 instructions)")
    print(f"with seq_mean: logprob_sum within 1e-4 of the run without it in float32: {report['seq_mean_runs_agree']}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    if args.write_fixture:
        FIXTURE.write_text(json.dumps(theirs, indent=1) + "\n")
        print(f"wrote {FIXTURE}")


if __name__ == "__main__":
    main()
