"""Annotation summary: how often each quality label is given, overall and by source (the
study's Table 1 layout), and how the flagged items overlap with model errors.

Which items each annotator flagged, and for what, is ``annotate.flags.item_flags`` (the review
browser shows the same flags). Rates are shares of the items the annotator answered validly in
that round (refusals: of all its records).
"""
from __future__ import annotations

import pandas as pd

from annotate.flags import ROUND2_FLAGS
from annotate.store import LABELS
from scoring.normalize import CONDITION, with_formulation


def label_rates(flags: pd.DataFrame) -> pd.DataFrame:
    """Per annotator x measure: n and rate overall and per source (wide, Table-1 style)."""
    if flags.empty:
        return pd.DataFrame(columns=["annotator", "measure", "subset", "n", "flagged", "rate"])
    rows = []
    order = {m: i for i, m in enumerate(["refused_round1", *LABELS, "refused_round2", *ROUND2_FLAGS])}
    for (annotator, measure), g in flags.groupby(["annotator", "measure"], sort=False):
        for subset, s in [("all", g)] + [(f"source={k}", v) for k, v in g.groupby("source", sort=True)]:
            rows.append({"annotator": annotator, "measure": measure, "subset": subset, "n": int(len(s)),
                         "flagged": int(s["flagged"].sum()), "rate": float(s["flagged"].mean())})
    out = pd.DataFrame(rows)
    out["_o"] = out["measure"].map(order)
    return out.sort_values(["annotator", "_o", "subset"], kind="stable").drop(columns="_o").reset_index(drop=True)


def error_overlap(flags: pd.DataFrame, preds: pd.DataFrame) -> pd.DataFrame:
    """Per annotator x measure x model x mode x formulation: error rate on flagged vs unflagged
    items and the share of the model's errors that fall on flagged items (predictions of one
    normalization). Items the annotator has no flag value for count in neither group."""
    rows = []
    wrong = with_formulation(preds).assign(wrong=~preds["correct"])[CONDITION + ["item_id", "wrong"]]
    conditions = sorted(wrong.groupby(CONDITION).groups)
    for (annotator, measure), g in flags.groupby(["annotator", "measure"], sort=False):
        flagged = g.set_index("item_id")["flagged"]
        p = wrong[wrong["item_id"].isin(flagged.index)]
        f = p["item_id"].map(flagged).astype(bool)
        # Counts per condition in one grouped pass (a pass per condition took minutes at 10k items).
        counts = pd.DataFrame({"flagged": f, "wrong_flagged": p["wrong"] & f, "wrong_unflagged": p["wrong"] & ~f,
                               "n": 1}).groupby([p[c] for c in CONDITION]).sum()
        counts = counts.reindex(pd.MultiIndex.from_tuples(conditions, names=CONDITION), fill_value=0)
        for (model, mode, formulation), c in counts.iterrows():
            n_flagged, n_unflagged = int(c["flagged"]), int(c["n"] - c["flagged"])
            wf, wu = int(c["wrong_flagged"]), int(c["wrong_unflagged"])
            rows.append({"annotator": annotator, "measure": measure, "model": model, "mode": mode,
                         "formulation": formulation, "n_flagged": n_flagged, "n_unflagged": n_unflagged,
                         "error_rate_flagged": wf / n_flagged if n_flagged else float("nan"),
                         "error_rate_unflagged": wu / n_unflagged if n_unflagged else float("nan"),
                         "errors_on_flagged_share": wf / (wf + wu) if wf + wu else float("nan")})
    return pd.DataFrame(rows)


def overlap_mean(overlap: pd.DataFrame) -> pd.DataFrame:
    """``error_overlap`` averaged over the models of each annotator x measure x mode x
    formulation (the report's summary), with how many models each mean is over."""
    if overlap.empty:
        return overlap
    keys = ["annotator", "measure", "mode", "formulation"]
    values = ["n_flagged", "error_rate_flagged", "error_rate_unflagged", "errors_on_flagged_share"]
    grouped = overlap.groupby(keys, sort=False)
    return grouped[values].mean().join(grouped["model"].nunique().rename("models")).reset_index()
