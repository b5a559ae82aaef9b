"""How often a model gives the same answer under two prompt modes (or two formulations), and
how they differ.

For one model and a pair of modes (a, b) over the items both were scored on, every item is in
exactly one of five parts: both correct; both the same wrong option; only a correct; only b
correct; both wrong and different. Agreement = both correct + same wrong. Cohen's kappa
compares the two prediction vectors as two raters over the options.
"""
from __future__ import annotations

import itertools

import pandas as pd

from curate.core.statistics import cohens_kappa
from scoring.normalize import with_formulation

PARTS = ("both_correct", "same_wrong", "only_a_correct", "only_b_correct", "different_wrong")

#: Mode pairs reported first (the study's two), then any other pair the scores allow.
STUDY_PAIRS = (("full", "zero"), ("full", "placeholder"))


def agreement(pred_a, pred_b, gold, n_options: int) -> dict:
    """Counts and shares of the five parts, the agreement rate and Cohen's kappa."""
    frame = pd.DataFrame({"a": list(pred_a), "b": list(pred_b), "gold": list(gold)})
    ca, cb, same = frame["a"] == frame["gold"], frame["b"] == frame["gold"], frame["a"] == frame["b"]
    counts = {
        "both_correct": int((ca & cb).sum()),
        "same_wrong": int((~ca & ~cb & same).sum()),
        "only_a_correct": int((ca & ~cb).sum()),
        "only_b_correct": int((~ca & cb).sum()),
        "different_wrong": int((~ca & ~cb & ~same).sum()),
    }
    n = len(frame)
    out = {"n": n, **counts}
    out.update({f"{k}_share": (v / n if n else float("nan")) for k, v in counts.items()})
    out["agreement"] = (counts["both_correct"] + counts["same_wrong"]) / n if n else float("nan")
    out["kappa"] = cohens_kappa(frame["a"], frame["b"], n_options) if n else float("nan")
    return out


def mode_pairs(modes) -> list[tuple[str, str]]:
    """The study's pairs first (where both modes exist), then every other pair in mode order."""
    modes = list(modes)
    pairs = [p for p in STUDY_PAIRS if p[0] in modes and p[1] in modes]
    pairs += [p for p in itertools.combinations(modes, 2) if p not in pairs]
    return pairs


def agreement_table(preds: pd.DataFrame, modes, n_options: int) -> pd.DataFrame:
    """One row per model x formulation x mode pair (on the items both modes scored), from
    predictions of one normalization (columns model, mode, item_id, pred, gold; formulation)."""
    return _pairs(preds, "mode", mode_pairs(modes), n_options)


def formulation_table(preds: pd.DataFrame, formulations, n_options: int) -> pd.DataFrame:
    """One row per model x mode x formulation pair (e.g. cloze vs letters), as ``agreement_table``."""
    return _pairs(preds, "formulation", list(itertools.combinations(formulations, 2)), n_options)


def _pairs(preds: pd.DataFrame, axis: str, pairs, n_options: int) -> pd.DataFrame:
    """Agreement between two values of ``axis`` (mode or formulation) for each model and each
    value of the other axis, over the items both scored."""
    other = "formulation" if axis == "mode" else "mode"
    rows = []
    for (model, fixed), group in with_formulation(preds).groupby(["model", other], sort=True):
        by_value = {v: g.set_index("item_id") for v, g in group.groupby(axis)}
        for a, b in pairs:
            if a not in by_value or b not in by_value:
                continue
            joined = by_value[a][["pred", "gold"]].join(by_value[b][["pred"]].rename(columns={"pred": "pred_b"}),
                                                        how="inner")
            rows.append({"model": model, other: fixed, f"{axis}_a": a, f"{axis}_b": b,
                         **agreement(joined["pred"], joined["pred_b"], joined["gold"], n_options)})
    cols = ["model", other, f"{axis}_a", f"{axis}_b", "n", *PARTS, *(f"{p}_share" for p in PARTS), "agreement", "kappa"]
    return pd.DataFrame(rows, columns=cols)
