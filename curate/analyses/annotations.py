"""Annotation summary: how often each quality label is given, overall and by source (the
study's Table 1 layout), and how the flagged items overlap with model errors.

Round 1 gives labels; round 2 gives derived flags: ``wrong_gold`` (the annotator's best
option is not the gold), ``multiple_correct`` (some other option is equally good),
``all_implausible``, ``best_is_worst`` (one option named both best and worst: an answer that
contradicts itself, kept as given and counted here) and, from any round, ``refused``. Rates are shares of the items the
annotator answered validly in that round (refusals: of all its records).
"""
from __future__ import annotations

import pandas as pd

from annotate.store import LABELS
from scoring.normalize import CONDITION, with_formulation

ROUND2_FLAGS = ("wrong_gold", "multiple_correct", "all_implausible", "best_is_worst")


def item_flags(round1: pd.DataFrame, round2: pd.DataFrame, gold: pd.Series) -> pd.DataFrame:
    """One row per (annotator, item, measure) that is flagged, plus the denominators: columns
    annotator, measure, item_id, source, flagged (bool), over the items the measure applies to."""
    rows = []
    for frame, rnd in ((round1, 1), (round2, 2)):
        for rec in frame.itertuples(index=False):
            base = {"annotator": rec.annotator, "item_id": rec.item_id, "source": rec.source or "(none)"}
            rows.append(base | {"measure": f"refused_round{rnd}", "flagged": rec.status == "refused"})
            if rec.status != "valid":
                continue
            if rnd == 1:
                labels = set(rec.result["labels"])
                rows.extend(base | {"measure": label, "flagged": label in labels} for label in LABELS)
            else:
                r = rec.result
                rows.append(base | {"measure": "wrong_gold", "flagged": r["best"] != gold[rec.item_id]})
                rows.append(base | {"measure": "multiple_correct", "flagged": bool(r["equally_good"])})
                rows.append(base | {"measure": "all_implausible", "flagged": bool(r["all_implausible"])})
                rows.append(base | {"measure": "best_is_worst", "flagged": r["best"] == r["worst"]})
    return pd.DataFrame(rows, columns=["annotator", "item_id", "source", "measure", "flagged"])


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
