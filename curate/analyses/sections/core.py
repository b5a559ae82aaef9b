"""The items the models answer correctly in the core mode (the zero-prompt core by default)."""
from __future__ import annotations

import pandas as pd

from curate.analyses import core, plots
from curate.validity.responses import covering
from curate.analyses.sections._common import records
from curate.analyses.sections._findings import Flag, Sentence, percent
from curate.core.exports import write_records

ORDER = 30
ABOUT = {"core": "items the models answer correctly in the core mode (absent without scores in that mode): curve "
                 "(k, items, share) for k = 1..N models over the items every model scored (n_items; n_incomplete: the "
                 "others, left out; models: N, model_names; set_apart: models scored on a fraction of the items, "
                 "curate.validity.responses.covering, with why); threshold and n_at_threshold; items_file lists every item "
                 "with n_correct and the models that got it right"}
FILES = (r"core_items\.csv", r"core_curve\.png")


def compute(ctx) -> dict:
    """Core curve, the per-item counts file, and the ids at the threshold as a subset for the
    detectable differences (none when the threshold exceeds the number of models). Items some
    model has no score for in the mode are left out of the core and counted (``n_incomplete``)."""
    mode, threshold = ctx.core_mode, ctx.core_threshold
    if mode not in ctx.mode_order:
        return {}
    preds = ctx.primary_preds[ctx.primary_preds["mode"] == mode]
    kept, apart = covering(preds.groupby("model")["item_id"].nunique().to_dict())
    preds = preds[preds["model"].isin(kept)]
    counts = core.correct_counts(preds, mode)
    n_models = len(kept)
    curve = core.core_curve(counts, n_models)
    write_records(counts.to_dict("records"), ctx.out / "core_items.csv")
    result = {"mode": mode, "normalization": ctx.normalization, "models": n_models, "model_names": kept,
              "set_apart": [{"model": m, "why": why} for m, why in apart.items()], "n_items": len(counts),
              "n_incomplete": len(ctx.items) - len(counts), "curve": records(curve), "items_file": "core_items.csv"}
    if threshold is not None and threshold <= n_models:
        ids = core.core_ids(counts, threshold)
        result.update(threshold=threshold, n_at_threshold=len(ids))
        ctx.subsets[f"{mode}-core k>={threshold}"] = ids
    ctx.plots["core"] = plots.core_curve(curve, mode, ctx.out / "core_curve.png").name
    return {"core": result}


def render(m: dict, number: int, out) -> list:
    s = m["settings"]
    if "core" not in m:
        if s["core_mode"] == "none":  # `--core-mode none` asks for no core section
            return []
        return [("h2", f"{number}. {s['core_mode'].capitalize()}-prompt core"),
                ("p", f"No model has {s['core_mode']}-mode scores in this analysis, so there is no core.")]
    c = m["core"]
    curve = pd.DataFrame(c["curve"]).assign(percent=lambda d: (100 * d["share"]).round(1))
    text = (f"Items that at least k of the {c['models']} models answer correctly in {c['mode']} mode "
            f"({c['n_items']} items). The ids and counts per item are in `{c['items_file']}`.")
    if c.get("n_incomplete"):
        text += f" {c['n_incomplete']} items are left out: some model has no {c['mode']}-mode score for them."
    if c.get("set_apart"):
        text += " Set apart, so as not to shrink the items: " + "; ".join(
            f"{a['model']} ({a['why']})" for a in c["set_apart"]) + "."
    if "threshold" in c:
        text += f" At k >= {c['threshold']}: {c['n_at_threshold']} items."
    return [("h2", f"{number}. {c['mode'].capitalize()}-prompt core"), ("p", text), ("table", curve),
            ("img", out / m["plots"]["core"], "Core curve")]


def findings(m: dict) -> list:
    """The items at the threshold: answered right by k models in the core mode (in zero mode,
    without the question)."""
    c = m.get("core")
    if not c or "threshold" not in c:
        return []
    how = " (without the question)" if c["mode"] == "zero" else ""
    apart = c.get("set_apart") or []
    besides = f"; {len(apart)} model{'s' * (len(apart) != 1)} scored on fewer items set apart" if apart else ""
    return [Flag(f"{c['mode']}-prompt core", c["n_at_threshold"], c["n_items"],
                 f"right by at least {c['threshold']} of {c['models']} models in {c['mode']} mode{how}{besides}"),
            Sentence(f"{c['n_at_threshold']} of {c['n_items']} items ({percent(c['n_at_threshold'], c['n_items'])}) "
                     f"are answered right by at least {c['threshold']} of the {c['models']} models in {c['mode']} "
                     f"mode{how}" + (" (" + "; ".join(f"{a['model']} set apart: {a['why']}" for a in apart) + ")"
                                     if apart else "") + ".")]
