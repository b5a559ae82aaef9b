"""How well the label-error score finds planted gold moves, beside the two-best baseline.

Builds a workspace of all HellaSwag validation items with the study's released scores (``curate
init`` + ``curate import-scores --format study-csv``, or takes one with ``--workspace``), reads
the full-prompt response matrix of the ten models once, then for each rate moves the gold of that
share of the items to another option, seeded (``Responses.with_gold``: the scores are reused, as
a gold move changes no option text), and ranks the items by ``suspects``' label_error_score and by
``two_best_baseline``. Printed per rate and detector: AUROC, precision@k and recall@k (k = the
number planted, so the two are equal) and how many UNPLANTED items rank above the cut: HellaSwag
has label errors of its own, and a detector that finds them pays for it in measured precision.
Acceptance (issue 28): at 2%, AUROC >= 0.97 and precision@k >= 0.60, above the baseline.

    nice -n 10 .venv/bin/python benchmarks/detectors_gold_moves.py [--workspace WS] [--seeds 0,1,2,3,4] [--mode full]
"""
from __future__ import annotations

import argparse
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
PAPER_SCORES = SHARED / "paper-scores"
RATES = (0.01, 0.02, 0.05)


def build_workspace(folder: Path, limit: int | None = None) -> Path:
    """HellaSwag validation (the first ``limit`` items) with the study's scores, through the CLI."""
    curate = [sys.executable, "-m", "curate"]
    subprocess.run([*curate, "init", str(folder), "--benchmark", "hellaswag", "--data", str(HELLASWAG),
                    *(["--limit", str(limit)] if limit else [])], check=True, cwd=ROOT, capture_output=True)
    subprocess.run([*curate, "import-scores", str(folder), "--format", "study-csv", "--dir", str(PAPER_SCORES)],
                   check=True, cwd=ROOT, capture_output=True)
    return folder


def read_responses(workspace: Path, mode: str = "full"):
    from curate.validity.responses import response_matrix
    from scoring.store import open_scores, read_scores
    with open_scores(workspace) as ws:
        return response_matrix(read_scores(ws, modes=[mode]), ws.items(), mode=mode)


def plant_gold_moves(responses, rate: float, seed: int):
    """(responses with round(rate * n) golds moved to a uniformly drawn other option, which items)."""
    rng = np.random.default_rng(seed)
    n = len(responses.gold)
    chosen = rng.choice(n, size=max(1, round(rate * n)), replace=False)
    gold = responses.gold.copy()
    for i in chosen:
        gold[i] = rng.choice([o for o in range(responses.n_options[i]) if o != gold[i]])
    planted = np.zeros(n, dtype=bool)
    planted[chosen] = True
    return responses.with_gold(gold), planted


def detector_scores(responses) -> dict[str, np.ndarray]:
    """Per detector, one score per item in the responses' order (higher = more likely broken)."""
    from curate.validity.suspects import suspects, two_best_baseline
    combined = suspects(responses).set_index("item_id")["label_error_score"]
    return {"label_error_score": combined.reindex(responses.item_ids).to_numpy(float),
            "two_best_baseline": two_best_baseline(responses).reindex(responses.item_ids).to_numpy(float)}


def ablations(responses, rate: float = 0.02, seed: int = 0) -> str:
    """The parts of label_error_score alone, on one planting: equal model weights (naive Bayes),
    the ability-weighted log-odds, less the discrimination term, and the whole score (plus the
    preference discrimination)."""
    from curate.validity.item_stats import corrected_item_total
    from curate.validity.suspects import DISCRIMINATION_WEIGHT, ability_weights, pooled_log_odds
    moved, planted = plant_gold_moves(responses, rate, seed)
    weighted = pooled_log_odds(moved, ability_weights(moved))[0]
    disc = np.nan_to_num(corrected_item_total(moved.correct), nan=0.0)
    parts = {"equal weights": pooled_log_odds(moved, np.ones(len(moved.models)))[0],
             "ability-weighted": weighted,
             "+ discrimination": weighted - DISCRIMINATION_WEIGHT * disc,
             "+ preference disc.": detector_scores(moved)["label_error_score"]}
    lines = [f"parts of label_error_score at {rate:.0%}, seed {seed}:"]
    for name, score in parts.items():
        m = measure(score, planted)
        lines.append(f"  {name:<18} AUROC {m['auroc']:.4f}  precision@k {m['precision_at_k']:.3f}")
    return "\n".join(lines)


def measure(score: np.ndarray, planted: np.ndarray) -> dict:
    """AUROC, precision@k = recall@k (k = number planted) and the unplanted items above the cut."""
    from sklearn.metrics import roc_auc_score
    k = int(planted.sum())
    top = np.argsort(-score, kind="stable")[:k]
    hits = int(planted[top].sum())
    return {"auroc": float(roc_auc_score(planted, score)), "precision_at_k": hits / k, "recall_at_k": hits / k,
            "k": k, "unplanted_above": k - hits}


def run(responses, rates=RATES, seeds=(0,)) -> list[dict]:
    rows = []
    for rate in rates:
        for seed in seeds:
            moved, planted = plant_gold_moves(responses, rate, seed)
            for name, score in detector_scores(moved).items():
                rows.append({"rate": rate, "seed": seed, "detector": name, **measure(score, planted)})
    return rows


def report(rows: list[dict], responses) -> str:
    lines = [f"{len(responses.item_ids)} HellaSwag items, mode {responses.mode}, normalization "
             f"{responses.normalization}, {len(responses.models)} models; gold moves planted with seeds "
             f"{sorted({r['seed'] for r in rows})}", "",
             f"{'rate':>5} {'k':>4}  {'detector':<18} {'AUROC':>7} {'prec@k':>7} {'rec@k':>7} {'unplanted>cut':>14}"]
    seeds = sorted({r["seed"] for r in rows})
    for rate in sorted({r["rate"] for r in rows}):
        for name in ("label_error_score", "two_best_baseline"):
            part = [r for r in rows if r["rate"] == rate and r["detector"] == name]
            first = next(r for r in part if r["seed"] == seeds[0])
            lines.append(f"{rate:>5.0%} {first['k']:>4}  {name:<18} {first['auroc']:>7.4f} "
                         f"{first['precision_at_k']:>7.3f} "
                         f"{first['recall_at_k']:>7.3f} {first['unplanted_above']:>14}")
            if len(seeds) > 1:
                auc = [r["auroc"] for r in part]
                prec = [r["precision_at_k"] for r in part]
                lines.append(f"{'':>5} {'':>4}  {'  over ' + str(len(seeds)) + ' seeds':<18} {np.mean(auc):>7.4f} "
                             f"{np.mean(prec):>7.3f} {'':>7} {'(mean)':>14}")
                lines.append(f"{'':>5} {'':>4}  {'':<18} {min(auc):>7.4f} {min(prec):>7.3f} {'':>7} {'(min)':>14}")
    return "\n".join(lines)


def describe(responses) -> str:
    """Each model's accuracy and temperature, and how many unplanted items are easy (SMART)."""
    from curate.validity.item_stats import easy_items
    lines = ["", "model accuracy and temperature (T of the calibrated probabilities):"]
    for name, acc, t in zip(responses.models, responses.correct.mean(axis=1), responses.temperature):
        lines.append(f"  {name:<44} {acc:.3f}  T {t:.3f}")
    easy = easy_items(responses)
    lines.append(f"items every model answers right: {int(responses.correct.all(axis=0).sum())} of {len(easy)}; "
                 f"easy (also each with p >= 0.8 on the gold): {int(easy.sum())}")
    return "\n".join(lines)


def real_suspects(responses, how_many: int) -> str:
    """The unplanted items the score ranks highest: HellaSwag's own likeliest label errors."""
    from curate.validity.suspects import suspects
    top = suspects(responses).head(how_many)
    lines = [f"top {how_many} items of the unplanted benchmark (item, score, gold -> suspected, backing models):"]
    for row in top.itertuples():
        ev = row.evidence
        lines.append(f"  {row.item_id}  {row.label_error_score:6.2f}  {ev['gold']} -> {ev['suspected_option']}  "
                     + ", ".join(f"{m['model']} {m['p_suspected']:.2f}" for m in ev["models"][:3]))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, help="A workspace with the study's scores imported.")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--rates", default=",".join(map(str, RATES)))
    parser.add_argument("--mode", default="full", help="Prompt mode of the study's scores (full, zero, placeholder).")
    args = parser.parse_args()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = args.workspace or build_workspace(Path(tmp) / "ws")
        built = time.perf_counter()
        responses = read_responses(workspace, args.mode)
    rows = run(responses, [float(r) for r in args.rates.split(",")], [int(s) for s in args.seeds.split(",")])
    print(report(rows, responses))
    print(describe(responses))
    print()
    print(ablations(responses))
    print()
    print(real_suspects(responses, 10))
    print(f"\nworkspace {built - start:.0f} s, matrix and {len(rows)} detector runs "
          f"{time.perf_counter() - built:.0f} s")


if __name__ == "__main__":
    main()
