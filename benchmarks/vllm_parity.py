"""The vllm backend against our engine, side by side on held-out rows (issue 39's acceptance).

HellaSwag validation rows 9000 on (0-shot; modes full, zero and placeholder) and MMLU test rows
spread over every subject (5-shot from its dev split; letters), the built-in smollm2-135m in
float32, scored once by ``curate score`` (the engine) and once by ``curate score --backend vllm``
(vLLM in its own environment: BENCHCURATE_VLLM_PYTHON or ``-o python``). Printed per benchmark:
the largest |difference| of any option's log-likelihood (and seq_mean), the items whose argmax
agrees, wall times, and the work ratio: tokens vLLM was fed over tokens the engine was fed (the
engine computes a prefix many rows share once; vLLM recomputes each prompt whose own
log-probabilities it returns).

    BENCHCURATE_VLLM_PYTHON=.venv-vllm/bin/python python benchmarks/vllm_parity.py --items 100 \\
        [--out results.json] [-o enable_prefix_caching true]

tests/test_vllm_backend.py runs the same comparison on fewer items.
"""
from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data"
HELLASWAG = DATA / "hellaswag" / "validation.jsonl.gz"
MMLU = DATA / "benchmarks" / "mmlu"
HELD_OUT = 9000  # the tests and benchmarks elsewhere use HellaSwag's first rows
MODEL = "smollm2-135m"


def write_rows(path: Path, rows: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(rows)
    return path


def hellaswag_ws(folder: Path, n: int, data: Path = DATA) -> Path:
    """A workspace of HellaSwag validation rows ``HELD_OUT`` .. ``HELD_OUT + n`` (``data``: the
    shared data folder, or a copy of it)."""
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    with gzip.open(data / HELLASWAG.relative_to(DATA), "rt", encoding="utf-8") as f:
        rows = f.readlines()[HELD_OUT:HELD_OUT + n]
    data = write_rows(folder / "data" / "validation.jsonl.gz", rows)
    return Ingest(folder / "ws", IngestOptions(data=str(data), split="validation"), get_adapter("hellaswag")).run()


def mmlu_ws(folder: Path, n: int, data: Path = DATA) -> Path:
    """A workspace of ``n`` MMLU test rows evenly spread over the split (every subject), its
    5-shot pool the dev split beside them (linked, not copied)."""
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    mmlu = data / MMLU.relative_to(DATA)
    with gzip.open(mmlu / "test.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = f.readlines()
    step = len(rows) // n
    test = write_rows(folder / "data" / "test.jsonl.gz", rows[::step][:n])
    (folder / "data" / "dev.jsonl.gz").symlink_to((mmlu / "dev.jsonl.gz").resolve())
    return Ingest(folder / "ws", IngestOptions(data=str(test), split="test"), get_adapter("mmlu")).run()


#: (workspace builder, curate score's options) per benchmark compared.
RUNS = {"hellaswag": (hellaswag_ws, {"modes": "full,zero,placeholder"}),
        "mmlu": (mmlu_ws, {"modes": "full", "formulations": "letters", "fewshot": "5"})}


def stored(ws: Path):
    from scoring.store import open_scores, read_scores
    with open_scores(ws) as w:
        return read_scores(w)


def compare(engine_ws: Path, vllm_ws: Path) -> dict:
    """Largest |difference| per option (logprob_sum, seq_mean), the items (x mode, shots) whose
    argmax of logprob_sum agrees, and the options whose greedy flag agrees."""
    a, b = stored(engine_ws), stored(vllm_ws)
    keys = ["item_id", "mode", "formulation", "fewshot", "option_index"]
    both = a.merge(b, on=keys, suffixes=("_engine", "_vllm"))
    assert len(both) == len(a) == len(b), (len(a), len(b), len(both))
    seq = (both["seq_mean_engine"] - both["seq_mean_vllm"]).abs().max()
    units = both.groupby(["item_id", "mode", "formulation", "fewshot"])
    agree = units.apply(lambda g: g["logprob_sum_engine"].idxmax() == g["logprob_sum_vllm"].idxmax(),
                        include_groups=False)
    return {"options": len(both), "max_abs_diff": float((both["logprob_sum_engine"] - both["logprob_sum_vllm"]).abs().max()),
            "max_abs_diff_seq_mean": None if seq != seq else float(seq),
            "argmax_agree": int(agree.sum()), "units": int(len(agree)),
            "greedy_agree": int((both["is_greedy_engine"] == both["is_greedy_vllm"]).sum())}


def run(name: str, n: int, folder: Path, knobs: dict) -> dict:
    from scoring.run import Score
    build, options = RUNS[name]
    engine_ws = build(folder / name, n)
    vllm_ws = shutil.copytree(engine_ws, folder / f"{name}-vllm")
    start = time.perf_counter()
    engine = Score.with_options(engine_ws, model=MODEL, quiet=True, **options).run()
    engine_s = time.perf_counter() - start
    start = time.perf_counter()
    vllm = Score.with_options(vllm_ws, model=MODEL, quiet=True, backend="vllm", **options, **knobs).run()
    vllm_s = time.perf_counter() - start
    engine_fed, vllm_fed = engine["prefix_cache"]["fed_tokens"], vllm["vllm"]["tokens_fed"]
    return {"benchmark": name, "items": n, **options, **compare(engine_ws, vllm_ws),
            "engine_seconds": round(engine_s, 1), "engine_score_seconds": engine["score_seconds"],
            "vllm_seconds": round(vllm_s, 1), "vllm_score_seconds": vllm["score_seconds"],
            "engine_fed_tokens": engine_fed, "vllm_fed_tokens": vllm_fed,
            "work_ratio": round(vllm_fed / engine_fed, 2), "vllm_prompts": vllm["vllm"]["prompts"],
            "vllm_self_check": vllm["self_check"].get("largest_compared")}


def line(r: dict) -> str:
    """One benchmark's result as the script prints it."""
    setting = ", ".join([r["modes"], r.get("formulations", "cloze"), f"{r.get('fewshot', '0')}-shot"])
    seq = f" (seq_mean {r['max_abs_diff_seq_mean']:.2e})" if r["max_abs_diff_seq_mean"] is not None else ""
    return (f"{r['benchmark']} ({r['items']} items, {setting}): {r['options']} options, max |diff| "
            f"{r['max_abs_diff']:.2e}{seq}, argmax agrees on {r['argmax_agree']}/{r['units']}, greedy flags on "
            f"{r['greedy_agree']}/{r['options']}; engine {r['engine_seconds']} s ({r['engine_score_seconds']} s "
            f"scoring), vllm {r['vllm_seconds']} s ({r['vllm_score_seconds']} s scoring); tokens fed: engine "
            f"{r['engine_fed_tokens']}, vllm {r['vllm_fed_tokens']} ({r['vllm_prompts']} prompts), work ratio "
            f"{r['work_ratio']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--benchmarks", default="hellaswag,mmlu")
    parser.add_argument("--out", type=Path)
    parser.add_argument("-o", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="A vllm backend setting, as curate score takes it (true/false, numbers as such).")
    args = parser.parse_args()
    knobs = {k: json.loads(v) if v in ("true", "false") or v.replace(".", "", 1).isdigit() else v for k, v in args.o}
    results = []
    with tempfile.TemporaryDirectory(prefix="vllm-parity-") as tmp:
        for name in args.benchmarks.split(","):
            result = run(name, args.items, Path(tmp), knobs)
            results.append(result)
            print(line(result), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"knobs": knobs, "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
