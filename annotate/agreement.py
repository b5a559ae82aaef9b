"""How far annotators agree, per label, with bootstrap confidence intervals.

Each round is split into facets with one category per item: round 1 has one yes/no facet per
label; round 2 has ``best`` and ``worst`` (an option index), ``gold_not_best``,
``any_equally_good`` and ``all_implausible`` (yes/no). For every pair of annotators and facet,
over the items both answered validly: raw agreement, Cohen's kappa (statsmodels), Krippendorff's
alpha for nominal data (the ``krippendorff`` package) and Gwet's AC1, which stays meaningful
when one category dominates (most HellaSwag items are not "nonsense"), each with a percentile
bootstrap interval over items. Each pair's resamples come from a generator seeded by the seed
and the two annotators' names alone, so a pair's intervals do not change when another
annotator is added.
"""
from __future__ import annotations

import itertools

import krippendorff
import numpy as np
import pandas as pd
from annotate.store import LABELS
from curate.core.statistics import bootstrap_rng, cohens_kappa

ROUND2_FACETS = ("best", "worst", "gold_not_best", "any_equally_good", "all_implausible")


def facets(result: dict, round: int, gold: int) -> dict[str, int]:
    """One category code per facet for a valid result."""
    if round == 1:
        return {label: int(label in result["labels"]) for label in LABELS}
    return {"best": result["best"], "worst": result["worst"], "gold_not_best": int(result["best"] != gold),
            "any_equally_good": int(bool(result["equally_good"])), "all_implausible": int(result["all_implausible"])}


def facet_table(records: pd.DataFrame, golds: dict[str, int], round: int) -> pd.DataFrame:
    """Rows (annotator, item_id) x facet columns, from valid records of ``round``."""
    rows = []
    for r in records[(records["round"] == round) & (records["status"] == "valid")].itertuples():
        rows.append({"annotator": r.annotator, "item_id": r.item_id, **facets(r.result, round, golds[r.item_id])})
    return pd.DataFrame(rows)


def alpha(a: np.ndarray, b: np.ndarray, categories: int) -> float:
    if len(np.unique(np.concatenate([a, b]))) < 2:
        return float("nan")
    return float(krippendorff.alpha(reliability_data=np.vstack([a, b]).astype(float),
                                    level_of_measurement="nominal", value_domain=list(range(categories))))


def gwet_ac1(a: np.ndarray, b: np.ndarray, categories: int) -> float:
    """Gwet's AC1 for two raters: (pa - pe) / (1 - pe), pe = sum_k pi_k (1 - pi_k) / (q - 1)."""
    pa = float(np.mean(a == b))
    pi = (np.bincount(a, minlength=categories) + np.bincount(b, minlength=categories)) / (2 * len(a))
    pe = float(np.sum(pi * (1 - pi)) / (categories - 1))
    return (pa - pe) / (1 - pe) if pe < 1 else float("nan")


#: Each agreement measure of two raters (Cohen's kappa: ``curate.core.statistics.cohens_kappa``).
METRICS = {"cohen_kappa": cohens_kappa, "krippendorff_alpha": alpha, "gwet_ac1": gwet_ac1}


def intervals(columns: dict[str, tuple[np.ndarray, np.ndarray, int]], *, n_boot: int,
              rng: np.random.Generator) -> dict[tuple[str, str], tuple[float, float]]:
    """95% percentile intervals of every metric on every facet, from the same ``n_boot``
    resamples of the pair's items; NaN where fewer than half the resamples give a value.

    Not ``scipy.stats.bootstrap``: that takes one statistic whose every resample is a number and
    returns NaN once any resample is NaN, while kappa and alpha are undefined (NaN) on resamples
    where a rater uses one category only, which here are left out (an interval needs at least
    half the resamples to give a value); and all metrics and facets of a pair share one set of
    resamples, so their intervals are comparable."""
    n = len(next(iter(columns.values()))[0])
    values = {(facet, name): [] for facet in columns for name in METRICS}
    for _ in range(n_boot):
        pick = rng.integers(0, n, n)
        for facet, (a, b, k) in columns.items():
            for name, metric in METRICS.items():
                v = metric(a[pick], b[pick], k)
                if not np.isnan(v):
                    values[facet, name].append(v)
    out = {}
    for key, vals in values.items():
        lo, hi = np.percentile(vals, [2.5, 97.5]) if len(vals) >= n_boot / 2 else (np.nan, np.nan)
        out[key] = (float(lo), float(hi))
    return out


def agreement(records: pd.DataFrame, golds: dict[str, int], n_options: dict[str, int], round: int, *,
              n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """One row per (annotator pair, facet) with n, raw agreement and each metric with its 95% CI."""
    table = facet_table(records, golds, round)
    if table.empty:
        return pd.DataFrame()
    names = sorted(table["annotator"].unique())
    cols = list(LABELS) if round == 1 else list(ROUND2_FACETS)
    out = []
    for x, y in itertools.combinations(names, 2):
        both = table[table.annotator == x].merge(table[table.annotator == y], on="item_id", suffixes=("_a", "_b"))
        if both.empty:
            continue
        k_options = max(n_options[i] for i in both["item_id"])
        columns = {facet: (both[f"{facet}_a"].to_numpy(int), both[f"{facet}_b"].to_numpy(int),
                           k_options if facet in ("best", "worst") else 2) for facet in cols}
        # one pair's generator: seeded by the seed and the two names only (the scheme of every bootstrap)
        cis = intervals(columns, n_boot=n_boot, rng=bootstrap_rng(seed, x, y))
        for facet, (a, b, k) in columns.items():
            row = {"round": round, "facet": facet, "annotator_a": x, "annotator_b": y, "n_items": len(a),
                   "agreement": float(np.mean(a == b))}
            for name, metric in METRICS.items():
                row[name] = metric(a, b, k)
                row[f"{name}_lo"], row[f"{name}_hi"] = cis[facet, name]
            out.append(row)
    return pd.DataFrame(out)


def workspace_records(root, *, human=None, human_round: int | None = None,
                      human_name: str = "human") -> tuple[list[dict], pd.DataFrame]:
    """(items, every annotation record) of ``root``; ``human`` adds the labels of a file in the
    study's layout (see annotate/study_import.py) as one more annotator, unstored."""
    from annotate.store import open_annotations, read_annotations
    from annotate.study_import import study_records

    ws = open_annotations(root)
    try:
        items = ws.items()
        records = read_annotations(ws)
    finally:
        ws.close()
    if human is not None:
        extra = pd.DataFrame(study_records(items, human, human_round, human_name))
        records = pd.concat([records, extra], ignore_index=True)
    return items, records


def workspace_agreement(root, *, rounds=(1, 2), human=None, human_round: int | None = None,
                        human_name: str = "human", n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Agreement between every pair of annotators stored in ``root`` (and ``human``'s file, see
    ``workspace_records``)."""
    items, records = workspace_records(root, human=human, human_round=human_round, human_name=human_name)
    golds = {it["item_id"]: it["gold"] for it in items}
    n_options = {it["item_id"]: len(it["options"]) for it in items}
    frames = [agreement(records, golds, n_options, r, n_boot=n_boot, seed=seed) for r in rounds]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def annotators_by_round(records: pd.DataFrame, rounds) -> str:
    """Who has valid records in each of ``rounds`` and for how many items ("round 1: a (40
    items); round 2: none"): what an agreement with nothing to compare says it found."""
    counts = ({} if records.empty else
              records[records["status"] == "valid"].groupby(["round", "annotator"])["item_id"].nunique().to_dict())
    parts = []
    for r in rounds:
        found = [f"{name} ({n} item{'' if n == 1 else 's'})" for (rnd, name), n in sorted(counts.items()) if rnd == r]
        parts.append(f"round {r}: {', '.join(found) or 'none'}")
    return "; ".join(parts)
