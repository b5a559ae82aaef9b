"""Shot counts as a prompt axis (issue 29): accuracy per shot count with Wilson intervals, the
paired test between shot counts (exact McNemar with a paired bootstrap interval, Holm and
Bonferroni across the models, as ``curate.analyses.comparisons`` does for modes), agreement of
predictions between shot counts (share of items with the same prediction, Cohen's kappa), and
the items whose correctness flips.

Input: every shot count's scores (``scoring.store.read_scores``; one ``fewshot`` value per
row). Each shot count's predictions are made apart (``scoring.normalize`` refuses a frame that
mixes them), so 0-shot and k-shot numbers never pool.
"""
from __future__ import annotations

import itertools

import pandas as pd

from curate.analyses.accuracy import _acc_row
from curate.analyses.comparisons import _adjust, _compare, _paired
from curate.analyses.stats import level, paired_bootstrap
from curate.core.statistics import cohens_kappa
from scoring.normalize import available, predictions, with_formulation

KEYS = ["model", "mode", "formulation"]


def shot_predictions(scores: pd.DataFrame, gold: pd.Series, normalizations: dict[str, str]) -> pd.DataFrame:
    """Predictions per (model, mode, formulation, fewshot, item), each model under its
    normalization in ``normalizations`` (shot counts lacking it left out), with ``gold`` and
    ``correct``."""
    frames = []
    for k, part in scores.groupby("fewshot", sort=True):
        part = with_formulation(part)
        for (model, _, _), group in part.groupby(KEYS, sort=True):
            norm = normalizations.get(model)
            if norm in available(group):
                frames.append(predictions(group, norm).assign(fewshot=int(k)))
    if not frames:
        return pd.DataFrame(columns=KEYS + ["fewshot", "item_id", "pred", "gold", "correct"])
    out = pd.concat(frames, ignore_index=True)
    out["gold"] = out["item_id"].map(gold).astype(int)
    out["correct"] = out["pred"] == out["gold"]
    return out


def accuracy_by_shots(preds: pd.DataFrame, alpha: float = 0.05) -> list[dict]:
    """Accuracy with a Wilson interval per model, mode, formulation and shot count."""
    rows = []
    for (model, mode, formulation, k), g in preds.groupby(KEYS + ["fewshot"], sort=True):
        rows.append({"model": model, "mode": mode, "formulation": formulation, "fewshot": int(k)}
                    | _acc_row(g["correct"], alpha))
    return rows


def shot_comparisons(preds: pd.DataFrame, *, n_resamples: int = 2000, seed: int = 0, alpha: float = 0.05) -> list[dict]:
    """Per mode, formulation and pair of shot counts (a < b): one row per model, two-sided exact
    McNemar on the items both have, a paired bootstrap interval of acc_a - acc_b, Holm and
    Bonferroni across the models."""
    families = []
    for (mode, formulation), part in preds.groupby(["mode", "formulation"], sort=True):
        for a, b in itertools.combinations(sorted(part["fewshot"].unique()), 2):
            rows = []
            for model, g in part.groupby("model", sort=True):
                pair = _paired(g, "fewshot", a, b)
                if pair.empty:
                    continue
                boot = paired_bootstrap(pair["a"], pair["b"], n_resamples=n_resamples, seed=seed, confidence=1 - alpha)
                rows.append({"model": model, **_compare(pair, "two-sided"), "boot_ci_low": boot["ci_low"],
                             "boot_ci_high": boot["ci_high"], "p_boot_two_sided": boot["p"]})
            if rows:
                _adjust(rows, alpha)
                families.append({"mode": mode, "formulation": formulation, "fewshot_a": int(a), "fewshot_b": int(b),
                                 "test": f"exact McNemar, two-sided; paired percentile bootstrap CI ({level(alpha)})",
                                 "rows": rows})
    return families


def shot_agreement(preds: pd.DataFrame) -> list[dict]:
    """Per model, mode, formulation and pair of shot counts: items both have, the share with the
    same prediction, Cohen's kappa of the predictions, and the items whose correctness flips
    each way (wrong at a and right at b, and the reverse)."""
    rows = []
    for (model, mode, formulation), g in preds.groupby(KEYS, sort=True):
        by_k = {int(k): p.set_index("item_id") for k, p in g.groupby("fewshot")}
        for a, b in itertools.combinations(sorted(by_k), 2):
            both = by_k[a].merge(by_k[b], left_index=True, right_index=True, suffixes=("_a", "_b"))
            if both.empty:
                continue
            n_options = int(max(both["pred_a"].max(), both["pred_b"].max(), both["gold_a"].max())) + 1
            gained = both.index[~both["correct_a"] & both["correct_b"]]
            lost = both.index[both["correct_a"] & ~both["correct_b"]]
            rows.append({"model": model, "mode": mode, "formulation": formulation, "fewshot_a": a, "fewshot_b": b,
                         "n": len(both), "same_prediction": float((both["pred_a"] == both["pred_b"]).mean()),
                         "kappa": cohens_kappa(both["pred_a"], both["pred_b"], n_options),
                         "wrong_to_right": len(gained), "right_to_wrong": len(lost),
                         "flipped_items": [{"item_id": i, "to": "right"} for i in gained]
                         + [{"item_id": i, "to": "wrong"} for i in lost]})
    return rows
