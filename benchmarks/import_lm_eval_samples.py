"""How fast `curate import-scores --format lm-eval-samples` takes many models' lm-eval sample logs.

Synthesizes an lm-eval ``--output_path`` tree of ``--models`` models over all 14042 MMLU test
items, written as lm-eval 0.4.13 writes them: per model a folder with ``results_<date>.json``
and one ``samples_mmlu_<subject>_<date>.jsonl`` per subject (57), each sample with its
``doc``, ``doc_id``, ``target``, ``arguments`` (lm-eval's own requests, built by its task code
through benchmarks/lmeval_reference.py), ``resps``/``filtered_resps`` as strings and the hashes.
Log-likelihoods are random (seeded); the greedy flag is set on each item's best option. Then
imports the whole tree into a fresh MMLU workspace with `curate import-scores` (its own
process, progress bar on) and prints wall time, CPU time, peak memory and the rows stored.

    nice -n 10 python benchmarks/import_lm_eval_samples.py [--models 100] [--out benchmarks/results/F.txt]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MMLU = ROOT.parent / "shared" / "data" / "benchmarks" / "mmlu" / "test.jsonl.gz"
RESULTS = next((ROOT / "tests" / "fixtures" / "lm_eval_samples" / "SmolLM2-135M").glob("results_*.json"))
DATE = "2026-01-01T00-00-00.000000"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sample_parts() -> dict[str, list[tuple[str, int]]]:
    """subject -> [(the sample's JSON up to its responses, number of options)], in doc order."""
    from benchmarks.lmeval_reference import _read_rows, lmeval_requests

    rows = _read_rows(MMLU)
    requests = lmeval_requests("mmlu", MMLU)
    by_subject: dict[str, list] = {}
    for row, ref in zip(rows, requests):
        docs = by_subject.setdefault(row["subject"], [])
        arguments = {f"gen_args_{i}": {"arg_0": c, "arg_1": t} for i, (c, t) in enumerate(ref["requests"])}
        head = {"doc_id": len(docs), "doc": row, "target": str(ref["gold"]), "arguments": arguments}
        docs.append((json.dumps(head, ensure_ascii=False)[:-1], len(ref["requests"]), ref["gold"],
                     sha(json.dumps(row, indent=2, ensure_ascii=False)), sha(ref["requests"][0][0]),
                     sha(str(ref["gold"]))))
    return by_subject


def write_model(folder: Path, name: str, parts: dict, rng: np.random.Generator) -> None:
    """One model's folder as lm-eval writes it."""
    folder.mkdir(parents=True)
    results = json.loads(RESULTS.read_text())
    tasks = [f"mmlu_{s}" for s in parts]
    results.update({"model_name": name, "model_name_sanitized": name.replace("/", "__"),
                    "n-shot": dict.fromkeys(tasks, 0), "results": {}, "configs": {}, "versions": {},
                    "n-samples": {}, "higher_is_better": {}, "group_subtasks": {}})
    results["config"]["model_args"] = {"pretrained": name, "dtype": "bfloat16"}
    (folder / f"results_{DATE}.json").write_text(json.dumps(results, indent=2))
    for subject, docs in parts.items():
        lines = []
        for head, n, gold, doc_hash, prompt_hash, target_hash in docs:
            lls = -rng.gamma(2.0, 2.0, n)
            best = int(lls.argmax())
            resps = [[str(float(v)), str(j == best)] for j, v in enumerate(lls)]
            lines.append(head + f', "resps": {json.dumps([[r] for r in resps])}, "filtered_resps": '
                         f'{json.dumps(resps)}, "filter": "none", "metrics": ["acc"], "doc_hash": "{doc_hash}", '
                         f'"prompt_hash": "{prompt_hash}", "target_hash": "{target_hash}", '
                         f'"acc": {float(best == gold)}}}\n')
        (folder / f"samples_mmlu_{subject}_{DATE}.jsonl").write_text("".join(lines), encoding="utf-8")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--tmp", type=Path, default=None, help="Where to write the tree (default: a temp folder).")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    curate = [sys.executable, "-m", "curate"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        parts = sample_parts()
        rng = np.random.default_rng(0)
        for m in range(args.models):
            name = f"synthetic/model-{m:03d}"
            write_model(tmp / "out" / name.replace("/", "__"), name, parts, rng)
        size = sum(f.stat().st_size for f in (tmp / "out").rglob("*"))
        written = time.perf_counter() - start
        subprocess.run([*curate, "init", str(tmp / "ws"), "--benchmark", "mmlu", "--data", str(MMLU)],
                       check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run([*curate, "import-scores", str(tmp / "ws"), "--format", "lm-eval-samples",
                               str(tmp / "out")], env=env, stdout=subprocess.PIPE, text=True)
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode:
            raise SystemExit(f"import failed ({proc.returncode})")
        with sqlite3.connect(tmp / "ws" / "workspace.db") as db:
            rows, models = db.execute("SELECT count(*), count(DISTINCT model) FROM scores").fetchone()
        shutil.rmtree(tmp / "out")
    n_items = sum(len(d) for d in parts.values())
    lines = [
        f"curate import-scores --format lm-eval-samples: {args.models} models x {n_items} MMLU test items "
        f"({len(parts)} subject files per model, {args.models * len(parts)} sample files, {size / 2**30:.2f} GiB of "
        f"jsonl as lm-eval 0.4.13 writes it; random log-likelihoods; tree written in {written:.0f} s)",
        f"import: {seconds:.1f} s wall ({seconds / 60:.1f} min), {after.ru_utime - before.ru_utime:.1f} s user + "
        f"{after.ru_stime - before.ru_stime:.1f} s system CPU, peak RSS {after.ru_maxrss / 1024:.0f} MiB; "
        f"{rows} score rows stored for {models} models ({rows / seconds:,.0f} rows/s, "
        f"{args.models * n_items / seconds:,.0f} samples/s)",
        f"machine: {os.cpu_count()} cores (shared with other work), nice -n 10; import output: "
        f"{proc.stdout.strip().splitlines()[-1]}",
    ]
    print("\n".join(lines))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
