"""Length bias: how much options differ in length, and whether models favour the longest.

Lengths are counted (``curate.items.lengths``, as the filter counts them) in a named unit -- ``chars``,
``bytes`` (UTF-8) or ``tokens:<tokenizer>`` where the tokenizer is a model as ``--model`` names it
(``scoring.models.tokenizer``: a built-in name such as ``smollm2-135m``, a folder, a Hub id) --
over one of two texts: the option alone (``option``) or the scored text, the mode's context
followed by the delimiter and the option (``context+option``; an item with per-option contexts,
Winogrande, counts each option's whole sentence; ``curate.items.formulations.Scored.texts``).

The relative spread of an item is (longest - shortest) / longest. "Gold is longest" means the
gold option is strictly longer than every other option (ties count as not longest).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from curate.items import lengths
from curate.analyses.stats import INTERVAL, fisher_greater, wilson
from curate.core.errors import CurateError
from curate.items.lengths import gold_is_longest, relative_spread
from scoring.models import tokenizer
from scoring.normalize import CONDITION, option_values, with_formulation

TEXTS = ("option", "context+option")


def parse_unit(unit: str) -> tuple[str, str | None]:
    """('chars'|'bytes'|'tokens', tokenizer name or None) from a unit string."""
    if unit in ("chars", "bytes"):
        return unit, None
    if unit.startswith("tokens:") and len(unit) > len("tokens:"):
        return "tokens", unit[len("tokens:"):]
    raise CurateError(f"unknown length unit {unit!r}; use chars, bytes or tokens:<tokenizer name or folder>")


def count(texts: list[str], unit: str) -> np.ndarray:
    """Length of each text in ``unit`` (``curate.items.lengths``, the filter's measure)."""
    kind, name = parse_unit(unit)
    return lengths.count(texts, kind, tokenizer(name) if kind == "tokens" else None)


def option_lengths(items: list[dict], unit: str, text: str = "option", mode: str = "full") -> pd.DataFrame:
    """One row per (item, option): item_id, row_index, source, option_index, length."""
    if text not in TEXTS:
        raise CurateError(f"unknown length text {text!r}; use one of {', '.join(TEXTS)}")
    rows, texts = [], []
    for it, row in zip(items, lengths.texts(items, "options" if text == "option" else text, mode)):
        rows += [(it["item_id"], it["row_index"], it["source"], j) for j in range(len(row))]
        texts += row
    frame = pd.DataFrame(rows, columns=["item_id", "row_index", "source", "option_index"])
    frame["length"] = count(texts, unit)
    return frame


def item_spread(lengths: pd.DataFrame, gold: pd.Series) -> pd.DataFrame:
    """Per item: relative spread, longest and shortest length, and whether gold is longest
    (strictly). The formulas are the filter's (curate.items.lengths), so the report and the
    rules measure the same thing."""
    g = lengths.groupby("item_id", sort=False)
    out = pd.DataFrame({"row_index": g["row_index"].first(), "source": g["source"].first(),
                        "longest": g["length"].max(), "shortest": g["length"].min()})
    matrix = lengths.pivot(index="item_id", columns="option_index", values="length").reindex(out.index)
    values = matrix.to_numpy(dtype=float)
    out["spread"] = relative_spread(values)
    out["gold_longest"] = gold_is_longest(values, gold.reindex(out.index).to_numpy(dtype=int), strict=True)
    return out.reset_index()


def spread_summary(spread: pd.DataFrame, thresholds=(0.15, 0.3)) -> list[dict]:
    """Distribution of the spread overall and per source: quantiles and shares above the
    thresholds (the study filtered spread > 0.3, and gold-longest items in (0.15, 0.3])."""
    rows = []
    subsets = [("all", spread)] + [(f"source={s}", g) for s, g in spread.groupby(spread["source"].fillna("(none)"))]
    for name, g in subsets:
        q = g["spread"].quantile([0.5, 0.9, 0.99]).to_numpy()
        row = {"subset": name, "n": int(len(g)), "mean": float(g["spread"].mean()), "median": float(q[0]),
               "p90": float(q[1]), "p99": float(q[2]), "gold_longest": int(g["gold_longest"].sum())}
        for t in thresholds:
            row[f"above_{t}"] = int((g["spread"] > t).sum())
        lo, hi = thresholds[0], thresholds[-1]
        band = (g["spread"] > lo) & (g["spread"] <= hi)
        row[f"band_{lo}_{hi}_gold_longest"] = int((band & g["gold_longest"]).sum())
        rows.append(row)
    return rows


def longest_accuracy(preds: pd.DataFrame, spread: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Accuracy per model x mode x formulation when the gold option is the longest vs not
    (different items, so Wilson intervals per group and a one-sided Fisher exact test that
    longest is easier)."""
    longest = spread.set_index("item_id")["gold_longest"]
    rows = []
    for (model, mode, formulation, norm), g in with_formulation(preds).groupby(CONDITION + ["normalization"],
                                                                                 sort=True):
        flag = g["item_id"].map(longest).fillna(False).astype(bool)
        a, b = g.loc[flag, "correct"], g.loc[~flag, "correct"]
        (la, ha), (lb, hb) = wilson(a.sum(), len(a), alpha), wilson(b.sum(), len(b), alpha)
        rows.append({"model": model, "mode": mode, "formulation": formulation, "normalization": norm,
                     "n_longest": int(len(a)), "acc_longest": float(a.mean()) if len(a) else float("nan"),
                     "ci_longest": [la, ha], "n_other": int(len(b)),
                     "acc_other": float(b.mean()) if len(b) else float("nan"), "ci_other": [lb, hb],
                     "difference": float(a.mean() - b.mean()) if len(a) and len(b) else float("nan"),
                     "p_fisher_greater": fisher_greater(int(a.sum()), len(a), int(b.sum()), len(b)),
                     "interval": INTERVAL})
    return pd.DataFrame(rows)


def length_correlation(scores: pd.DataFrame, lengths: pd.DataFrame, norms_by_group: dict) -> pd.DataFrame:
    """Spearman correlation of each option value with its length, per model x mode x formulation
    x normalization x source (and over all sources); ``norms_by_group`` as ``groups_available``."""
    length = lengths.set_index(["item_id", "option_index"])["length"]
    scores = with_formulation(scores)
    rows = []
    for (model, mode, formulation), norms in norms_by_group.items():
        g = scores[(scores["model"] == model) & (scores["mode"] == mode) & (scores["formulation"] == formulation)]
        lens = length.reindex(pd.MultiIndex.from_arrays([g["item_id"], g["option_index"]])).to_numpy()
        src = g["source"].fillna("(none)").to_numpy()
        for norm in norms:
            vals = option_values(g, norm).to_numpy()
            for name, mask in [("all", np.ones(len(g), bool))] + [(f"source={s}", src == s) for s in sorted(set(src))]:
                rho, p = sps.spearmanr(vals[mask], lens[mask])
                rows.append({"model": model, "mode": mode, "formulation": formulation, "normalization": norm,
                             "subset": name,
                             "n_options": int(mask.sum()), "spearman": float(rho), "p": float(p)})
    return pd.DataFrame(rows)


def binned_values(scores: pd.DataFrame, lengths: pd.DataFrame, norms, n_bins: int = 12, min_count: int = 20) -> pd.DataFrame:
    """Mean option value per length bin and source for one (model, mode)'s scores: columns
    normalization, source, length_bin (bin centre), mean, n. Bins are equal-width up to the
    99th length percentile; bins with fewer than ``min_count`` options are left out."""
    length = lengths.set_index(["item_id", "option_index"])["length"]
    lens = length.reindex(pd.MultiIndex.from_arrays([scores["item_id"], scores["option_index"]])).to_numpy(float)
    edges = np.linspace(lens.min(), np.quantile(lens, 0.99), n_bins + 1)
    which = np.clip(np.digitize(lens, edges) - 1, 0, n_bins - 1)
    centres = (edges[:-1] + edges[1:]) / 2
    rows = []
    for norm in norms:
        frame = pd.DataFrame({"source": scores["source"].fillna("(none)").to_numpy(), "bin": which,
                              "value": option_values(scores, norm).to_numpy(), "length": lens})
        frame = frame[frame["length"] <= edges[-1]]
        for (source, b), g in frame.groupby(["source", "bin"]):
            if len(g) >= min_count:
                rows.append({"normalization": norm, "source": source, "length_bin": float(centres[b]),
                             "mean": float(g["value"].mean()), "n": int(len(g))})
    return pd.DataFrame(rows, columns=["normalization", "source", "length_bin", "mean", "n"])
