"""Position audit: where the gold option sits, and whether answers move with the options' order.

- ``gold_positions``: per subset (all items, each source) and option count, how often the gold
  option is at each position, with a chi-square goodness-of-fit test against a uniform spread. A
  benchmark that always puts the gold last (SciQ) gets a p-value far below any alpha; the p-value
  comes from the log survival function, so a skew beyond double precision still has a number
  (``log10_p``).
- ``rotation_table``: predictions in the rotated letters formulations (``letters`` and
  ``letters+rK``: the options listed in every cyclic order, see ``curate.items.formulations``). Per
  model x mode x normalization, over the items scored in every rotation: accuracy in the
  original order, mean accuracy over rotations, the share of items answered right in every
  rotation and in none, and which letters the model picks (against a uniform spread: in the
  rotations every letter holds the gold equally often, so a skew is the model's position bias).
  Which rotation a prediction came from, and per item how many rotations were scored and answered
  right, are in ``scoring.rotations`` (the filter's ``rotated_correct`` condition counts them too).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sps

from scoring.rotations import item_rotation_counts, rotated


def uniformity(counts) -> dict:
    """Chi-square goodness of fit of ``counts`` (one per position) against equal shares."""
    counts = np.asarray(counts, dtype=float)
    n, k = counts.sum(), len(counts)
    expected = n / k
    chi2 = float(((counts - expected) ** 2 / expected).sum()) if n else float("nan")
    log_p = float(sps.chi2.logsf(chi2, k - 1)) if n else float("nan")
    return {"chi2": chi2, "dof": k - 1, "p": math.exp(log_p) if n else float("nan"),
            "log10_p": log_p / math.log(10) if n else float("nan")}


def gold_positions(items: list[dict], alpha: float = 0.05) -> pd.DataFrame:
    """One row per subset x option count: counts and shares of the gold at each position (A =
    first), the chi-square test against uniform, and ``skewed`` (p < alpha)."""
    frame = pd.DataFrame({"source": [it["source"] or "(none)" for it in items],
                          "n_options": [len(it["options"]) for it in items],
                          "gold": [it["gold"] for it in items]})
    subsets = [("all", frame)] + [(f"source={s}", g) for s, g in frame.groupby("source", sort=True)]
    rows = []
    for name, part in subsets:
        if name.startswith("source=") and frame["source"].nunique() == 1:
            continue
        for n, g in part.groupby("n_options", sort=True):
            counts = np.bincount(g["gold"], minlength=n)
            test = uniformity(counts)
            rows.append({"subset": name, "n_options": int(n), "n": int(len(g)), "counts": counts.tolist(),
                         "shares": (counts / len(g)).round(4).tolist(), "most_common": "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[
                             int(counts.argmax())], "most_common_share": float(counts.max() / len(g)), **test,
                         "skewed": bool(test["p"] < alpha)})
    return pd.DataFrame(rows, columns=["subset", "n_options", "n", "counts", "shares", "most_common",
                                       "most_common_share", "chi2", "dof", "p", "log10_p", "skewed"])


def rotation_table(preds: pd.DataFrame, n_options: pd.Series, alpha: float = 0.05) -> pd.DataFrame:
    """Per model x mode x normalization: accuracy over rotations and the letters picked."""
    r = rotated(preds, n_options)
    counts = item_rotation_counts(preds, n_options)
    rows = []
    for (model, mode, norm), c in counts.groupby(["model", "mode", "normalization"], sort=True):
        done = c[c["complete"]]
        if done.empty:
            continue
        picks = r[(r["model"] == model) & (r["mode"] == mode) & (r["normalization"] == norm)
                  & r["item_id"].isin(done["item_id"])]
        unrotated = picks[picks["rotation"] == 0]
        n = int(done["n_options"].max())
        shown = np.bincount(picks["shown"], minlength=n)
        same = done["n_options"].nunique() == 1  # a uniform test needs one option count
        test = uniformity(shown) if same else {"chi2": float("nan"), "p": float("nan"), "log10_p": float("nan")}
        rows.append({"model": model, "mode": mode, "normalization": norm, "n": int(len(done)),
                     "accuracy_original_order": float(unrotated["correct"].mean()),
                     "accuracy_over_rotations": float((done["right"] / done["n_options"]).mean()),
                     "right_in_every_rotation": float((done["right"] == done["n_options"]).mean()),
                     "right_in_no_rotation": float((done["right"] == 0).mean()),
                     "picked_letter_shares": (shown / shown.sum()).round(4).tolist(),
                     "picked_chi2": test["chi2"], "p_picked_uniform": test["p"], "picked_log10_p": test["log10_p"],
                     "position_biased": bool(test["p"] < alpha) if same else None})
    return pd.DataFrame(rows)
