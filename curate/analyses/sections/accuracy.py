"""Accuracy per model, mode, formulation and normalization, with Wilson intervals, and by source."""
from __future__ import annotations

import numpy as np
import pandas as pd

from curate.analyses import accuracy, plots, stats
from curate.analyses.sections._common import records

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
