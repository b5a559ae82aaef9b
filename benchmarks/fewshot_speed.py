"""k-shot scoring against lm-evaluation-harness, side by side in one run on one machine.

Three cases, SmolLM2-135M in float32, lm-eval's numbers only (``seq_mean="none"``):

- ``mmlu5``: 5-shot MMLU on whole subjects (letters formulation, shots ``first_n`` from ``dev``);
- ``hellaswag10``: 10-shot HellaSwag on the first N validation items (lm-eval's seeded random
  shots from the validation split, each item left out of its own: ``--fewshot-pool evaluated``);
- ``hellaswag0``: 0-shot HellaSwag on the first N items, also with the prefix cache off
  (``prefix_cache_mb=0``: the engine as it was), so a drop in today's speed shows.

Ours is ``curate score --fewshot K`` (the ``Score`` stage of ``scoring.run`` in a child process: wall
time, peak resident memory). lm-eval 0.4.13 runs its hf backend, batch 32, ``num_fewshot`` K,
its tasks pointed at the local files (``benchmarks/lmeval_fewshot.py``). Printed per case: the
largest |difference| of log-likelihoods, whether acc agrees on every item, the wall ratio and
beside it the work ratio: tokens lm-eval feeds (each distinct context + continuation[:-1] once,
as its one-token-continuation grouping feeds them) over tokens we feed (each cached prefix once,
then every row after it).

    nice -n 10 python benchmarks/fewshot_speed.py --cases mmlu5,hellaswag0,hellaswag10 \\
        --hellaswag-items 100 --hellaswag10-items 100 --out benchmarks/results/cpu-2core-fewshot.txt
"""
from __future__ import annotations

import argparse
import gzip
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
SHARED = ROOT.parent / "shared" / "data"
HELLASWAG = SHARED / "hellaswag" / "validation.jsonl.gz"
MMLU_TEST, MMLU_DEV = SHARED / "benchmarks" / "mmlu" / "test.jsonl.gz", SHARED / "benchmarks" / "mmlu" / "dev.jsonl.gz"
SUBJECTS = ("abstract_algebra", "business_ethics", "college_chemistry")
MODEL = "smollm2-135m"


def rows_of(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def run_ours(ws: Path, **kwargs) -> dict:
    """``Score.with_options(ws, model=MODEL, modes=["full"], **kwargs).run()`` in a child process: its summary, wall
    time and the child's own peak resident memory (VmHWM)."""
    code = ("import json, sys; from scoring.run import Score; "
            f"s = Score.with_options({str(ws)!r}, model={MODEL!r}, modes=['full'], quiet=True, **json.loads(sys.argv[1])).run(); "
            "print('SUMMARY ' + json.dumps(s)); "
            "print('PEAK', open('/proc/self/status').read().split('VmHWM:')[1].split()[0])")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(kwargs)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          stdout=subprocess.PIPE, text=True, check=True)
    wall = time.perf_counter() - start
    lines = proc.stdout.splitlines()
    summary = json.loads(next(x for x in lines if x.startswith("SUMMARY "))[8:])
    return {**summary, "wall_seconds": wall, "peak_rss_mb": int(next(x for x in lines if x.startswith("PEAK "))[5:]) / 1024}


def run_lmeval(benchmark: str, data: Path, k: int, *, fewshot: Path | None, limit: int | None) -> dict:
    """lm-eval's hf backend, batch 32, float32, k shots: wall time and, per row of ``data``, its
    requests' (context, continuation), log-likelihoods and acc."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from benchmarks.lmeval_fewshot import _tasks
    from scoring.models import resolve
    with tempfile.TemporaryDirectory() as tmp:
        rows = _tasks(Path(tmp), benchmark, data, fewshot, k)
        manager = TaskManager(include_path=tmp, include_defaults=False)
        start = time.perf_counter()
        out = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={resolve(MODEL).path},dtype=float32",
                                      tasks=list(rows), task_manager=manager, num_fewshot=k, limit=limit,
                                      device="cpu", batch_size=32, log_samples=True)
        seconds = time.perf_counter() - start
    items = {}
    for task, samples in out["samples"].items():
        for s in samples:
            items[rows[task][s["doc_id"]]] = {"lls": [float(r[0][0]) for r in s["resps"]], "acc": float(s["acc"]),
                                              "arguments": [tuple(a[:2]) for a in s["arguments"]]}
    return {"seconds": seconds, "version": lm_eval.__version__, "items": [items[i] for i in sorted(items)]}


def lmeval_tokens(items: list[dict], tokenizer, max_length: int) -> int:
    """Tokens lm-eval feeds: each distinct context + continuation[:-1] (its grouping of requests
    whose fed tokens are equal), cut from the left to its window as it cuts them."""
    from scoring.encode import encode_pair
    fed = set()
    for item in items:
        for context, continuation in item["arguments"]:
            ctx, cont, _ = encode_pair(tokenizer, context, continuation)
            fed.add(tuple((ctx + cont)[-(max_length + 1):][:-1]))
    return sum(len(f) for f in fed)


def compare(ws: Path, k: int, label: str, theirs: dict, gold: list[int]) -> dict:
    """Our stored k-shot log-likelihoods against lm-eval's, item by item in row order."""
    from scoring.store import open_scores, read_scores
    with open_scores(ws) as store:
        scores = read_scores(store, fewshots=[k])
        order = {it["item_id"]: i for i, it in enumerate(store.items())}
    scores = scores[scores["model"] == label]
    scores = scores.assign(row=scores["item_id"].map(order)).sort_values(["row", "option_index"])
    ours = scores.groupby("row")["logprob_sum"].apply(list).tolist()[:len(theirs["items"])]
    diff = max(float(np.max(np.abs(np.array(a) - np.array(t["lls"])))) for a, t in zip(ours, theirs["items"]))
    acc = [float(int(np.argmax(a)) == g) for a, g in zip(ours, gold)]
    return {"max_abs_diff": diff, "acc_identical": acc == [t["acc"] for t in theirs["items"]],
            "acc_ours": float(np.mean(acc)), "acc_lmeval": float(np.mean([t["acc"] for t in theirs["items"]])),
            "items_compared": len(ours)}


def case(name: str, tmp: Path, items: dict, hellaswag_ws: Path | None, subjects, per_subject) -> tuple:
    """(workspace, ours kwargs, lm-eval args) for one case (``items``: HellaSwag items per case;
    MMLU: the first ``per_subject`` rows of each of ``subjects``, None: all)."""
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    if name == "mmlu5":
        data, seen = tmp / "mmlu_subjects.jsonl.gz", {}
        with gzip.open(data, "wt", encoding="utf-8") as fh:
            for r in rows_of(MMLU_TEST):
                seen[r["subject"]] = seen.get(r["subject"], 0) + 1
                if r["subject"] in subjects and (per_subject is None or seen[r["subject"]] <= per_subject):
                    fh.write(json.dumps(r) + "\n")
        ws = Ingest(tmp / "mmlu", IngestOptions(data=str(data)), get_adapter("mmlu")).run()
        return ws, {"fewshot": "5", "fewshot_pool": str(MMLU_DEV), "formulations": ["letters"]}, \
            ("mmlu", data, 5, MMLU_DEV, None)
    k = 10 if name == "hellaswag10" else 0
    pool = {"fewshot_pool": "evaluated"} if k else {}
    return hellaswag_ws, {"fewshot": str(k), "limit": items[name], **pool}, ("hellaswag", HELLASWAG, k, None, items[name])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="mmlu5,hellaswag0,hellaswag10")
    parser.add_argument("--hellaswag-items", type=int, default=100, help="0-shot HellaSwag items")
    parser.add_argument("--hellaswag10-items", type=int, default=100, help="10-shot HellaSwag items")
    parser.add_argument("--subjects", default=",".join(SUBJECTS), help="MMLU subjects (whole, unless --per-subject)")
    parser.add_argument("--per-subject", type=int, default=None, help="MMLU rows per subject (default: all)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from curate.items.store import Workspace
    from scoring.models import load, resolve
    from scoring.models import max_length

    model, tokenizer = load(resolve(MODEL))
    window = max_length(model, tokenizer)
    del model
    lines, report = [], {}

    def say(text=""):
        print(text, flush=True)
        lines.append(text)
        if args.out:
            args.out.write_text("\n".join(lines) + "\n")
            args.out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")

    say(f"{MODEL} float32, {os.cpu_count()} CPUs (load average at start {os.getloadavg()[0]:.1f}); "
        f"lm-eval hf backend batch 32")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        names = args.cases.split(",")
        # 10-shot draws its shots from the whole validation split (as lm-eval does): all of it is ingested
        limit = None if "hellaswag10" in names else args.hellaswag_items
        hs = Ingest(tmp / "hellaswag", IngestOptions(data=str(HELLASWAG), limit=limit), get_adapter("hellaswag")).run() \
            if any(n.startswith("hellaswag") for n in names) else None
        for name in names:
            items_of = {"hellaswag0": args.hellaswag_items, "hellaswag10": args.hellaswag10_items}
            ws, ours_kwargs, (bench, data, k, fewshot, limit) = case(name, tmp, items_of, hs, args.subjects.split(","),
                                                                    args.per_subject)
            runs = {"ours": run_ours(ws, seq_mean="none", label=f"{MODEL}@{name}", **ours_kwargs)}
            if k == 0:  # the engine as it was: no prefix cache
                runs["ours, cache off"] = run_ours(ws, seq_mean="none", label=f"{MODEL}@{name}-no-cache",
                                                   prefix_cache_mb=0, **ours_kwargs)
            theirs = run_lmeval(bench, data, k, fewshot=fewshot, limit=limit)
            items = Workspace.open(ws).items()[:len(theirs["items"])]
            parity = compare(ws, k, f"{MODEL}@{name}", theirs, [it["gold"] for it in items])
            fed_lmeval = lmeval_tokens(theirs["items"], tokenizer, window)
            report[name] = {"items": len(theirs["items"]), "shots": k, "lmeval_seconds": theirs["seconds"],
                            "lmeval_tokens": fed_lmeval, **parity, "runs": runs}
            say(f"\n{name}: {len(theirs['items'])} items, {k}-shot; lm-eval {theirs['version']}: "
                f"{theirs['seconds']:.1f} s wall, {fed_lmeval} tokens fed")
            for label, r in runs.items():
                fed = r["prefix_cache"]["fed_tokens"]
                say(f"  {label:<16} {r['wall_seconds']:.1f} s wall ({r['score_seconds']:.1f} s scoring), "
                    f"{fed} tokens fed: {theirs['seconds'] / r['wall_seconds']:.2f}x lm-eval by wall time, "
                    f"work ratio {fed_lmeval / fed:.2f}x; peak RSS {r['peak_rss_mb']:.0f} MiB")
            say(f"  parity: max |logprob_sum - lm-eval| = {parity['max_abs_diff']:.2e}; acc identical on every "
                f"item: {parity['acc_identical']} (acc {parity['acc_ours']:.4f} ours, {parity['acc_lmeval']:.4f} "
                f"lm-eval)")


if __name__ == "__main__":
    main()
