"""`curate plant` + `curate plant evaluate` end to end on all of HellaSwag with the study's ten models.

Builds a workspace of the 10042 HellaSwag validation items with the study's released scores
(``curate init`` + ``curate import-scores --format study-csv``, as benchmarks/detectors_gold_moves.py
does; or takes one with ``--workspace``), plants gold moves in 2% of the items with seed 0 through
the command (``curate plant --kinds gold_move``: the scores are copied, no option changed), and
measures every detector the planted workspace holds with ``curate plant evaluate`` (the
item-validity scores and the two-best baseline), printing its table and the time of each step.
detectors_gold_moves.py measures the same score on the pure functions at 1, 2 and 5% over seeds;
this one checks that the commands give that measurement to a user, key file and all.

    nice -n 10 .venv/bin/python benchmarks/detectors_plant.py [--workspace WS] [--rate 0.02] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.detectors_gold_moves import build_workspace  # noqa: E402


def curate(*args) -> str:
    proc = subprocess.run([sys.executable, "-m", "curate", *map(str, args)], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"curate {' '.join(map(str, args))} failed:\n{proc.stderr}")
    return proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, help="A workspace with the study's scores imported.")
    parser.add_argument("--rate", default="0.02")
    parser.add_argument("--seed", default="0")
    parser.add_argument("--kinds", default="gold_move")
    parser.add_argument("--limit", type=int, help="Only the first N items (a quick try; the result is on all).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        workspace = args.workspace or build_workspace(tmp / "ws", args.limit)
        built = time.perf_counter()
        planted, key = tmp / "planted", tmp / "planted.plant-key.json"
        print(curate("plant", workspace, planted, "--kinds", args.kinds, "--rate", args.rate, "--seed", args.seed,
                     "--key", key).strip().replace(str(tmp), "TMP"))
        plant_s = time.perf_counter() - built
        table = curate("plant", "evaluate", planted, "--key", key)
        evaluate_s = time.perf_counter() - built - plant_s
        rows = json.loads(curate("plant", "evaluate", planted, "--key", key, "--json"))["rows"]
    print(f"\n{args.kinds} at rate {args.rate}, seed {args.seed}, on HellaSwag validation with the study's ten "
          f"models (mode full):\n")
    print(table.rstrip())
    print(f"\nworkspace {built - start:.0f} s, curate plant {plant_s:.0f} s, curate plant evaluate {evaluate_s:.0f} s")
    print("json: " + json.dumps(rows))


if __name__ == "__main__":
    main()
