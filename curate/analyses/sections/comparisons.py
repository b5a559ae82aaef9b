"""Paired comparisons: prompt modes, formulations and models on the same items, and the
smallest differences each subset can detect."""
from __future__ import annotations

import pandas as pd

from curate.analyses import comparisons, render as text
from curate.analyses.sections._common import named, p_text

ORDER = 60
ABOUT = {"comparisons": "paired tests: modes (per formulation and model, exact McNemar -- one-sided a > b when a is "
                        "full, else two-sided --, paired bootstrap CI at 1 - alpha, Holm and Bonferroni across models, "
                        "intersection-union p for every model on directional claims), formulations (per mode and "
                        "model, two-sided, as modes), models (all pairs per mode and formulation, two-sided exact "
                        "McNemar, Holm and Bonferroni), detectable_difference (minimum detectable difference per "
                        "subset size, alpha, power 0.8, in the primary formulation; null where no difference is "
                        "detectable, and for mdd_paired and median_discordant also where model_pairs is 0: one model, "
                        "nothing to compare)"}


def compute(ctx) -> dict:
    """Detectable differences per subset: every item, each source, and what earlier sections
    added (the core at its threshold)."""
    options = {"n_resamples": ctx.n_resamples, "seed": ctx.seed, "alpha": ctx.alpha}
    first = "full" if "full" in ctx.mode_order else ctx.mode_order[0]
    return {"comparisons": {
        "normalization": ctx.normalization,
        "modes": comparisons.mode_comparisons(ctx.base, ctx.mode_order, **options),
        "formulations": comparisons.formulation_comparisons(ctx.base, ctx.base_forms, **options),
        "models": comparisons.model_comparisons(ctx.base, ctx.mode_order, alpha=ctx.alpha),
        "detectable_difference": comparisons.detectable_differences(ctx.primary_preds, ctx.subsets, first,
                                                                    alpha=ctx.alpha),
    }}


def _mdd_text(rows: list[dict]) -> pd.DataFrame:
    """The detectable-difference table: 'not detectable' where no difference is, 'n/a (one
    model)' for the paired figures where there is no pair of models to compare."""
    df = pd.DataFrame(rows)
    for col in ("mdd_independent", "mdd_paired", "median_discordant"):
        if col not in df:
            continue
        no_pair = df["model_pairs"] == 0 if "model_pairs" in df else pd.Series(False, index=df.index)
        df[col] = ["n/a (one model)" if col != "mdd_independent" and lone else
                   "not detectable" if v is None and col != "median_discordant" else v
                   for v, lone in zip(df[col], no_pair)]
    return df


def render(m: dict, number: int, out) -> list:
    s, cmp_ = m["settings"], m["comparisons"]
    blocks = [("h2", f"{number}. Paired comparisons"),
              ("p", "Same items, paired tests. Holm and Bonferroni adjust within each family. The "
                    "intersection-union p-value tests the claim for every model at once (its largest p).")]
    for fam in cmp_["modes"]["families"] + cmp_["formulations"]["families"]:
        axis = "mode" if "mode_a" in fam else "formulation"
        where = named(s, "", fam["formulation"]) if axis == "mode" else f", {fam['mode']} mode"
        blocks += [("h3", f"{fam[axis + '_a']} (a) vs {fam[axis + '_b']} (b){where}: {fam['claim']}? ({fam['test']})"),
                   ("table", p_text(pd.DataFrame(fam["rows"])))]
        if "iut_every_model_p" in fam:
            blocks.append(("p", f"Intersection-union test, '{fam['claim']}' for all {fam['iut_models']} models: "
                                f"p = {text.fmt(fam['iut_every_model_p'])}."))
    for fam in cmp_["models"]["families"]:
        rows = pd.DataFrame(fam["rows"])
        blocks += [("h3", named(s, f"Model pairs in {fam['mode']} mode", fam["formulation"]) + f" ({fam['test']})"),
                   ("p", f"{len(rows)} pairs; {int((rows['p_holm'] < s['alpha']).sum())} differ after Holm, "
                         f"{int((rows['p_bonferroni'] < s['alpha']).sum())} after Bonferroni."),
                   ("table", p_text(rows))]
    return blocks + [
        ("h3", "Minimum detectable difference"),
        ("p", "Smallest accuracy difference detectable with power 0.8 (two-sided) at each subset's size: "
              "between independent samples of that size at the subset's mean accuracy, and paired on the "
              "same items at the median share of items on which two models disagree in correctness "
              "(Connor 1987: null variance under the null). 'not detectable': no difference up to the "
              "largest possible one reaches that power at this size."),
        ("table", _mdd_text(cmp_["detectable_difference"]))]
