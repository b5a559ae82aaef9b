"""The local annotator before and after it scored through the engine, side by side in one run.

For the first N HellaSwag validation items (default 40), both annotation rounds with the built-in
smollm2-135m in float32 (``curate annotate --annotator local:smollm2-135m``), run twice:

1. before: the tree at ``--before`` (default fb15609, one item at a time, a KV cache copied for
   every question), extracted with ``git archive`` into a temporary folder and imported from
   there (``PYTHONPATH``), in this same virtualenv;
2. after: this tree (items batched through ``scoring.forward.score_requests``, the runner probe and
   the self-check included in the timing).

Each side runs in its own process on a fresh workspace of the same items, with the weights
loaded before the clock starts; a round's time is the whole stage run
(planning, prompts, tokenizing, scoring, storing). Printed: items per second (wall, and per CPU
second, which is steadier on a shared machine) for each round and both, the after / before ratio,
and whether every question of every item got the same answer. Answers may differ only where the
two likeliest answers are within ``--near-tie`` (1e-3) of each other on either side: those are
counted and listed apart. Exit code 1 when any other answer differs.

    python benchmarks/local_annotator.py [--items 40] [--threads N] [--out results.json]
"""
from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hellaswag" / "validation.jsonl.gz"
BEFORE = "fb156093f1fb32c0f8fa923b18b8dde7b6253996"
ANNOTATOR = "local:smollm2-135m"


# --- one side, in its own process (imports from PYTHONPATH) -----------------------------------

def child(tree: Path, workspace: Path, items: int, threads: int | None, out: Path) -> None:
    """Annotate ``items`` HellaSwag items, both rounds, with the code of ``tree``; write timings
    and every record's raw reply to ``out``."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    import annotate.local as local
    from annotate.store import open_annotations, read_annotations

    if not Path(local.__file__).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"imported {local.__file__}, not the tree at {tree}")
    ingest, annotate = stages()
    ingest(workspace, items)
    annotator = local.LocalAnnotator(ANNOTATOR.split(":", 1)[1])
    annotator.model  # the weights load before the clock starts, once for both rounds
    local.LocalAnnotator = lambda *a, **k: annotator
    rounds = {}
    for round in (1, 2):
        load = os.getloadavg()[0]
        wall, cpu = time.perf_counter(), time.process_time()
        summary = annotate(workspace, round)
        rounds[round] = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                         "valid": summary["valid"], "load_before": load, "load_after": os.getloadavg()[0]}
    ws = open_annotations(workspace)
    try:
        frame = read_annotations(ws, annotator=ANNOTATOR)
    finally:
        ws.close()
    raws = {str(r): {it: json.loads(raw) for it, raw in zip(part["item_id"], part["raw"])}
            for r, part in frame.groupby("round")}
    out.write_text(json.dumps({"code": str(local.__file__), "threads": torch.get_num_threads(), "rounds": rounds,
                               "raw": raws}))


def stages():
    """(ingest, annotate) as the tree imported has them: the stage objects, or, in a tree from
    before stages were objects (the default ``--before``), its functions of the same work."""
    from curate.items.adapters import get_adapter

    try:
        from annotate.options import AnnotateOptions
        from annotate.run import Annotate
        from curate.items.ingest import Ingest
        from curate.items.ingest_options import IngestOptions
    except ImportError:
        from annotate.run import annotate_workspace
        from curate.items.ingest import ingest

        return (lambda ws, n: ingest(ws, data=str(DATA), adapter=get_adapter("hellaswag"), limit=n),
                lambda ws, r: annotate_workspace(ws, r, ANNOTATOR, show_progress=False))
    return (lambda ws, n: Ingest(ws, IngestOptions(data=str(DATA), limit=n), get_adapter("hellaswag")).run(),
            lambda ws, r: Annotate(ws, AnnotateOptions(round=r, annotator=ANNOTATOR, quiet=True)).run())


# --- both sides and the comparison ----------------------------------------------------------------

def extract(commit: str, folder: Path) -> Path:
    """The tree of ``commit`` in ``folder`` (``git archive``: no checkout of this repository changes)."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit], check=True,
                         capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(folder, filter="data")
    return folder


def run_side(tree: Path, tmp: Path, name: str, items: int, threads: int | None) -> dict:
    out = tmp / f"{name}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(tree), "--workspace", str(tmp / name),
           "--items", str(items), "--result", str(out)] + (["--threads", str(threads)] if threads else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    subprocess.run(cmd, check=True, env=env, cwd=tmp)
    return json.loads(out.read_text())


def top_two_gap(logprobs: list[float]) -> float:
    best = sorted(logprobs, reverse=True)
    return best[0] - best[1] if len(best) > 1 else float("inf")


def compare(before: dict, after: dict, near_tie: float) -> dict:
    """Per question of every item and round: the same answer, a near-tie, or a real difference."""
    same, ties, tied_differ, differ = 0, 0, [], []
    for round, items in before["raw"].items():
        for item_id, questions in items.items():
            for key, b in questions.items():
                a = after["raw"][round][item_id][key]
                tie = min(top_two_gap(b["logprobs"]), top_two_gap(a["logprobs"])) < near_tie
                ties += tie
                if a["answer"] == b["answer"]:
                    same += 1
                else:
                    (tied_differ if tie else differ).append(f"round {round} {item_id} {key}: before {b['answer']} "
                                                            f"{b['logprobs']}, after {a['answer']} {a['logprobs']}")
    return {"questions": same + len(tied_differ) + len(differ), "same": same, "near_ties": ties,
            "near_ties_differing": tied_differ, "differing": differ}


def rates(side: dict, items: int) -> dict:
    r = side["rounds"]
    wall = {k: items / v["wall_s"] for k, v in r.items()}
    cpu = {k: items / v["cpu_s"] for k, v in r.items()}
    wall["both"] = 2 * items / sum(v["wall_s"] for v in r.values())
    cpu["both"] = 2 * items / sum(v["cpu_s"] for v in r.values())
    return {"wall": wall, "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--before", default=BEFORE, help="the commit measured as 'before'")
    parser.add_argument("--threads", type=int, default=None, help="torch threads on both sides (default: torch's own)")
    parser.add_argument("--near-tie", type=float, default=1e-3)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--workspace", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.workspace, args.items, args.threads, args.result)

    with tempfile.TemporaryDirectory(prefix="local-annotator-bench-") as tmp:
        tmp = Path(tmp)
        old = extract(args.before, tmp / "before-tree")
        sides = {}
        for name, tree in (("before", old), ("after", ROOT)):
            print(f"{name}: {tree} (load average {os.getloadavg()[0]:.1f})", flush=True)
            sides[name] = run_side(tree, tmp, name, args.items, args.threads)
    result = compare(sides["before"], sides["after"], args.near_tie)
    speed = {name: rates(side, args.items) for name, side in sides.items()}
    print(f"{args.items} HellaSwag items, both rounds, {ANNOTATOR} float32 on {sides['after']['threads']} threads; "
          f"before = {args.before[:7]}, after = this tree")
    print(f"{'':<8}{'round':>7}{'seconds':>10}{'items/s':>10}{'items/CPU-s':>13}{'load':>12}")
    for name, side in sides.items():
        for round, r in side["rounds"].items():
            print(f"{name:<8}{round:>7}{r['wall_s']:>10.1f}{speed[name]['wall'][round]:>10.3f}"
                  f"{speed[name]['cpu'][round]:>13.3f}{r['load_before']:>6.1f}-{r['load_after']:.1f}")
    for key in ("1", "2", "both"):
        print(f"after / before, round {key}: {speed['after']['wall'][key] / speed['before']['wall'][key]:.1f}x by wall "
              f"time, {speed['after']['cpu'][key] / speed['before']['cpu'][key]:.1f}x by CPU time")
    print(f"same answer: {result['same']} of {result['questions']} questions; near-ties (two likeliest within "
          f"{args.near_tie:g} on either side): {result['near_ties']}, of which answered differently: "
          f"{len(result['near_ties_differing'])}; other differences: {len(result['differing'])}")
    for line in result["near_ties_differing"]:
        print("  near-tie:", line)
    for line in result["differing"]:
        print("  DIFFERENT:", line)
    if args.out:
        args.out.write_text(json.dumps({"items": args.items, "before": args.before, "speed": speed,
                                        "rounds": {k: s["rounds"] for k, s in sides.items()}, **result},
                                       indent=1) + "\n")
    sys.exit(1 if result["differing"] else 0)


if __name__ == "__main__":
    main()
