"""Shot counts: accuracy per K, paired tests between shot counts, agreement and flipped items
(present only when the workspace holds scores of more than one shot count)."""
from __future__ import annotations

import pandas as pd

from curate.analyses import fewshot
from curate.analyses.sections._common import p_text

ORDER = 65
ABOUT = {"fewshot": "shot counts (present: false with one): accuracy per model, mode, formulation and shot count "
                    "with Wilson intervals (by_shots); paired comparisons of each pair of shot counts per mode and "
                    "formulation (exact McNemar, two-sided, paired bootstrap CI at 1 - alpha, Holm and Bonferroni "
                    "across models); agreement of predictions (same-prediction share, Cohen's kappa) and the items "
                    "whose correctness flips (wrong_to_right, right_to_wrong, flipped_items), under the primary "
                    "normalization"}
FLIPS_SHOWN = 20  # flipped items listed in the report per model and pair (metrics.json holds all)


def compute(ctx) -> dict:
    scores = ctx.fewshot_scores
    if scores is None or "fewshot" not in scores or scores["fewshot"].nunique() < 2:
        return {"fewshot": {"present": False}}
    preds = fewshot.shot_predictions(scores, ctx.gold, ctx.normalizations)
    return {"fewshot": {
        "present": True, "normalization": ctx.normalization,
        "shot_counts": sorted(map(int, scores["fewshot"].unique())),
        "by_shots": fewshot.accuracy_by_shots(preds, ctx.alpha),
        "comparisons": fewshot.shot_comparisons(preds, n_resamples=ctx.n_resamples, seed=ctx.seed, alpha=ctx.alpha),
        "agreement": fewshot.shot_agreement(preds)}}


def render(m: dict, number: int, out) -> list:
    f = m.get("fewshot")
    if not f or not f.get("present"):
        return []
    shots = ", ".join(map(str, f["shot_counts"]))
    blocks = [("h2", f"{number}. Shot counts"),
              ("p", f"Each item scored after 0 or K worked examples built as lm-eval 0.4.13 builds them (shot counts "
                    f"{shots}; `{f['normalization']}` normalization). Every other section reads the fewest shots."),
              ("table", pd.DataFrame(f["by_shots"]))]
    for fam in f["comparisons"]:
        blocks += [("h3", f"{fam['fewshot_a']}-shot (a) vs {fam['fewshot_b']}-shot (b), {fam['mode']} mode, "
                          f"{fam['formulation']} ({fam['test']})"),
                   ("table", p_text(pd.DataFrame(fam["rows"])))]
    agreement = pd.DataFrame(f["agreement"])
    if not agreement.empty:
        blocks += [("h3", "Agreement between shot counts and flipped items"),
                   ("table", agreement.drop(columns="flipped_items"))]
        for row in f["agreement"]:
            if row["flipped_items"]:
                shown = ", ".join(f"`{x['item_id']}` ({x['to']})" for x in row["flipped_items"][:FLIPS_SHOWN])
                more = len(row["flipped_items"]) - FLIPS_SHOWN
                blocks.append(("p", f"{row['model']}, {row['mode']}, {row['formulation']}, {row['fewshot_a']} -> "
                                    f"{row['fewshot_b']} shots: {shown}" + (f" and {more} more" if more > 0 else "")))
    return blocks
