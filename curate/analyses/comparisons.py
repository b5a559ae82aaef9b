"""Families of paired comparisons on the same items, each corrected as a family.

- modes: per model (in each formulation), is mode a more accurate than mode b? With the full
  context as a the claim is directional (the context should help: one-sided exact McNemar,
  a > b); between two context-free modes it is not (two-sided). Each comes with a paired
  bootstrap interval of the difference; Holm and Bonferroni across the models of each pair;
  and, for directional claims, an intersection-union test of "a beats b for every model".
- formulations: per model (in each mode), cloze vs letters and any other pair, two-sided, as
  modes are compared.
- models: in each mode and formulation, every pair of models, two-sided exact McNemar (no
  direction is claimed in advance), Holm and Bonferroni across the pairs of that mode.
- power: the minimum detectable difference for a subset size (independent samples, and
  paired at the observed discordance).
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from curate.analyses.agreement import mode_pairs
from curate.analyses.stats import (corrected, intersection_union, level, mcnemar_exact, mdd_independent,
                                   mdd_paired, paired_bootstrap)
from scoring.normalize import with_formulation


def _paired(preds: pd.DataFrame, key: str, a: str, b: str) -> pd.DataFrame:
    """correct_a / correct_b on the items both a and b (values of column ``key``) have."""
    left = preds[preds[key] == a].set_index("item_id")["correct"]
    right = preds[preds[key] == b].set_index("item_id")["correct"]
    return pd.concat({"a": left, "b": right}, axis=1, join="inner")


def _compare(pair: pd.DataFrame, alternative: str) -> dict:
    """Accuracies, their difference and the exact McNemar p of one paired comparison."""
    test = mcnemar_exact(pair["a"], pair["b"], alternative=alternative)
    return {"n": test["n"], "acc_a": float(pair["a"].mean()), "acc_b": float(pair["b"].mean()),
            "difference": test["difference"], "only_a": test["only_a"], "only_b": test["only_b"],
            "p_mcnemar": test["p"]}


def _adjust(rows: list[dict], alpha: float) -> None:
    """Add Holm and Bonferroni adjusted p-values across one family of rows."""
    adj = corrected([r["p_mcnemar"] for r in rows], alpha)
    for r, h, b in zip(rows, adj["holm"], adj["bonferroni"]):
        r.update(p_holm=h, p_bonferroni=b)


def mode_comparisons(preds: pd.DataFrame, modes, *, n_resamples=2000, seed=0, alpha=0.05) -> dict:
    """Per formulation and mode pair: one row per model (exact McNemar, bootstrap CI, Holm and
    Bonferroni across models) and, for directional pairs, the intersection-union p of 'a > b for
    every model'."""
    return _families(preds, "mode", mode_pairs(modes), lambda a: "greater" if a == "full" else "two-sided",
                     n_resamples=n_resamples, seed=seed, alpha=alpha)


def formulation_comparisons(preds: pd.DataFrame, formulations, *, n_resamples=2000, seed=0, alpha=0.05) -> dict:
    """Per mode and formulation pair (cloze vs letters): one row per model, two-sided, as
    ``mode_comparisons``."""
    return _families(preds, "formulation", list(itertools.combinations(formulations, 2)), lambda a: "two-sided",
                     n_resamples=n_resamples, seed=seed, alpha=alpha)


def _families(preds, axis: str, pairs, alternative_of, *, n_resamples, seed, alpha) -> dict:
    """One family per (value of the other axis, pair along ``axis``), a row per model in it."""
    other = "formulation" if axis == "mode" else "mode"
    out = []
    for fixed, part in with_formulation(preds).groupby(other, sort=True):
        for a, b in pairs:
            alternative = alternative_of(a)
            rows = []
            for model, g in part.groupby("model", sort=True):
                pair = _paired(g, axis, a, b)
                if pair.empty:
                    continue
                boot = paired_bootstrap(pair["a"], pair["b"], n_resamples=n_resamples, seed=seed, confidence=1 - alpha)
                rows.append({"model": model, **_compare(pair, alternative), "boot_ci_low": boot["ci_low"],
                             "boot_ci_high": boot["ci_high"], "p_boot_two_sided": boot["p"]})
            if not rows:
                continue
            _adjust(rows, alpha)
            family = {other: fixed, f"{axis}_a": a, f"{axis}_b": b, "alternative": alternative,
                      "claim": f"{a} is more accurate than {b}" if alternative == "greater" else f"{a} and {b} differ",
                      "test": f"exact McNemar, {'one-sided (a > b)' if alternative == 'greater' else 'two-sided'}; "
                              f"paired percentile bootstrap CI ({level(alpha)})",
                      "confidence": 1 - alpha, "n_resamples": n_resamples, "seed": seed, "rows": rows}
            if alternative == "greater":
                family.update(iut_every_model_p=intersection_union([r["p_mcnemar"] for r in rows]),
                              iut_models=len(rows))
            out.append(family)
    return {"alpha": alpha, "families": out}


def model_comparisons(preds: pd.DataFrame, modes, alpha=0.05) -> dict:
    """Every pair of models within each mode and formulation: two-sided exact McNemar,
    corrected per mode and formulation."""
    out = []
    for formulation, part in with_formulation(preds).groupby("formulation", sort=True):
        for mode in modes:
            g = part[part["mode"] == mode]
            rows = []
            for a, b in itertools.combinations(sorted(g["model"].unique()), 2):
                rows.append({"model_a": a, "model_b": b, **_compare(_paired(g, "model", a, b), "two-sided")})
            if not rows:
                continue
            _adjust(rows, alpha)
            out.append({"mode": mode, "formulation": formulation, "test": "exact McNemar, two-sided", "rows": rows})
    return {"alpha": alpha, "families": out}


def detectable_differences(preds: pd.DataFrame, subsets: dict[str, list[str]], mode: str, *, alpha=0.05,
                           power=0.8) -> list[dict]:
    """For each named subset of item ids: its size, the mean accuracy over models in ``mode``,
    the median share of discordant items over model pairs, and the minimum detectable
    difference (two-sided, ``alpha``, ``power``) for independent and for paired comparisons.
    With one model there is no pair: ``model_pairs`` is 0 and the paired figures are NaN."""
    g = preds[preds["mode"] == mode]
    wide = g.pivot(index="item_id", columns="model", values="correct")
    rows = []
    for name, ids in subsets.items():
        sub = wide.reindex([i for i in ids if i in wide.index]).dropna()
        n = len(sub)
        if n == 0:
            continue
        values = sub.to_numpy(bool)
        baseline = float(values.mean())
        disc = [float((values[:, i] != values[:, j]).mean()) for i, j in itertools.combinations(range(values.shape[1]), 2)]
        discordant = float(np.median(disc)) if disc else float("nan")
        rows.append({"subset": name, "n": n, "mode": mode, "baseline_accuracy": baseline,
                     "model_pairs": len(disc), "median_discordant": discordant, "alpha": alpha, "power": power,
                     "mdd_independent": mdd_independent(n, baseline, alpha=alpha, power=power),
                     "mdd_paired": mdd_paired(n, discordant, alpha=alpha, power=power) if disc else float("nan")})
    return rows
