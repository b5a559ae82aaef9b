"""Membership signals of the items' own text (`curate text-scores`): loss, zlib, Min-K%,
Min-K%++ by model, their distributions, how far they agree, and the items they rank highest."""
from __future__ import annotations

import pandas as pd

from curate.analyses import plots
from curate.core.exports import write_records

ORDER = 95
SCORES = False  # text scores are stored apart from the option scores
ABOUT = {"contamination": "membership signals of each item's own text per text-scored model (present: false when none): "
                          "per model and signal n, mean and the 5/50/95% quantiles (the 95% one is the top-5% cut the "
                          "report and the review queue use); spearman: rank correlation of the signals across items "
                          "per model, all oriented so higher means more likely seen; top: the items with the highest "
                          "Min-K%++ (k=20) per model; scores_file lists every stored row"}
FILES = (r"text_scores\.csv", r"min_kpp_20_.*\.png")
TOP = 10
#: Each signal with the sign that makes higher mean "more likely seen in training".
ORIENTED = {"loss": -1, "zlib": -1, "min_k_10": 1, "min_k_20": 1, "min_kpp_10": 1, "min_kpp_20": 1}


def compute(ctx) -> dict:
    from scoring.text_store import text_scores

    frame = text_scores(ctx.ws)
    if frame.empty:
        return {"contamination": {"present": False}}
    write_records(frame.to_dict("records"), ctx.out / "text_scores.csv")
    signals = list(ORIENTED)
    summary, spearman, top = [], [], []
    for model, g in frame.groupby("model", sort=True):
        for s in signals:
            q = g[s].quantile([0.05, 0.5, 0.95])
            summary.append({"model": model, "signal": s, "n": int(g[s].notna().sum()), "mean": g[s].mean(),
                            "q05": q[0.05], "q50": q[0.5], "q95": q[0.95]})
        oriented = g[signals].mul(pd.Series(ORIENTED))
        corr = oriented.corr(method="spearman")
        spearman += [{"model": model, "a": a, "b": b, "rho": corr.loc[a, b]}
                     for i, a in enumerate(signals) for b in signals[i + 1:]]
        best = g.nlargest(TOP, "min_kpp_20")
        top += [{"model": model, "item_id": r.item_id, "min_kpp_20": r.min_kpp_20, "loss": r.loss} for r in best.itertuples()]
    plot = plots.signal_histogram(frame, "min_kpp_20", "Min-K%++ (k=20) of the items' own text",
                                  ctx.out / "min_kpp_20_hist.png")
    ctx.plots["contamination"] = plot.name
    return {"contamination": {"present": True, "models": sorted(frame["model"].unique()), "summary": summary, "spearman": spearman,
                              "top": top, "scores_file": "text_scores.csv"}}


def render(m: dict, number: int, out) -> list:
    c = m.get("contamination")
    if not c or not c.get("present"):
        return []
    rho = pd.DataFrame(c["spearman"])
    pair = rho[(rho.a == "loss") & (rho.b == "min_kpp_20")]
    agree = ", ".join(f"{r.model}: {r.rho:.2f}" for r in pair.itertuples())
    text = ("Membership signals of each item's own text (question and gold answer), per model: mean loss and the zlib "
            "ratio (lower: more likely seen), Min-K% and Min-K%++ (higher: more likely seen; k = 10 and 20% of the "
            "text's tokens). These are suspicions, not proof: per-item membership detectors disagree often (their "
            f"reported AUROCs are 0.6-0.8), and they disagree here too (Spearman correlation of loss and Min-K%++ "
            f"across items, both oriented: {agree}). The 95% quantile is the top-5% cut the `min_k_pp` review queue "
            f"uses; every row is in `{c['scores_file']}`.")
    return [("h2", f"{number}. Contamination signals"), ("p", text), ("table", pd.DataFrame(c["summary"])),
            ("img", out / m["plots"]["contamination"], "Min-K%++ histogram"),
            ("p", f"Items with the highest Min-K%++ (k=20), {len(c['top']) // max(1, len(c['models']))} per model:"),
            ("table", pd.DataFrame(c["top"]))]
