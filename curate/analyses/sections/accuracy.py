"""Accuracy per model, mode, formulation and normalization, with Wilson intervals, and by source."""
from __future__ import annotations

import numpy as np
import pandas as pd

from curate.analyses import accuracy, plots, stats
from curate.analyses.render import Lit
from curate.analyses.sections._common import records
from curate.analyses.sections._findings import Sentence, Table

ORDER = 10
ABOUT = {"accuracy": "rows model x mode x formulation x normalization x subset: n, correct, accuracy, Wilson "
                     "interval at the confidence 1 - alpha (settings; `confidence`)"}
FILES = (r"accuracy\.png",)


def compute(ctx) -> dict:
    acc = accuracy.accuracy_table(ctx.preds_all, ctx.alpha)
    chance = float(np.mean([1 / len(it["options"]) for it in ctx.items]))
    ctx.plots["accuracy"] = plots.accuracy_bars(acc, ctx.normalization, ctx.mode_order, ctx.base_forms,
                                                ctx.out / "accuracy.png", chance, stats.level(ctx.alpha)).name
    return {"accuracy": {"interval": "wilson", "confidence": 1 - ctx.alpha, "rows": records(acc)}}


def render(m: dict, number: int, out) -> list:
    s = m["settings"]
    acc = pd.DataFrame(m["accuracy"]["rows"])
    blocks = [("h2", f"{number}. Accuracy"), ("img", out / m["plots"]["accuracy"], "Accuracy per model and mode")]
    main = acc[acc["subset"] == "all"].drop(columns=["subset", "interval"])
    blocks += [("p", "All items each model was scored on, every available normalization."), ("table", main)]
    wide = acc[acc["normalization"] == s["normalization"]].pivot_table(
        index=["model", "mode", "formulation"], columns="subset", values="accuracy").reset_index()
    return blocks + [("p", f"By source (`{s['normalization']}`)."), ("table", wide)]


def findings(m: dict) -> list:
    """Accuracy per model and mode with intervals (primary normalization and formulation, all
    items), and a sentence on the range per mode."""
    s = m["settings"]
    acc = pd.DataFrame(m["accuracy"]["rows"])
    acc = acc[(acc["subset"] == "all") & (acc["normalization"] == s["normalization"])
              & (acc["formulation"] == s["primary_formulation"])]
    if acc.empty:
        return []
    acc = acc.assign(cell=[f"{100 * r.accuracy:.1f} ({100 * r.ci_low:.1f}–{100 * r.ci_high:.1f})"
                           for r in acc.itertuples()])
    modes = [mode for mode in s["modes"] if mode in set(acc["mode"])]
    table = acc.pivot(index="model", columns="mode", values="cell")[modes].fillna("").reset_index()
    table.columns.name = None
    parts = ["Accuracy ranges" if acc["model"].nunique() > 1 else "Accuracy is"]
    for i, mode in enumerate(modes):
        parts += [";" if i else "", *_range(mode, acc[acc["mode"] == mode].sort_values("accuracy"))]
    level = f"{100 * m['accuracy']['confidence']:g}%"
    return [Sentence(parts + ["."]),
            Table(f"Accuracy, % ({level} Wilson interval), `{s['normalization']}`, {s['primary_formulation']}:", table)]


def _range(mode: str, g: pd.DataFrame) -> list:
    """" from X% (the weakest model) to Y% (the strongest) in MODE mode", or one model's accuracy."""
    lo, hi = g.iloc[0], g.iloc[-1]
    if len(g) == 1:
        return [f" {100 * hi.accuracy:.1f}% (", Lit(hi.model), f") in {mode} mode"]
    return [f" from {100 * lo.accuracy:.1f}% (", Lit(lo.model), f") to {100 * hi.accuracy:.1f}% (", Lit(hi.model),
            f") in {mode} mode"]
