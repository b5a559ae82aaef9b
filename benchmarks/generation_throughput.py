"""The local generation backend against a naive one-item-at-a-time ``model.generate`` loop, side
by side in one process on one machine.

For the first N HellaSwag validation items in full mode with the built-in smollm2-135m (float32,
greedy, 8 new tokens, the numbered template, seed 0, prompts through the model's chat template):

1. naive: for each prompt, tokenize it alone and call ``model.generate`` on it alone (on
   ``--naive-items`` prompts spread evenly over the N, to keep the run short; its rate is items
   per second over those);
2. ours: ``curate generate`` on a fresh workspace of the same items (the ``Generate`` stage:
   prompts tokenized once, sorted by length, left-padded batches of ``--batch-size`` rows,
   replies parsed and written to SQLite batch by batch), for each batch size asked for.

Both use the same loaded weights and exclude loading them; ours counts the whole call (planning,
prompts, tokenizing, generating, parsing and storing),
and reuses the prompts' shared prefix (system turn) from one cached forward pass.
Printed: answers per second (wall and per CPU second, which is steadier on a shared machine),
the ratio to the naive loop, and how many replies are identical to the naive loop's.

    python benchmarks/generation_throughput.py --items 128 --naive-items 32 --batch-size 16,32,64 [--threads 1] [--out results.json]
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
DATA = ROOT.parent / "shared" / "data" / "hellaswag" / "validation.jsonl.gz"


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=128)
    parser.add_argument("--naive-items", type=int, default=32)
    parser.add_argument("--batch-size", default="16,32,64", help="comma-separated batch sizes for ours")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads for both loops (default: torch's own); 1 is steadier on a busy machine")
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()

    import torch
    from transformers import GenerationConfig

    if args.threads:
        torch.set_num_threads(args.threads)

    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from generate import local
    from generate.prompts import load_template
    from generate.run import Generate, plan
    from generate.options import GenerateOptions
    from generate.store import open_generations, read_generations

    tmp = Path(tempfile.mkdtemp(prefix="gen-bench-"))
    ws = Ingest(tmp / "ws", IngestOptions(data=str(DATA), limit=args.items), get_adapter("hellaswag")).run()
    with open_generations(ws) as w:
        items = w.items()
    engine = local.LocalGenerator(args.model)
    engine.model  # load the weights once, outside every timing
    tpl = load_template("numbered")
    units = plan(items, ["full"], [0], tpl, {})
    prompts = [engine.prompt(tpl, u.instructions, u.user) for u in units]
    lengths = [len(ids) for ids in engine.encode(prompts)]

    # Both loops use this one engine: the runs below reuse its loaded weights.
    local_class = local.LocalGenerator
    local.LocalGenerator = lambda *a, **k: engine

    config = GenerationConfig(max_new_tokens=8, do_sample=False, num_beams=1, eos_token_id=engine.eos_ids,
                              pad_token_id=engine.tokenizer.pad_token_id)

    step = max(1, len(prompts) // args.naive_items)
    sample = list(range(0, len(prompts), step))[:args.naive_items]

    def naive() -> list[str]:
        replies = []
        for prompt in (prompts[i] for i in sample):
            enc = engine.tokenizer(prompt, return_tensors="pt", add_special_tokens=not engine.chat)
            with torch.no_grad():
                out = engine.model.generate(**enc, generation_config=config)
            replies.append(engine._output(out[0, enc["input_ids"].shape[1]:].tolist()).text)
        return replies

    naive_replies, naive_wall, naive_cpu = timed(naive)
    rows = [{"run": "naive: one model.generate per item", "batch_size": 1, "n": len(sample), "wall_s": naive_wall,
             "cpu_s": naive_cpu}]
    for size in [int(x) for x in args.batch_size.split(",")]:
        label = f"bench-b{size}"
        summary, wall, cpu = timed(lambda: Generate(ws, GenerateOptions(model=args.model, modes=["full"], seeds=1,
                                                                        quiet=True, label=label,
                                                                        batch_size=size)).run())
        with open_generations(ws) as w:
            ours = read_generations(w, models=[label]).set_index("item_id")["raw"]
        same = sum(ours[units[i].item["item_id"]] == r for i, r in zip(sample, naive_replies))
        rows.append({"run": "ours: curate generate", "batch_size": size, "n": len(units),
                     "wall_s": wall, "cpu_s": cpu, "identical_to_naive": same})
    local.LocalGenerator = local_class

    n = len(units)
    naive_rate = (len(sample) / naive_wall, len(sample) / naive_cpu)
    print(f"{n} HellaSwag items, full mode, {args.model} float32 on {torch.get_num_threads()} threads, greedy, "
          f"8 new tokens; prompts {min(lengths)}-{max(lengths)} tokens (mean {sum(lengths) / n:.0f})")
    print(f"{'run':<38}{'batch':>6}{'items/s':>10}{'items/CPU-s':>13}{'x naive (wall / CPU)':>24}{'same replies':>14}")
    for r in rows:
        r["items_per_s"], r["items_per_cpu_s"] = r["n"] / r["wall_s"], r["n"] / r["cpu_s"]
        r["ratio_wall"], r["ratio_cpu"] = r["items_per_s"] / naive_rate[0], r["items_per_cpu_s"] / naive_rate[1]
        same = f"{r['identical_to_naive']}/{len(sample)}" if "identical_to_naive" in r else f"({len(sample)} items)"
        print(f"{r['run']:<38}{r['batch_size']:>6}{r['items_per_s']:>10.2f}{r['items_per_cpu_s']:>13.2f}"
              f"{r['ratio_wall']:>13.2f}x / {r['ratio_cpu']:.2f}x{same:>14}")
    if args.out:
        args.out.write_text(json.dumps({"items": n, "model": args.model, "prompt_tokens": lengths, "rows": rows},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
