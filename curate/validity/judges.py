"""Verdicts on items pooled with the models' evidence: LLM judges, another audit's labels,
reviewers, the annotators.

A verdict says an item is broken (``BROKEN``: error, wrong-key, several-correct,
no-right-answer, unclear) or ``ok``. No label says which judge to trust, so a judge's (or an
annotator's) weight is its agreement with the models' evidence: the correlation, over the items
it judged, between its verdicts (1 broken, 0 ok) and the models' ranking, shrunk toward
``PRIOR_WEIGHT`` while it has judged few items (``PRIOR_ITEMS``); one that disagrees with the
models gets weight 0, never a negative one. A person's verdict in ``curate review`` is what the
ranking tries to predict, so it is taken as it is, with ``REVIEWER_WEIGHT``.

    x_j       = logit((rank_j - 1/2) / n)         the models' ranking as the log-odds of its quantile
    suspect_j = x_j + sum_k W_k (v_kj - c_k)      W_k = VERDICT_WEIGHT * w_k (judges), REVIEWER_WEIGHT

A source's several verdicts on one item count as their share of broken (v between 0 and 1).
``c_k``: a judge's own rate of calling items broken (a judge that calls half the items broken
says less by each call, and judged items stay on the scale of unjudged ones); a reviewer's
verdict is read at face value (``c = 1/2``: a confirmed error moves an item up by
``REVIEWER_WEIGHT / 2``, near the top of any benchmark, a cleared one as far down). Items no
source judged keep their order. Measured on MMLU-Redux's dev split (seven 2024 LLM judges on 398
items; benchmarks/real_errors.py, docs/item-validity.md): AUROC on the judged items 0.760 without
the verdicts, 0.770 with them, where a logistic regression fitted on the experts' labels
themselves reached 0.768 (five-fold): the judges add what they can.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import logit
from scipy.stats import rankdata

#: Verdicts that say an item is broken; ``OK`` says it is not.
BROKEN = ("error", "wrong-key", "several-correct", "no-right-answer", "unclear")
OK = "ok"
VERDICTS = (OK, *BROKEN)
#: How many items' worth of prior a source's weight starts from.
PRIOR_ITEMS = 20
#: A judge's weight before its agreement is known (an LLM judge of 2024 flags with precision 0.2-0.6).
PRIOR_WEIGHT = 0.3
#: A reviewer's verdict, in the models' log-odds of quantile: people confirm or clear what was flagged.
#: It moves an item by 10 either way, from the middle of 14042 items to their top (the ranking's
#: log-odds run from -10.2 to 10.2 there).
REVIEWER_WEIGHT = 20.0
#: How much a judge's agreement-weighted verdict moves an item (dev split's judged items, AUROC:
#: 0.770 at 0.5, 0.768 at 1, 0.762 at 2; 0.760 without verdicts).
VERDICT_WEIGHT = 0.5
#: Columns of a verdicts frame (``annotate.verdict_store.all_verdicts``): ``kind`` is ``judge``
#: (imported), ``reviewer`` or ``annotator``.
COLUMNS = ("source", "kind", "item_id", "verdict", "answer")


def quantile_log_odds(score: np.ndarray) -> np.ndarray:
    """logit((rank - 1/2) / n) of each score (ties share their mean rank)."""
    return logit((rankdata(score) - 0.5) / len(score))


def reliability(x: np.ndarray, item_ids, verdicts: pd.DataFrame) -> pd.DataFrame:
    """One row per source: kind, items judged, items called broken, its agreement with the models'
    evidence ``x`` (NaN where either does not vary), its weight ``W`` and its centre ``c``."""
    index = pd.Index(item_ids)
    rows = []
    for (source, kind), group in per_item(verdicts).groupby(["source", "kind"], sort=True):
        at = index.get_indexer(group["item_id"])
        keep = at >= 0
        v = group["broken"].to_numpy(float)[keep]
        xs = x[at[keep]]
        agreement = float(np.corrcoef(v, xs)[0, 1]) if len(v) > 2 and v.std() > 0 and xs.std() > 0 else np.nan
        n = len(v)
        if kind == "reviewer":
            weight, centre = REVIEWER_WEIGHT, 0.5
        else:
            shrunk = (n * max(np.nan_to_num(agreement), 0.0) + PRIOR_ITEMS * PRIOR_WEIGHT) / (n + PRIOR_ITEMS)
            weight, centre = VERDICT_WEIGHT * shrunk, (v.sum() + 1) / (n + 2)
        rows.append({"source": source, "kind": kind, "items": n, "broken": float(v.sum()),
                     "agreement": agreement, "weight": weight, "centre": centre})
    return pd.DataFrame(rows, columns=["source", "kind", "items", "broken", "agreement", "weight", "centre"])


def per_item(verdicts: pd.DataFrame) -> pd.DataFrame:
    """One row per (source, kind, item): ``broken``, the share of its verdicts there that say broken."""
    return (verdicts.assign(broken=verdicts["verdict"].isin(BROKEN).astype(float))
            .groupby(["source", "kind", "item_id"], sort=True, as_index=False)["broken"].mean())


def pool(score: np.ndarray, item_ids, verdicts: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """(the pooled score, per item the verdicts' weighted sum, ``reliability``'s table): ``score``
    (the models' ranking, higher = more likely broken) with the verdicts on the items pooled in."""
    x = quantile_log_odds(np.asarray(score, dtype=float))
    table = reliability(x, item_ids, verdicts)
    evidence = np.zeros(len(x))
    if len(table):
        index = pd.Index(item_ids)
        params = table.set_index(["source", "kind"])
        votes = per_item(verdicts)
        at = index.get_indexer(votes["item_id"])
        keep = at >= 0
        rows = votes[keep]
        key = pd.MultiIndex.from_frame(rows[["source", "kind"]])
        weight = params["weight"].reindex(key).to_numpy(float)
        centre = params["centre"].reindex(key).to_numpy(float)
        np.add.at(evidence, at[keep], weight * (rows["broken"].to_numpy(float) - centre))
    return x + evidence, evidence, table
