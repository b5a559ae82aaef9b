"""What text scoring (``curate text-scores``) adds to scoring the same items in full mode.

Ingests the first N HellaSwag validation items, scores them in full mode (``curate score --modes
full``, every option, with the study's seq_mean as by default), then stores their text scores
(loss, zlib, Min-K%, Min-K%++), side by side in one process with one model, and prints both
times, the ratio and the token counts. The acceptance target (issue 30): text scoring adds at most
30% to the full-mode time.

    .venv/bin/python benchmarks/text_scoring.py --items 1000 [--dtype float32] [--device cpu]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELLASWAG = ROOT.parent / "shared" / "data" / "hellaswag" / "validation.jsonl.gz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--json", type=Path, default=None, help="Also write the numbers here.")
    args = parser.parse_args()

    import torch

    from curate.adapters import get_adapter
    from curate.ingest import ingest
    from scoring.run import score_workspace
    from scoring.text import text_score_workspace

    with tempfile.TemporaryDirectory() as tmp:
        ws = ingest(Path(tmp) / "ws", data=str(HELLASWAG), adapter=get_adapter("hellaswag"), limit=args.items)
        common = {"dtype": args.dtype, "device": args.device, "batch_tokens": args.batch_tokens, "show_progress": False}
        full = score_workspace(ws, args.model, ["full"], **common)
        text = text_score_workspace(ws, args.model, **common)
    ratio = text["score_seconds"] / full["score_seconds"]
    result = {"items": args.items, "model": args.model, "dtype": args.dtype, "device": args.device,
              "torch_threads": torch.get_num_threads(), "full_score_seconds": full["score_seconds"],
              "full_tokens": full["tokens"], "full_runner": full["runner"], "text_score_seconds": text["score_seconds"],
              "text_tokens": text["tokens"], "text_runner": text["runner"], "ratio": round(ratio, 4),
              "target": 0.30, "met": ratio <= 0.30}
    print(f"{args.items} HellaSwag items, {args.model} {args.dtype} on {args.device} "
          f"({torch.get_num_threads()} threads)")
    print(f"full mode (4 options + seq_mean): {full['score_seconds']:.1f} s, {full['tokens']} input tokens "
          f"({full['runner']} runner)")
    print(f"text scores (prompt + gold):      {text['score_seconds']:.1f} s, {text['tokens']} input tokens "
          f"({text['runner']} runner)")
    print(f"text / full: {ratio:.3f} by time, {text['tokens'] / full['tokens']:.3f} by input tokens "
          f"(target <= 0.30: {'met' if result['met'] else 'NOT met'})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
