"""Duplicate search over every file in ../shared/data, and planted copies on whole files.

1. Every split of all twelve benchmarks (~38k items) read as `curate init` reads them and
   searched in one call, as `curate duplicates` does: wall time and peak memory (targets: 60 s,
   2 GB on a 2-core CPU), and the pairs found per pair of collections and matched field.
2. Planted copies (2% of items; case, white space, punctuation, option order and one word
   changed; seeds 0-2) in the whole of ARC-Challenge, ARC-Easy and MMLU test: recall and
   precision (targets 0.98 and 0.95).

    python benchmarks/duplicates.py [--out benchmarks/results/F.txt]

There is no other tool to run beside it: the targets are absolute.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import resource
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data"
FOLDERS = {"arc_challenge": "arc_challenge", "arc_easy": "arc_easy", "mmlu": "mmlu", "openbookqa": "openbookqa",
           "piqa": "piqa", "social_i_qa": "social_iqa", "winogrande": "winogrande", "copa": "copa",
           "commonsense_qa": "commonsense_qa", "sciq": "sciq", "boolq": "boolq"}


def read(adapter_name: str, folder: Path, split: str) -> list[dict]:
    from curate.items.adapters import get_adapter
    from curate.items.ingest import build_items
    from curate.items.sources import open_source

    source = open_source(str(folder), split=split)
    return build_items(source.rows, get_adapter(adapter_name), split=split, where=str(folder))[0]


def every_file() -> list[tuple[str, Path, str]]:
    found = [("hellaswag", DATA / "hellaswag", "validation")]
    for folder, adapter in FOLDERS.items():
        for f in sorted((DATA / "benchmarks" / folder).glob("*.jsonl.gz")):
            found.append((adapter, f.parent, f.name.split(".")[0]))
    return found


def search_everything(say) -> None:
    from curate.items.duplicates import detect

    start = time.perf_counter()
    entries = []
    for adapter, folder, split in every_file():
        entries += [detect.entry(it, f"{adapter}/{split}") for it in read(adapter, folder, split)]
    read_s = time.perf_counter() - start
    pairs = detect.find_pairs(entries)
    total = time.perf_counter() - start
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    say(f"search over every file: {len(entries)} items from {len(every_file())} files; {total:.1f} s "
        f"({read_s:.1f} s reading, {total - read_s:.1f} s searching), peak memory {peak_gb:.2f} GB "
        f"(targets: 60 s, 2 GB)")
    clusters = detect.clusters([p for p in pairs if p.field == "both"])
    say(f"{len(pairs)} pairs ({sum(p.exact for p in pairs)} exact), {len(set(clusters.values()))} clusters of copies")
    for (a, b, field), n in sorted(Counter((p.collection_a, p.collection_b, p.field) for p in pairs).items(),
                                   key=lambda kv: -kv[1]):
        say(f"  {a:24s} {b:24s} {field:9s} {n}")


def planted(say) -> None:
    from curate.items.duplicates import detect, plant

    for adapter, split in (("arc_challenge", "validation"), ("arc_easy", "validation"), ("mmlu", "test")):
        items = read(adapter, DATA / "benchmarks" / adapter, split)
        base = detect.clusters(detect.find_pairs([detect.entry(i, "w") for i in items]))
        baseline = {k: c for (_, k), c in base.items()}
        for seed in range(3):
            items_planted, key = plant.plant(items, 0.02, seed)
            start = time.perf_counter()
            pairs = detect.find_pairs([detect.entry(i, "w") for i in items_planted])
            recall, precision = plant.recall_precision(pairs, key, baseline)
            say(f"planted {adapter}/{split} seed {seed}: {len(key)} copies in {len(items)} items: recall {recall:.3f}, "
                f"precision {precision:.3f} ({time.perf_counter() - start:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    with contextlib.redirect_stderr(io.StringIO()):  # the ingest progress bars
        search_everything(say)
        planted(say)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
