"""Agreement between prompt modes, and between formulations, of each model's predictions."""
from __future__ import annotations

import pandas as pd

from curate.analyses import agreement
from curate.analyses.sections._common import named, records

ORDER = 20
ABOUT = {"agreement": "rows model x formulation x (mode_a, mode_b) on the items both modes scored: counts and shares "
                      "of both_correct, same_wrong, only_a_correct, only_b_correct, different_wrong; agreement "
                      "(both_correct + same_wrong); Cohen's kappa of the two prediction vectors; `formulations`: the "
                      "same per model x mode x (formulation_a, formulation_b)"}
COLUMNS = ["model", "n", "both_correct_share", "same_wrong_share", "only_a_correct_share", "only_b_correct_share",
           "different_wrong_share", "agreement", "kappa"]


def compute(ctx) -> dict:
    n_options = max(len(it["options"]) for it in ctx.items)
    return {"agreement": {"normalization": ctx.normalization,
                          "rows": records(agreement.agreement_table(ctx.base, ctx.mode_order, n_options)),
                          "formulations": records(agreement.formulation_table(ctx.base, ctx.base_forms, n_options))}}


def render(m: dict, number: int, out) -> list:
    ag = pd.DataFrame(m["agreement"]["rows"])
    blocks = [("h2", f"{number}. Agreement between prompt modes"),
              ("p", "Shares of the items both modes scored. `same_wrong`: both pick the same wrong option; "
                    "`different_wrong`: both wrong, different options. agreement = both_correct + same_wrong.")]
    if not ag.empty:
        for (f, a, b), g in ag.groupby(["formulation", "mode_a", "mode_b"], sort=False):
            blocks += [("h3", named(m["settings"], f"{a} (a) vs {b} (b)", f)), ("table", g[COLUMNS])]
    agf = pd.DataFrame(m["agreement"]["formulations"])
    if not agf.empty:
        blocks.append(("p", "Between formulations: the same model and prompt mode, options scored as continuations "
                            "(cloze) and as letters after a lettered list (letters)."))
        for (mode, a, b), g in agf.groupby(["mode", "formulation_a", "formulation_b"], sort=False):
            blocks += [("h3", f"{a} (a) vs {b} (b), {mode} mode"), ("table", g[COLUMNS])]
    return blocks
