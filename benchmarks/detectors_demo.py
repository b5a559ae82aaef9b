"""Where the label-error score ranks the demo benchmark's planted wrong-gold items.

Builds the demo workspace (``curate init`` with the demo's generic mapping), scores it in full
mode with the local SmolLM2-135M (``curate score``; the demo's one model), or takes a scored one
with ``--workspace``, and prints, under each normalization, the rank of each ``wrong_gold`` row of
``curate/demo/plants.json`` among the 40 items by ``label_error_score`` and whether the suspected
option is the planted true gold.

    nice -n 10 .venv/bin/python benchmarks/detectors_demo.py [--workspace WS]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
INIT_ARGS = ["--benchmark", "generic", "--name", "demo", "--question", "context", "--choices", "endings",
             "--answer", "label", "--answer-format", "index", "--zero-column", "start",
             "--source-column", "domain", "--id-columns", "id", "--template", "{topic}: {question} {start}"]


def build(folder: Path) -> Path:
    from curate import demo
    curate = [sys.executable, "-m", "curate"]
    subprocess.run([*curate, "init", str(folder), "--data", str(demo.benchmark_path()), *INIT_ARGS],
                   check=True, cwd=ROOT, capture_output=True)
    subprocess.run([*curate, "score", str(folder), "--model", "smollm2-135m", "--modes", "full", "--quiet"],
                   check=True, cwd=ROOT, capture_output=True)
    return folder


def ranks(workspace: Path) -> list[str]:
    from curate import demo
    from curate.validity.responses import response_matrix
    from curate.validity.suspects import suspects
    from scoring.store import open_scores, read_scores
    with open_scores(workspace) as ws:
        scores, items = read_scores(ws, modes=["full"]), ws.items()
    plants = demo.load_plants()
    wrong = sorted(row for row, p in plants.items() if "wrong_gold" in p.kinds)
    row_of = {it["item_id"]: it["row_index"] for it in items}
    lines = []
    for norm in ("seq_mean", "char", "sum"):
        r = response_matrix(scores, items, mode="full", normalization=norm)
        table = suspects(r)
        rows = table["item_id"].map(row_of).to_numpy()
        found = []
        for row in wrong:
            place = int(np.flatnonzero(rows == row)[0])
            right = int(table["suspected_option"].iloc[place]) == plants[row].true_gold
            found.append(f"row {row}: rank {place + 1}{' (suspects the true gold)' if right else ''}")
        lines.append(f"{norm:>8} (accuracy {r.correct.mean():.3f}): " + "; ".join(found))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, help="A demo workspace scored in full mode.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = args.workspace or build(Path(tmp) / "ws")
        print("demo benchmark, 40 items, SmolLM2-135M full mode: rank of each planted wrong_gold item "
              "by label_error_score (1 = likeliest broken)")
        print("\n".join(ranks(workspace)))


if __name__ == "__main__":
    main()
