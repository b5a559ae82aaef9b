"""Generation results: accuracy per seed, its spread, answer stability, position bias, agreement
with log-likelihood predictions, accuracy on items annotated "all implausible", paired tests.

Inputs are the frames the stores return (``generate.store.read_generations``; log-likelihood
predictions from ``accuracy.all_predictions`` of one normalization; round-2 annotations) and
nothing here touches the database. A condition is one (model, template, settings, mode).

Unparsed replies are never scored silently: every table counts them, accuracies count them as
not correct (a reply that names no option does not answer the item), and ``accuracy_parsed``
gives the accuracy over the parsed replies alone.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy import stats as sps

from curate.analyses.agreement import agreement, mode_pairs
from curate.analyses.stats import corrected, level, seed_bootstrap, sign_test, wilson

CONDITION = ["model", "template", "settings", "mode"]
UNPARSED_POLICY = "unparsed replies count as not correct; accuracy_parsed leaves them out"


def scored(gens: pd.DataFrame) -> pd.DataFrame:
    """``gens`` with ``right``: correct as a plain bool (unparsed = False, by the policy above)."""
    return gens.assign(right=gens["correct"].fillna(False).astype(bool))


def parse_summary(gens: pd.DataFrame) -> pd.DataFrame:
    """Per condition: replies by parse status, lenient ones by method, and re-asked replies."""
    rows = []
    for key, g in gens.groupby(CONDITION, sort=True):
        n = len(g)
        counts = g["status"].value_counts()
        row = dict(zip(CONDITION, key)) | {"n": n}
        for status in ("strict", "lenient", "unparsed"):
            row[status] = int(counts.get(status, 0))
            row[f"{status}_share"] = row[status] / n
        row["lenient_number"] = int((g["method"] == "number-in-text").sum())
        row["lenient_text"] = int((g["method"] == "option-text").sum())
        row["re_asked"] = int((g["attempts"] > 1).sum())
        rows.append(row)
    return pd.DataFrame(rows)


def seed_accuracy(gens: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Per condition and seed: n, unparsed, correct, accuracy (Wilson interval) and accuracy over
    the parsed replies."""
    rows = []
    for key, g in scored(gens).groupby(CONDITION + ["seed"], sort=True):
        n, k, parsed = len(g), int(g["right"].sum()), int((g["status"] != "unparsed").sum())
        low, high = wilson(k, n, alpha)
        rows.append(dict(zip(CONDITION + ["seed"], key)) | {
            "n": n, "unparsed": n - parsed, "correct": k, "accuracy": k / n, "ci_low": low, "ci_high": high,
            "accuracy_parsed": k / parsed if parsed else float("nan")})
    return pd.DataFrame(rows)


def correctness_matrix(g: pd.DataFrame, column: str = "right") -> pd.DataFrame:
    """Items x seeds of one condition, on the items answered under every seed."""
    return g.pivot(index="item_id", columns="seed", values=column).dropna()


def seed_spread(gens: pd.DataFrame, *, n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """Per condition, on the items answered under every seed: the accuracy of each seed
    summarized (mean, sd, min, max, range), a bootstrap interval of the mean resampling items
    and seeds, and how unstable answers are: the share of items whose answer (an option, or
    unparsed) differs between seeds, and whose correctness does."""
    rows = []
    for key, g in scored(gens).groupby(CONDITION, sort=True):
        right = correctness_matrix(g).astype(float)
        if right.empty:  # no item was answered under every seed
            rows.append(dict(zip(CONDITION, key)) | {"seeds": int(g["seed"].nunique()), "n_items": 0})
            continue
        answers = g.assign(answer=g["pred"].astype("string").fillna("unparsed")).pivot(
            index="item_id", columns="seed", values="answer").reindex(right.index)
        per_seed = right.mean(axis=0).to_numpy()
        boot = seed_bootstrap(right.to_numpy(), n_resamples=n_resamples, seed=seed, confidence=confidence)
        rows.append(dict(zip(CONDITION, key)) | {
            "seeds": right.shape[1], "n_items": right.shape[0], "mean": float(per_seed.mean()),
            "sd": float(per_seed.std(ddof=1)) if len(per_seed) > 1 else float("nan"),
            "min": float(per_seed.min()), "max": float(per_seed.max()), "range": float(np.ptp(per_seed)),
            "boot_ci_low": boot["ci_low"], "boot_ci_high": boot["ci_high"],
            "answer_changes": float((answers.nunique(axis=1) > 1).mean()),
            "correctness_changes": float((right.nunique(axis=1) > 1).mean())})
    return pd.DataFrame(rows)


def position_bias(gens: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """How often each displayed position is chosen, against how often the gold is shown there.

    Returns (positions, tests): positions has one row per condition, number of options and
    position (chosen count and share of the parsed replies; gold count and share); tests one row
    per condition and number of options: a chi-square goodness-of-fit test of the chosen
    positions against a uniform choice, and the most chosen position."""
    positions, tests = [], []
    for key, g in gens.groupby(CONDITION + ["n_options"], sort=True):
        k = int(key[-1])
        parsed = g[g["status"] != "unparsed"]
        chosen = parsed["shown"].astype(int).value_counts().reindex(range(1, k + 1), fill_value=0)
        gold = g["gold_shown"].value_counts().reindex(range(1, k + 1), fill_value=0)
        for p in range(1, k + 1):
            positions.append(dict(zip(CONDITION + ["n_options"], key)) | {
                "position": p, "chosen": int(chosen[p]), "chosen_share": chosen[p] / len(parsed) if len(parsed) else float("nan"),
                "gold_here": int(gold[p]), "gold_share": gold[p] / len(g)})
        test = sps.chisquare(chosen.to_numpy()) if len(parsed) else None
        tests.append(dict(zip(CONDITION + ["n_options"], key)) | {
            "n_parsed": len(parsed), "most_chosen": int(chosen.idxmax()) if len(parsed) else None,
            "most_chosen_share": float(chosen.max() / len(parsed)) if len(parsed) else float("nan"),
            "chi2": float(test.statistic) if test else float("nan"), "p_uniform": float(test.pvalue) if test else float("nan")})
    return pd.DataFrame(positions), pd.DataFrame(tests)


def loglikelihood_agreement(gens: pd.DataFrame, ll: pd.DataFrame) -> pd.DataFrame:
    """Per condition and seed, on the parsed replies of items the same model (by name) has a
    log-likelihood prediction for in the same mode: how often generation (a) and log-likelihood
    (b) pick the same option, the five-way split of ``agreement.agreement`` and Cohen's kappa."""
    rows = []
    if ll.empty:
        return pd.DataFrame(rows)
    ll = ll[["model", "mode", "item_id", "pred"]].rename(columns={"pred": "ll_pred"})
    joined = gens[gens["status"] != "unparsed"].merge(ll, on=["model", "mode", "item_id"])
    n_options = int(gens["n_options"].max()) if len(gens) else 0
    for key, g in joined.groupby(CONDITION + ["seed"], sort=True):
        row = agreement(g["pred"].astype(int), g["ll_pred"].astype(int), g["gold"], n_options)
        rows.append(dict(zip(CONDITION + ["seed"], key)) | row)
    return pd.DataFrame(rows)


def all_implausible_accuracy(gens: pd.DataFrame, ll: pd.DataFrame, flags: pd.DataFrame) -> pd.DataFrame:
    """The study's "All Bad" column: per annotator and condition, accuracy on the items the
    annotator called all implausible and on its other items, by generation (mean over seeds) and
    by log-likelihood for the same model and mode. ``flags``: ``annotate.flags.item_flags`` rows."""
    flagged = flags[flags["measure"] == "all_implausible"]
    rows = []
    if flagged.empty:
        return pd.DataFrame(rows)
    gens, ll_by = scored(gens), ll.set_index(["model", "mode", "item_id"])["correct"] if not ll.empty else None
    for annotator, f in flagged.groupby("annotator", sort=True):
        bad = set(f.loc[f["flagged"], "item_id"])
        judged = set(f["item_id"])
        for key, g in gens[gens["item_id"].isin(judged)].groupby(CONDITION, sort=True):
            row = dict(zip(CONDITION, key)) | {"annotator": annotator}
            for part, ids in (("all_implausible", bad), ("other", judged - bad)):
                sub = g[g["item_id"].isin(ids)]
                row[f"n_{part}"] = int(sub["item_id"].nunique())
                row[f"generation_{part}"] = float(sub["right"].mean()) if len(sub) else float("nan")
                lookup = [(key[0], key[3], i) for i in sorted(ids)]
                have = [x for x in lookup if ll_by is not None and x in ll_by.index]
                row[f"loglikelihood_{part}"] = float(ll_by.loc[have].mean()) if have else float("nan")
            rows.append(row)
    return pd.DataFrame(rows)


# --- paired tests --------------------------------------------------------------------------------

def _paired_test(a: pd.DataFrame, b: pd.DataFrame | pd.Series, alternative: str, n_resamples: int,
                 seed: int, confidence: float) -> dict:
    """a: items x seeds correctness; b: the same shape, or per-item correctness (log-likelihood).
    Exact sign test on the items' seed-averaged correctness (with one seed: exact McNemar) and
    a bootstrap interval of the difference resampling items and seeds."""
    if isinstance(b, pd.Series):  # one prediction per item: the same under every seed
        b = pd.DataFrame({s: b for s in a.columns})
    ids, seeds = a.index.intersection(b.index), a.columns.intersection(b.columns)
    a, b = a.loc[ids, seeds].to_numpy(float), b.loc[ids, seeds].to_numpy(float)
    diff, mean_a, mean_b = a - b, a.mean(axis=1), b.mean(axis=1)
    test = sign_test(mean_a, mean_b, alternative=alternative)
    boot = seed_bootstrap(diff, n_resamples=n_resamples, seed=seed, confidence=confidence) if diff.size else {"ci_low": float("nan"),
                                                                                       "ci_high": float("nan")}
    return {"n_items": len(ids), "seeds": len(seeds), "acc_a": float(mean_a.mean()) if len(ids) else float("nan"),
            "acc_b": float(mean_b.mean()) if len(ids) else float("nan"), "difference": test["difference"],
            "items_a_better": test["a_better"], "items_b_better": test["b_better"], "p_sign": test["p"],
            "boot_ci_low": boot["ci_low"], "boot_ci_high": boot["ci_high"]}


def _family(rows: list[dict], alpha: float, test: str) -> dict:
    adj = corrected([r["p_sign"] for r in rows], alpha)
    for r, h, b in zip(rows, adj["holm"], adj["bonferroni"]):
        r.update(p_holm=h, p_bonferroni=b)
    return {"test": test, "rows": rows}


TEST = ("exact sign test on per-item accuracy averaged over seeds (exact McNemar with one seed), "
        "{sides}; {level} bootstrap interval resampling items and seeds")


def generation_comparisons(gens: pd.DataFrame, ll: pd.DataFrame, modes, *, n_resamples: int = 2000, seed: int = 0,
                           alpha: float = 0.05) -> dict:
    """Three families of paired tests, each corrected with Holm and Bonferroni:

    - templates: every pair of templates per (model, settings, mode), two-sided;
    - generation_vs_loglikelihood: per condition, generation (a) against the same model's
      log-likelihood prediction (b) in the same mode, two-sided;
    - modes: every mode pair per (model, template, settings); one-sided a > b when a is full
      (the context should help), else two-sided -- as for log-likelihood in ``comparisons``.
    """
    g = scored(gens)
    matrices = {key: correctness_matrix(sub) for key, sub in g.groupby(CONDITION, sort=True)}
    confidence = 1 - alpha
    two = TEST.format(sides="two-sided", level=level(alpha))
    templates = []
    for (model, settings, mode), keys in itertools.groupby(
            sorted(matrices, key=lambda k: (k[0], k[2], k[3], k[1])), key=lambda k: (k[0], k[2], k[3])):
        for ka, kb in itertools.combinations(list(keys), 2):
            templates.append({"model": model, "settings": settings, "mode": mode, "template_a": ka[1],
                              "template_b": kb[1], **_paired_test(matrices[ka], matrices[kb], "two-sided",
                                                                  n_resamples, seed, confidence)})
    versus = []
    if not ll.empty:
        ll_by = {k: s.set_index("item_id")["correct"].astype(float) for k, s in ll.groupby(["model", "mode"])}
        for key, m in matrices.items():
            if (key[0], key[3]) in ll_by:
                versus.append(dict(zip(CONDITION, key)) | _paired_test(m, ll_by[(key[0], key[3])], "two-sided",
                                                                        n_resamples, seed, confidence))
    mode_rows = []
    present = [m for m in modes if m in set(g["mode"])]
    for a, b in mode_pairs(present):
        alternative = "greater" if a == "full" else "two-sided"
        rows = []
        for (model, template, settings) in sorted({k[:3] for k in matrices}):
            ka, kb = (model, template, settings, a), (model, template, settings, b)
            if ka in matrices and kb in matrices:
                rows.append({"model": model, "template": template, "settings": settings, "mode_a": a, "mode_b": b,
                             "alternative": alternative,
                             **_paired_test(matrices[ka], matrices[kb], alternative, n_resamples, seed, confidence)})
        if rows:
            mode_rows.append(_family(rows, alpha, TEST.format(sides="one-sided (a > b)" if alternative == "greater"
                                                               else "two-sided", level=level(alpha))) | {"mode_a": a, "mode_b": b})
    return {"alpha": alpha, "n_resamples": n_resamples, "seed": seed,
            "templates": _family(templates, alpha, two),
            "generation_vs_loglikelihood": _family(versus, alpha, two),
            "modes": mode_rows}
