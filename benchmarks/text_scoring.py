"""What text scores add to scoring the same items in full mode, side by side in one process.

Ingests the first N HellaSwag validation items into two fresh workspaces and, with one model:

1. scores the first in full mode (``curate score --modes full``: every option, with the study's
   seq_mean as by default);
2. scores the second in full mode with ``--text-scores``: the same pass, each item's text scores
   (loss, zlib, Min-K%, Min-K%++) read off its gold row and stored with its option scores;
3. for comparison, the standalone ``curate text-scores`` pass over the first (the same rows scored
   again on their own).

An untimed warm-up run comes first (``--warmup`` items), and ``--text-first`` times 2 before 1,
so that either order can be measured. It prints the three scoring times, the extra time of 2 over
1 as a share of 1 (issue 30's target: at most 0.30), and the work ratio: positions whose
next-token moments were computed (every predicted token of the gold rows) against positions fed
to the model in full mode.

    .venv/bin/python benchmarks/text_scoring.py --items 1000 [--dtype float32] [--device cpu] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELLASWAG = ROOT.parent / "shared" / "data" / "hellaswag" / "validation.jsonl.gz"


def moment_positions(ws: Path) -> int:
    """Predicted tokens of the stored text scores: the positions whose moments were computed."""
    from curate.items.store import Workspace
    with Workspace.open(ws) as w:
        return int(w.conn.execute("SELECT sum(n_tokens) FROM text_scores").fetchone()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--warmup", type=int, default=100, help="Items scored first, untimed (0: none).")
    parser.add_argument("--text-first", action="store_true",
                        help="Time full mode with text scores before full mode alone (the default: after it).")
    parser.add_argument("--out", type=Path, default=None, help="Also write the printed lines here.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the numbers here.")
    args = parser.parse_args()

    import torch

    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from scoring.run import Score
    from scoring.text_run import TextScores

    common = {"dtype": args.dtype, "device": args.device, "batch_tokens": args.batch_tokens, "quiet": True}
    with tempfile.TemporaryDirectory() as tmp:
        alone, both, warm = (Ingest(Path(tmp) / name, IngestOptions(data=str(HELLASWAG), limit=n),
                                    get_adapter("hellaswag")).run()
                             for name, n in (("full", args.items), ("full-text", args.items),
                                             ("warmup", max(args.warmup, 1))))
        if args.warmup:  # the first run in a process pays for allocations the others reuse
            Score.with_options(warm, model=args.model, modes=["full"], text_scores=True, **common).run()
        runs = {}
        for name in (("text", "full") if args.text_first else ("full", "text")):
            runs[name] = Score.with_options(both if name == "text" else alone, model=args.model, modes=["full"],
                                            text_scores=name == "text", **common).run()
            print(f"{name}: {runs[name]['score_seconds']:.1f} s", flush=True)  # each phase as it ends
        full, with_text = runs["full"], runs["text"]
        standalone = TextScores.with_options(alone, model=args.model, **common).run()
        moments = moment_positions(both)
    extra = (with_text["score_seconds"] - full["score_seconds"]) / full["score_seconds"]
    result = {"items": args.items, "model": args.model, "dtype": args.dtype, "device": args.device,
              "torch_threads": torch.get_num_threads(), "runner": full["runner"],
              "full_seconds": full["score_seconds"], "full_with_text_seconds": with_text["score_seconds"],
              "standalone_text_seconds": standalone["score_seconds"], "fed_tokens": full["tokens"],
              "moment_positions": moments, "standalone_tokens": standalone["tokens"],
              "extra_time_ratio": round(extra, 4), "work_ratio": round(moments / full["tokens"], 4),
              "standalone_ratio": round(standalone["score_seconds"] / full["score_seconds"], 4),
              "target": 0.30, "met": extra <= 0.30}
    lines = [
        f"{args.items} HellaSwag items, {args.model} {args.dtype} on {args.device} ({result['torch_threads']} threads, "
        f"{full['runner']} runner), side by side in one process ({'text first' if args.text_first else 'full first'}, "
        f"after {args.warmup} untimed warm-up items)",
        f"full mode (4 options + seq_mean):        {full['score_seconds']:.1f} s, {full['tokens']} tokens fed",
        f"full mode + --text-scores (same pass):   {with_text['score_seconds']:.1f} s, "
        f"{with_text['text_computed']} items' text scores",
        f"standalone curate text-scores:           {standalone['score_seconds']:.1f} s, {standalone['tokens']} "
        f"tokens fed ({result['standalone_ratio']:.3f} of full mode)",
        f"extra time of text scores in the full pass: {extra:+.3f} of full mode "
        f"(target <= 0.30: {'met' if result['met'] else 'NOT met'})",
        f"work: moments at {moments} positions against {full['tokens']} positions fed ({result['work_ratio']:.3f}); "
        f"no extra positions fed",
    ]
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
