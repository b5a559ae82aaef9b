"""Position audit: where the gold option sits, and accuracy over rotated option orders."""
from __future__ import annotations

import pandas as pd

from curate.analyses import position
from curate.analyses.sections._common import p_value_text, records

ORDER = 70
ABOUT = {"position": "gold: per subset x option count, the gold option's position counts and shares, chi-square test "
                     "against uniform (p and log10_p), skewed = p < alpha; rotations (present with letters+rK scores): "
                     "per model x mode, accuracy in the original order and over every cyclic rotation of the options, "
                     "share right in every / no rotation, the shares of letters picked and their chi-square test "
                     "against uniform"}


def compute(ctx) -> dict:
    sizes = pd.Series({it["item_id"]: len(it["options"]) for it in ctx.items})
    return {"position": {"alpha": ctx.alpha, "gold": records(position.gold_positions(ctx.items, ctx.alpha)),
                         "rotations": records(position.rotation_table(ctx.preds, sizes, ctx.alpha))}}


def render(m: dict, number: int, out) -> list:
    pos = m["position"]
    gold = pd.DataFrame(pos["gold"])
    blocks = [("h2", f"{number}. Position audit"),
              ("p", "Where the gold option sits (A = first), per subset and option count, with a chi-square test "
                    f"against an even spread; skewed = p < {pos['alpha']}.")]
    skewed = gold[gold["skewed"]]
    if skewed.empty:
        blocks.append(("p", "No subset's gold positions differ from an even spread."))
    else:
        lines = [f"{r['subset']} ({r['n_options']} options, {r['n']} items): gold at {r['most_common']} in "
                 f"{100 * r['most_common_share']:.1f}% of items, p {'' if r['p'] == 0 else '= '}"
                 f"{p_value_text(r['p'], r['log10_p'])}"
                 for r in skewed.to_dict("records")]
        blocks.append(("p", "**Gold-position skew** in " + "; ".join(lines[:10])
                            + (f"; and {len(lines) - 10} more subsets" if len(lines) > 10 else "") + "."))
    table = gold.assign(p=[p_value_text(p, lp) for p, lp in zip(gold["p"], gold["log10_p"])])
    blocks.append(("table", table[["subset", "n_options", "n", "shares", "most_common", "most_common_share", "chi2",
                                   "p", "skewed"]]))
    rot = pd.DataFrame(pos["rotations"])
    if rot.empty:
        blocks.append(("p", "No rotated-order scores: `curate score ... --formulations letters+rotations` lists the "
                            "options in every cyclic order to measure accuracy independent of position."))
        return blocks
    rot = rot.assign(p_picked_uniform=[p_value_text(p, lp) if p == p else "" for p, lp in
                                       zip(rot["p_picked_uniform"], rot["picked_log10_p"])])
    blocks += [("p", "Accuracy with the options in every cyclic order (letters formulation), on the items scored in "
                     "every rotation: in the original order, averaged over rotations, and the share of items right "
                     "in every rotation and in none. Every letter holds the gold equally often over the rotations, so "
                     "picked letters far from an even spread show the model's own position bias."),
               ("table", rot.drop(columns=["picked_log10_p"]))]
    return blocks
