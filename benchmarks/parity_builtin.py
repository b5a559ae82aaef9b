"""The eleven built-in benchmarks scored by us and by lm-evaluation-harness 0.4.13, side by side.

For each benchmark: ``curate init`` from ../shared/data/benchmarks, then ``curate score --model
smollm2-135m --limit N`` in the adapter's default formulation (full mode, float32), and lm-eval's
hf backend (float32, the same converted model folder) running the benchmark's own task pointed
at the same file, on the same N items. Prints, per benchmark, the largest |logprob difference|
over every option and whether acc (and acc_norm, where lm-eval reports it) is identical on every
item.

    python benchmarks/parity_builtin.py --items 50 [--out benchmarks/results/F.json] [--write-fixture]

``--write-fixture`` stores lm-eval's numbers as tests/fixtures/lmeval_builtin_smollm2.json, which
tests/test_scoring_builtin.py compares our scores with.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BENCHMARKS = ROOT.parent / "shared" / "data" / "benchmarks"
FIXTURE = ROOT / "tests" / "fixtures" / "lmeval_builtin_smollm2.json"



def data_file(name: str) -> Path:
    from benchmarks.lmeval_reference import shared_file
    return shared_file(name, BENCHMARKS)[0]


def ours(name: str, n: int, folder: Path) -> dict:
    """Ingest and score the first ``n`` items as `curate init` / `curate score` do."""
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from scoring.run import Score
    from scoring.store import open_scores, read_scores

    from benchmarks.lmeval_reference import shared_file

    path, split = shared_file(name, BENCHMARKS)
    ws = Ingest(folder / name, IngestOptions(data=str(path), split=split), get_adapter(name)).run()
    start = time.perf_counter()
    summary = Score.with_options(ws, model="smollm2-135m", modes=["full"], dtype="float32", limit=n, seq_mean="none", quiet=True).run()
    with open_scores(ws) as store:
        items = store.items()[:n]
        scores = read_scores(store)
    return {"seconds": time.perf_counter() - start, "formulation": summary["formulations"][0], "items": items,
            "scores": scores}


def compare(mine: dict, theirs: dict) -> dict:
    """Largest |logprob difference| and per-item acc / acc_norm agreement."""
    items, scores = mine["items"], mine["scores"]
    assert [i["row"] for i in theirs["items"]] == [it["row_index"] for it in items]
    worst, acc_same, norm_same = 0.0, True, True
    accs, norms = [], []
    for item, ref in zip(items, theirs["items"]):
        rows = scores[scores["item_id"] == item["item_id"]].sort_values("option_index")
        lls = rows["logprob_sum"].to_numpy()
        worst = max(worst, float(np.abs(lls - np.array(ref["lls"])).max()))
        acc = float(lls.argmax() == item["gold"])
        acc_norm = float((lls / rows["n_chars"].to_numpy()).argmax() == item["gold"])
        accs.append(acc)
        norms.append(acc_norm)
        acc_same &= acc == ref["acc"]
        if "acc_norm" in ref:
            norm_same &= acc_norm == ref["acc_norm"]
    has_norm = "acc_norm" in theirs["metrics"]
    return {"items": len(items), "formulation": mine["formulation"], "max_abs_diff": worst,
            "acc": float(np.mean(accs)), "lmeval_acc": float(np.mean([r["acc"] for r in theirs["items"]])),
            "acc_identical": bool(acc_same),
            "acc_norm": float(np.mean(norms)) if has_norm else None,
            "lmeval_acc_norm": float(np.mean([r["acc_norm"] for r in theirs["items"]])) if has_norm else None,
            "acc_norm_identical": bool(norm_same) if has_norm else None, "our_seconds": round(mine["seconds"], 1)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--benchmarks", default="arc_easy,arc_challenge,mmlu,openbookqa,piqa,social_iqa,winogrande,"
                                                 "copa,commonsense_qa,sciq,boolq")
    parser.add_argument("--lmeval-batch-size", type=int, default=32)
    parser.add_argument("--write-fixture", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    names = [b for b in args.benchmarks.split(",") if b]

    from benchmarks.lmeval_reference import run_lmeval_benchmarks
    from scoring.models import resolve

    model_dir = resolve("smollm2-135m").path
    with tempfile.TemporaryDirectory() as tmp:
        mine = {name: ours(name, args.items, Path(tmp)) for name in names}
    theirs = run_lmeval_benchmarks(model_dir, {name: data_file(name) for name in names}, args.items,
                                   batch_size=args.lmeval_batch_size)
    table = {name: compare(mine[name], theirs["benchmarks"][name]) for name in names}
    report = {"items": args.items, "model": "smollm2-135m", "dtype": "float32", "lm_eval_version": theirs["lm_eval_version"],
              "lmeval_seconds": round(theirs["seconds"], 1), "lmeval_batch_size": args.lmeval_batch_size,
              "benchmarks": table}
    print(f"{args.items} items per benchmark, smollm2-135m float32, full mode, each adapter's default formulation; "
          f"lm-eval {theirs['lm_eval_version']} hf backend ({theirs['seconds']:.0f} s for all)")
    print(f"{'benchmark':<16}{'formulation':<13}{'max |diff|':>11}{'acc':>8}{'lm-eval':>9}{'same':>6}"
          f"{'acc_norm':>10}{'lm-eval':>9}{'same':>6}")
    for name, r in table.items():
        norm = (f"{r['acc_norm']:>10.2f}{r['lmeval_acc_norm']:>9.2f}{'yes' if r['acc_norm_identical'] else 'NO':>6}"
                if r["acc_norm"] is not None else f"{'-':>10}{'-':>9}{'-':>6}")
        print(f"{name:<16}{r['formulation']:<13}{r['max_abs_diff']:>11.1e}{r['acc']:>8.2f}{r['lmeval_acc']:>9.2f}"
              f"{'yes' if r['acc_identical'] else 'NO':>6}{norm}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    if args.write_fixture:
        FIXTURE.write_text(json.dumps({k: theirs[k] for k in ("lm_eval_version", "limit", "dtype", "batch_size",
                                                                "benchmarks")}, indent=1) + "\n")


if __name__ == "__main__":
    main()
