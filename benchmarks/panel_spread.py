"""Which combination ranks broken items better, by how alike the models' abilities are: the pooled
log-odds (``label_error_score``) or votes against the key (``votes_against_key``). The evidence
behind ``curate.validity.suspects.ALIKE_SPREAD``.

Panels of HellaSwag's study models (full prompt, 2% gold moves planted, seeds 0-2; as
benchmarks/detectors_gold_moves.py plants them), with probabilities and as answers only (each
model's argmax), from alike (the two 32B models, four ~1B models of accuracy 0.62-0.69) to spread
(all ten); and MMLU-Redux's dev split with its experts' labels (20 frontier models' answers, and
random panels of 5 and 10 of them). Printed per panel: its ability spread, AUROC and precision
(HellaSwag: at k = the number planted; MMLU-Redux: at 50) of both, and which one
``suspect_score`` uses there.

    .venv/bin/python benchmarks/panel_spread.py [--workspace WS]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from answers_evidence import answers_of, probability_part  # noqa: E402
from detectors_gold_moves import build_workspace, measure, plant_gold_moves, read_responses  # noqa: E402

SEEDS = (0, 1, 2)


def both(responses) -> tuple[np.ndarray, np.ndarray]:
    from curate.validity.suspects import suspects, votes_against_key
    table = suspects(responses).set_index("item_id").reindex(responses.item_ids)
    return table["label_error_score"].to_numpy(float), votes_against_key(responses)


def hellaswag_panels(responses) -> dict:
    """name -> model indices, from alike to spread."""
    acc = responses.correct.mean(axis=1)
    order = list(np.argsort(acc))
    return {"two 32B": order[-2:], "four ~1B at 0.62-0.69": [i for i in order if 0.60 < acc[i] < 0.70],
            "three weakest": order[:3], "three strongest": order[-3:],
            "five ~1B at 0.59-0.69": [i for i in order if 0.58 < acc[i] < 0.70], "all ten": order}


def hellaswag_lines(responses) -> list[str]:
    from curate.validity.responses import answers_matrix
    from curate.validity.suspects import ability_spread, choose_basis

    items = [{"item_id": i, "gold": int(g), "options": [""] * int(n)}
             for i, g, n in zip(responses.item_ids, responses.gold, responses.n_options)]
    lines = [f"{'HellaSwag panel (planted 2%)':<34} {'kind':<8} {'spread':>6}  {'log-odds AUROC / P@k':>22}  "
             f"{'votes AUROC / P@k':>19}  suspect_score uses"]
    for name, rows in hellaswag_panels(responses).items():
        names = [responses.models[i] for i in rows]
        for kind in ("probs", "answers"):
            panel = probability_part(responses, names) if kind == "probs" else answers_matrix(answers_of(responses, names), items)
            found = [[], []]
            for seed in SEEDS:
                moved, planted = plant_gold_moves(panel, 0.02, seed)
                for part, score in zip(found, both(moved)):
                    part.append(measure(score, planted))
            cells = [f"{np.mean([m['auroc'] for m in f]):.3f} / {np.mean([m['precision_at_k'] for m in f]):.3f}"
                     for f in found]
            lines.append(f"{name:<34} {kind:<8} {ability_spread(panel):>6.2f}  {cells[0]:>22}  {cells[1]:>19}  "
                         f"{choose_basis(panel)[0]}")
    return lines


def mmlu_lines() -> list[str]:
    from real_errors import load, metrics, responses_of
    from curate.validity.suspects import ability_spread, choose_basis

    items, answers, _ = load()
    labels = items.set_index("id")["error_type"]
    models = sorted(answers["model"].unique())
    rng = np.random.default_rng(2)
    panels = {"all 20": [models]} | {f"{k} of 20 (5 draws)": [list(rng.choice(models, k, replace=False))
                                                              for _ in range(5)] for k in (5, 10)}
    lines = [f"{'MMLU-Redux dev (experts labels)':<34} {'kind':<8} {'spread':>6}  {'log-odds AUROC / P@50':>22}  "
             f"{'votes AUROC / P@50':>19}  suspect_score uses"]
    for name, draws in panels.items():
        found, spread, uses = [[], []], [], set()
        for chosen in draws:
            panel = responses_of(items, answers, chosen)
            kinds = labels.reindex(panel.item_ids).to_numpy()
            for part, score in zip(found, both(panel)):
                part.append(metrics(score, kinds))
            spread.append(ability_spread(panel))
            uses.add(choose_basis(panel)[0])
        cells = [f"{np.mean([m['AUROC'] for m in f]):.3f} / {np.mean([m['P@50'] for m in f]):.3f}" for f in found]
        lines.append(f"{name:<34} {'answers':<8} {np.mean(spread):>6.2f}  {cells[0]:>22}  {cells[1]:>19}  "
                     f"{', '.join(sorted(uses))}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, help="A workspace with the study's scores imported.")
    args = parser.parse_args()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = args.workspace or build_workspace(Path(tmp) / "ws")
        responses = read_responses(workspace, "full")
    print("\n".join(hellaswag_lines(responses)))
    print()
    print("\n".join(mmlu_lines()))
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
