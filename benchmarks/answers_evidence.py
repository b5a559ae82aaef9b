"""Answers without probabilities as item-validity evidence (issue 40): how the label-error ranking
finds planted gold moves when some or all models only answer.

The planting and the metrics are benchmarks/detectors_gold_moves.py's (2% of HellaSwag's
validation items get their gold moved to another option, seeds 0-4; AUROC and precision@k, k =
the number planted). The models are the study's ten, full prompt; a model's answer-only version
is its argmax under the full prompt (what it would have answered), joined to the response matrix
as a model that only answers (``curate.validity.responses.join_answers`` / ``answers_matrix``,
source ``table``). Printed side by side, mean and min over the seeds:

- the ten, and the eight ~1B models, with probabilities;
- simple ability-weighted votes of the ten answers (the baseline to beat);
- (a) the ten as answers only, (b) the eight with probabilities plus the two 32B models as answers
  only, (c) probability models plus answers that add little (the same models' answers again, or
  weak models' answers), which must not lower AUROC by more than 0.005;
- ablations: the preference discrimination's weight, and a full confusion matrix per answer-only
  model (Dawid-Skene's channel, one step against the key) instead of its accuracy alone.

    nice -n 10 .venv/bin/python benchmarks/answers_evidence.py [--workspace WS] [--seeds 0,1,2,3,4]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from detectors_gold_moves import build_workspace, measure, plant_gold_moves, read_responses  # noqa: E402

RATE = 0.02
STRONG = ("OLMo-2-0325-32B-Instruct", "qwen-2.5-32b-instruct")


def probability_part(responses, models):
    """The response matrix of ``models`` alone (rows of the full one)."""
    rows = [responses.models.index(m) for m in models]
    return dataclasses.replace(responses, models=list(models), logprobs=responses.logprobs[rows],
                               probs=responses.probs[rows], correct=responses.correct[rows],
                               temperature=responses.temperature[rows])


def answers_of(responses, models, suffix: str = "") -> pd.DataFrame:
    """Each model's argmax as its one answer per item (run ``argmax``, source ``table``)."""
    pred = responses.pred
    frames = [pd.DataFrame({"model": m + suffix, "item_id": responses.item_ids,
                            "choice": pred[responses.models.index(m)], "run": "argmax", "source": "table"})
              for m in models]
    return pd.concat(frames, ignore_index=True)


def configurations(responses) -> dict:
    """name -> (the response matrix, ``"votes"`` or ``"suspects"``); goal lines name the issue's goals."""
    from curate.validity.responses import answers_matrix, join_answers

    ten = list(responses.models)
    small = [m for m in ten if m not in STRONG]
    items = [{"item_id": i, "gold": int(g), "options": [""] * int(n)}
             for i, g, n in zip(responses.item_ids, responses.gold, responses.n_options)]
    only_answers = answers_matrix(answers_of(responses, ten), items)
    eight = probability_part(responses, small)
    return {
        "ten with probabilities": (responses, "suspects"),
        "eight ~1B with probabilities": (eight, "suspects"),
        "votes: ten as answers, ability-weighted": (only_answers, "votes"),
        "(a) ten as answers only": (only_answers, "suspects"),
        "(b) eight with probabilities + two 32B as answers": (join_answers(eight, answers_of(responses, STRONG)),
                                                             "suspects"),
        "(c) ten with probabilities + their answers again": (join_answers(responses, answers_of(responses, ten, " #a")),
                                                            "suspects"),
        "(c) ten with probabilities + eight ~1B answers": (join_answers(responses, answers_of(responses, small, " #a")),
                                                          "suspects"),
        "(c) eight with probabilities + their answers": (join_answers(eight, answers_of(responses, small, " #a")),
                                                        "suspects"),
    }


#: Which configuration each (c) line must not fall below by more than 0.005 AUROC.
NO_WORSE_THAN = {"(c) ten with probabilities + their answers again": "ten with probabilities",
                 "(c) ten with probabilities + eight ~1B answers": "ten with probabilities",
                 "(c) eight with probabilities + their answers": "eight ~1B with probabilities",
                 "(b) eight with probabilities + two 32B as answers": "eight ~1B with probabilities"}
GOALS = {"(a) ten as answers only": (0.93, 0.15), "(b) eight with probabilities + two 32B as answers": (0.95, 0.45)}


def vote_scores(responses) -> np.ndarray:
    """Simple ability-weighted votes: max over non-gold k of the weighted share of models choosing
    k minus the share choosing the gold (weights: ``suspects.ability_weights``)."""
    from curate.validity.suspects import ability_weights

    w = ability_weights(responses)
    cols = np.arange(len(responses.gold))
    chose = np.zeros(responses.probs.shape)
    pred = responses.pred
    for m in range(len(w)):
        ok = pred[m] >= 0
        chose[m, cols[ok], pred[m, ok]] = 1
    total = np.tensordot(w / w.sum(), chose, axes=1)
    diff = total - total[cols, responses.gold][:, None]
    diff[cols, responses.gold] = -np.inf
    diff[np.arange(diff.shape[1])[None, :] >= responses.n_options[:, None]] = -np.inf
    return diff.max(axis=1)


def label_error_scores(responses) -> np.ndarray:
    """The default ranking (suspect_score): on these panels, of spread ability, the label-error score itself."""
    from curate.validity.suspects import suspects
    return suspects(responses).set_index("item_id")["suspect_score"].reindex(responses.item_ids).to_numpy(float)


def confusion_channel(responses):
    """The answer-only rows' probabilities from a full confusion matrix per model, P(choice c |
    key t), estimated against the key with one added count per cell (Dawid-Skene's channel, one
    step), instead of accuracy alone."""
    answers = responses.answer_only
    runs = responses.runs[answers]
    width, cols = runs.shape[2], np.arange(len(responses.gold))
    key = np.zeros((len(cols), width))
    key[cols, responses.gold] = 1
    counts = np.einsum("it,mic->mtc", key, runs) + 1.0
    confusion = counts / counts.sum(axis=2, keepdims=True)
    share = runs / np.maximum(runs.sum(axis=2, keepdims=True), 1)
    likelihood = np.einsum("mtc,mic->mit", confusion, share)   # P(its answers | true option t)
    past = np.arange(width)[None, None, :] >= responses.n_options[None, :, None]
    likelihood = np.where(past, 0.0, likelihood)
    probs = responses.probs.copy()
    probs[answers] = np.where(past | (runs.sum(axis=2, keepdims=True) == 0), np.nan,
                              likelihood / likelihood.sum(axis=2, keepdims=True))
    return dataclasses.replace(responses, probs=probs)


def run(configs: dict, seeds, variant=None) -> dict:
    """name -> list of measures per seed; ``variant(moved) -> moved`` changes the matrix after planting."""
    out = {}
    for name, (responses, detector) in configs.items():
        rows = []
        for seed in seeds:
            moved, planted = plant_gold_moves(responses, RATE, seed)
            if variant is not None:
                moved = variant(moved)
            score = vote_scores(moved) if detector == "votes" else label_error_scores(moved)
            rows.append(measure(score, planted))
        out[name] = rows
    return out


def table(results: dict, title: str) -> list[str]:
    lines = [title, f"  {'configuration':<52} {'AUROC':>7} {'(min)':>7} {'prec@k':>7} {'(min)':>7}  goal"]
    auroc = {name: float(np.mean([r["auroc"] for r in rows])) for name, rows in results.items()}
    for name, rows in results.items():
        a, p = [r["auroc"] for r in rows], [r["precision_at_k"] for r in rows]
        goal = ""
        if name in GOALS:
            ga, gp = GOALS[name]
            goal = f">= {ga} / {gp}: {'met' if np.mean(a) >= ga and np.mean(p) >= gp else 'NOT met'}"
        if name in NO_WORSE_THAN and NO_WORSE_THAN[name] in auroc:
            delta = auroc[name] - auroc[NO_WORSE_THAN[name]]
            goal += ("; " if goal else "") + f"AUROC {delta:+.4f} vs {NO_WORSE_THAN[name]}" + (
                "" if delta >= -0.005 else " (lower by more than 0.005)")
        lines.append(f"  {name:<52} {np.mean(a):>7.4f} {min(a):>7.4f} {np.mean(p):>7.3f} {min(p):>7.3f}  {goal}")
    return lines


def main() -> None:
    from curate.validity import suspects as module

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, help="A workspace with the study's scores imported.")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = args.workspace or build_workspace(Path(tmp) / "ws")
        responses = read_responses(workspace, "full")
    configs = configurations(responses)
    k = round(RATE * len(responses.gold))
    print(f"{len(responses.gold)} HellaSwag items, full prompt, {responses.normalization}; {RATE:.0%} gold moves "
          f"(k = {k}), seeds {seeds}; mean and min over the seeds\n")
    print("\n".join(table(run(configs, seeds), "the default ranking, suspect_score (curate.validity.suspects; "
                                               "on these panels the label-error score):")))
    print()
    ablation = {n: configs[n] for n in ("ten with probabilities", "eight ~1B with probabilities",
                                        "(a) ten as answers only",
                                        "(b) eight with probabilities + two 32B as answers")}
    weight = module.PREFERENCE_WEIGHT
    for w in (0.0, 2.0):
        module.PREFERENCE_WEIGHT = w
        print("\n".join(table(run(ablation, seeds), f"ablation: preference discrimination weight {w:g} "
                                                    f"(chosen: {weight:g})")))
        print()
    module.PREFERENCE_WEIGHT = weight
    channel = {n: ablation[n] for n in ("(a) ten as answers only", "(b) eight with probabilities + two 32B as answers")}
    print("\n".join(table(run(channel, seeds, confusion_channel),
                          "ablation: answer-only models through a full confusion matrix (Dawid-Skene channel) "
                          "instead of their accuracy")))
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
