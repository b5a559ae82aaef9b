"""Accuracy per model, mode, formulation and normalization, with Wilson intervals, and by source."""
from __future__ import annotations

import numpy as np
import pandas as pd

from curate.analyses import accuracy, plots, stats
from curate.analyses.render import Lit
from curate.validity.responses import COVERAGE
from curate.analyses.sections._common import records
from curate.analyses.sections._findings import Sentence, Table

ORDER = 10
ABOUT = {"accuracy": "rows model x mode x formulation x normalization x subset: n, correct, accuracy, Wilson "
                     "interval at the confidence 1 - alpha (settings; `confidence`)"}
FILES = (r"accuracy\.png",)


def compute(ctx) -> dict:
    acc = accuracy.accuracy_table(ctx.preds_all, ctx.alpha)
    chance = float(np.mean([1 / len(it["options"]) for it in ctx.items]))
    ctx.plots["accuracy"] = plots.accuracy_bars(accuracy.own_rows(acc, ctx.normalizations), ctx.normalization,
                                                ctx.mode_order, ctx.base_forms, ctx.out / "accuracy.png", chance,
                                                stats.level(ctx.alpha)).name
    return {"accuracy": {"interval": "wilson", "confidence": 1 - ctx.alpha, "rows": records(acc)}}


def own(m: dict, acc: pd.DataFrame) -> pd.DataFrame:
    """The rows of each model's own normalization (the primary one, or its own where it lacks it)."""
    s = m["settings"]
    return acc[acc["normalization"] == acc["model"].map(lambda model: (s.get("own_normalizations") or {}).get(
        model, s["normalization"]))]


def render(m: dict, number: int, out) -> list:
    acc = pd.DataFrame(m["accuracy"]["rows"])
    blocks = [("h2", f"{number}. Accuracy"), ("img", out / m["plots"]["accuracy"], "Accuracy per model and mode")]
    main = acc[acc["subset"] == "all"].drop(columns=["subset", "interval"])
    blocks += [("p", "All items each model was scored on (n), every available normalization."), ("table", main)]
    wide = own(m, acc).pivot_table(index=["model", "mode", "formulation", "normalization"], columns="subset",
                                   values="accuracy").reset_index()
    return blocks + [("p", f"By source (`{m['settings']['normalization']}`, or the model's own where it lacks it)."),
                     ("table", wide)]


def findings(m: dict) -> list:
    """Accuracy per model and mode with intervals and the items each rests on (primary
    normalization, or the model's own; primary formulation; all items the model was scored on),
    and a sentence on the range per mode over the models that cover the items; a model scored on
    a fraction of them (``COVERAGE``) is listed apart, below the others."""
    s = m["settings"]
    acc = pd.DataFrame(m["accuracy"]["rows"])
    acc = own(m, acc[(acc["subset"] == "all") & (acc["formulation"] == s["primary_formulation"])])
    if acc.empty:
        return []
    acc = acc.assign(cell=[f"{100 * r.accuracy:.1f} ({100 * r.ci_low:.1f}–{100 * r.ci_high:.1f})"
                           for r in acc.itertuples()])
    modes = [mode for mode in s["modes"] if mode in set(acc["mode"])]
    items = acc.groupby("model")["n"].max()
    covering = set(items.index[items >= COVERAGE * items.max()])
    table = acc.pivot(index="model", columns="mode", values="cell")[modes].fillna("")
    table.insert(0, "items", items.loc[table.index].astype(int))
    table = table.loc[sorted(table.index, key=lambda model: (model not in covering, model))].reset_index()
    own_norms = s.get("own_normalizations") or {}
    table["model"] = [f"{model} ({own_norms[model]})" if model in own_norms else model for model in table["model"]]
    table.columns.name = None
    main = acc[acc["model"].isin(covering)]
    parts = ["Accuracy ranges" if main["model"].nunique() > 1 else "Accuracy is"]
    for i, mode in enumerate(modes):
        parts += [";" if i else "", *_range(mode, main[main["mode"] == mode].sort_values("accuracy"))]
    parts.append(".")
    thin = sorted(set(acc["model"]) - covering)
    if thin:
        parts += [" Read apart, scored on a fraction of the items: ",
                  *_listed([(model, f"{int(items[model])} of {int(items.max())}") for model in thin]), "."]
    level = f"{100 * m['accuracy']['confidence']:g}%"
    norm = f"`{s['normalization']}`" + (" (a model's own, named, where it has none)" if own_norms else "")
    return [Sentence(parts),
            Table(f"Accuracy, % ({level} Wilson interval), {norm}, {s['primary_formulation']}; items each model was "
                  "scored on:", table)]


def _listed(pairs: list[tuple[str, str]]) -> list:
    out = []
    for i, (model, note) in enumerate(pairs):
        out += [", " if i else "", Lit(model), f" ({note})"]
    return out


def _range(mode: str, g: pd.DataFrame) -> list:
    """" from X% (the weakest model) to Y% (the strongest) in MODE mode", or one model's accuracy."""
    if g.empty:
        return [f" no model covering the items in {mode} mode"]
    lo, hi = g.iloc[0], g.iloc[-1]
    if len(g) == 1:
        return [f" {100 * hi.accuracy:.1f}% (", Lit(hi.model), f") in {mode} mode"]
    return [f" from {100 * lo.accuracy:.1f}% (", Lit(lo.model), f") to {100 * hi.accuracy:.1f}% (", Lit(hi.model),
            f") in {mode} mode"]
