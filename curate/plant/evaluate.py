"""`curate plant evaluate`: how well each detector ranks the planted items, measured with the key.

A detector is a score per item, higher meaning more likely broken: the item-validity scores
(``curate.validity.suspects``) and the two-best baseline, every annotator's flag (1 flagged, 0
not), and every filter stage's match (1 matched, 0 not). For each planted kind, the items of that
kind are the positives and the unplanted items the negatives (items of other kinds are left
out); ``all`` takes every planted item, when more than one kind was planted. With k the number
planted of the kind:

- precision@k: the share of the k highest-ranked items that are planted; ties at the cut count
  by their share of positives (the expected value under a random order of the tied items), so a
  yes/no detector is measured as fairly as a continuous one;
- recall@k: the share of the planted items among those k (equal to precision@k, since k is the
  number planted; both are printed, as the field reports both);
- AUROC: the chance a planted item scores above an unplanted one (ties count half), from
  scipy's Mann-Whitney U.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import schemas
from curate.core.errors import CurateError, InputError
from curate.plant import KINDS
from curate.plant.build import OLD_KEY_FORMATS, items_digest, key_digest
from curate.plant.options import EVALUATE_DEFAULTS as D
from curate.items.store import Workspace

COLUMNS = ("detector", "source", "kind", "k", "precision_at_k", "recall_at_k", "auroc", "unplanted_above", "n")
#: Annotation measures that say an item is good, not broken: no detector.
NOT_PROBLEMS = ("high_quality",)


def hits_at_k(scores: np.ndarray, positive: np.ndarray, k: int) -> float:
    """Expected number of positives among the ``k`` highest ``scores`` (NaN ranks lowest), the
    items tied at the cut taken in a random order."""
    scores = np.where(np.isnan(scores), -np.inf, scores.astype(float))
    if k <= 0:
        return 0.0
    cut = np.sort(scores)[::-1][min(k, len(scores)) - 1]
    above, tied = scores > cut, scores == cut
    return float(positive[above].sum() + (min(k, len(scores)) - above.sum()) * positive[tied].mean())


def auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    """P(a positive scores above a negative), ties half (NaN ranks lowest); NaN without both."""
    from scipy.stats import mannwhitneyu

    scores = np.where(np.isnan(scores), -np.inf, scores.astype(float))
    pos, neg = scores[positive], scores[~positive]
    if not len(pos) or not len(neg):
        return float("nan")
    if np.isinf(scores).any():  # ranks only matter: put -inf below every finite value
        finite = scores[np.isfinite(scores)]
        low = (finite.min() if len(finite) else 0.0) - 1.0
        pos, neg = np.where(np.isinf(pos), low, pos), np.where(np.isinf(neg), low, neg)
    return float(mannwhitneyu(pos, neg, alternative="two-sided").statistic / (len(pos) * len(neg)))


def measure(detectors: dict[str, tuple[str, pd.Series]], key: pd.DataFrame, item_ids: list[str]) -> pd.DataFrame:
    """One row per (detector, kind) and for ``all``: the columns of ``COLUMNS``. ``detectors``:
    name -> (source, item_id -> score); ``key``: the planted rows (item_id, kind)."""
    kind_of = dict(zip(key["item_id"], key["kind"]))
    kinds = [k for k in KINDS if k in set(kind_of.values())]
    kinds += ["all"] if len(kinds) > 1 else []
    planted = np.array([i in kind_of for i in item_ids])
    rows = []
    for name, (source, series) in detectors.items():
        values = series.reindex(item_ids).to_numpy(dtype=float)
        for kind in kinds:
            positive = planted if kind == "all" else np.array([kind_of.get(i) == kind for i in item_ids])
            pool = positive | ~planted
            k = int(positive.sum())
            hits = hits_at_k(values[pool], positive[pool], k)
            rows.append({"detector": name, "source": source, "kind": kind, "k": k, "precision_at_k": hits / k,
                         "recall_at_k": hits / k, "auroc": auroc(values[pool], positive[pool]),
                         "unplanted_above": k - hits, "n": int(pool.sum())})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def read_key(path, root, items: list[dict]) -> pd.DataFrame:
    """The key's planted rows, refused (one line each) when it was written before keys carried a
    digest, belongs to another workspace, plants nothing, names an item the workspace lacks, or
    no longer matches its own digest (edited since `curate plant` wrote it). ``items``: those of
    the workspace ``root``."""
    from curate.core.reading import read_json

    key = read_json(path, "a plant-key file", missing="key file not found")
    if isinstance(key, dict) and key.get("format") in OLD_KEY_FORMATS:
        raise InputError(f"written by an earlier `curate plant` ({key['format']}), before keys carried a digest of "
                         f"what they plant; re-plant from the original workspace", path=str(path))
    problems = schemas.errors("plant-key", key)
    if problems:
        field, _, message = problems[0].partition(": ")
        raise InputError(message, path=str(path), field=field)
    if key["items_digest"] != items_digest(items):
        raise CurateError(f"{path}: this key belongs to another workspace (planted into {key['workspace']}); the "
                          f"items of {root} are not the ones it was written for")
    if not key["planted"]:
        raise InputError("has no plants: nothing to measure", path=str(path), field="planted")
    ids = {it["item_id"] for it in items}
    for n, row in enumerate(key["planted"]):
        if row["item_id"] not in ids:
            raise InputError(f"item {row['item_id']!r} is not in {root}", path=str(path), field=f"planted/{n}/item_id")
    if key["key_digest"] != key_digest(key):
        raise InputError("does not match its digest: the key was edited after `curate plant` wrote it; use the key "
                         "as written, or re-plant", path=str(path), field="key_digest")
    return pd.DataFrame(key["planted"], columns=["item_id", "row_index", "kind"])


def evaluate_workspace(root, key, *, decisions=(), mode: str = D["mode"],
                       normalization: str | None = D["normalization"],
                       fewshot: int | None = D["fewshot"]) -> tuple[pd.DataFrame, list[str]]:
    """The table for every detector of workspace ``root`` (and of the `curate filter` output
    folders ``decisions``), measured with ``key``; and notes on what was not measured. The score
    detectors read the scores ``curate.validity.item_table.choose`` picks (``fewshot``: that
    shot count)."""
    from scoring.store import open_scores

    notes: list[str] = []
    with open_scores(root) as ws:  # opened once: the key's check, the scores and the annotations
        items = ws.items()
        planted = read_key(key, root, items)
        detectors = score_detectors(ws, items, mode=mode, normalization=normalization, fewshot=fewshot, notes=notes)
        detectors |= annotator_detectors(ws, items, notes=notes)
    for folder in decisions:
        detectors |= filter_detectors(Path(folder), items)
    if not detectors:
        raise CurateError(f"{root}: holds no scores, annotations or filter decisions to evaluate; score it "
                          f"(`curate score`), annotate it, or give --decisions")
    return measure(detectors, planted, [it["item_id"] for it in items]), notes


def score_detectors(ws: Workspace, items: list[dict], *, mode: str, normalization, fewshot: int | None = None,
                    notes: list[str]) -> dict:
    """The item-validity scores (the default ranking, suspect_score, with every verdict the
    workspace holds pooled in) and the two-best baseline, from the models' scores in ``mode`` (a
    workspace opened with ``scoring.store.open_scores``), as item validity chooses them."""
    from curate.validity.item_table import choose, stored_conditions, with_verdicts, workspace_table
    from curate.validity.suspects import two_best_baseline

    choice = choose(stored_conditions(ws), ws.meta("formulation", "cloze"), mode=mode, fewshot=fewshot)
    if choice.fewshot not in choice.fewshots:
        notes.append(f"no scores in mode {mode} ({choice.formulation}, {choice.fewshot}-shot): no score detectors")
        return {}
    from annotate.verdict_store import all_verdicts

    responses, table, _ = workspace_table(ws, mode=mode, formulation=choice.formulation, fewshot=choice.fewshot,
                                          normalization=normalization, items=items)
    table = with_verdicts(table, all_verdicts(ws, items))
    if choice.other_fewshots:
        notes.append(f"the score detectors read the {choice.fewshot}-shot scores; also stored: "
                     + ", ".join(f"{k}-shot" for k in choice.other_fewshots) + " (--fewshot K)")
    if responses.left_out:
        notes.append(f"{len(responses.left_out)} items without every model's scores rank lowest on the score "
                     f"detectors (first: {responses.left_out[0]})")
    table = table.set_index("item_id")
    out = {name: ("scores", table[name].astype(float))
           for name in ("suspect_score", "label_error_score", "several_correct_score", "no_right_answer_score")}
    out["two_best_baseline"] = ("scores", two_best_baseline(responses).astype(float))
    return out


def annotator_detectors(ws: Workspace, items: list[dict], *, notes: list[str]) -> dict:
    """One detector per (annotator, measure) flag; an item the annotator did not judge is not flagged."""
    from annotate.flags import item_flags
    from annotate.store import MIGRATIONS, read_annotations

    ws.migrate(MIGRATIONS)  # the annotation tables, as open_annotations makes them
    round1, round2 = read_annotations(ws, round=1), read_annotations(ws, round=2)
    if round1.empty and round2.empty:
        notes.append("no annotations: no annotator detectors")
        return {}
    gold = pd.Series({it["item_id"]: it["gold"] for it in items})
    flags = item_flags(round1, round2, gold)
    flags = flags[~flags["measure"].isin(NOT_PROBLEMS)]
    out = {}
    for (annotator, measure_), part in flags.groupby(["annotator", "measure"], sort=True):
        out[f"{annotator}: {measure_}"] = ("annotator", part.groupby("item_id")["flagged"].max().astype(float)
                                           .reindex(gold.index, fill_value=0.0))
    return out


def filter_detectors(folder: Path, items: list[dict]) -> dict:
    """One detector per stage of a `curate filter` output folder: matched or not."""
    from curate.demo import load_decisions

    frame, stages = load_decisions(folder)
    if sorted(frame["item_id"]) != sorted(it["item_id"] for it in items):
        raise CurateError(f"{folder}: these filter decisions are not on this workspace's items; run `curate filter` "
                          f"on the planted workspace")
    matched = frame.set_index("item_id")["matched"]
    return {f"filter {folder.name}: {stage}": ("filter", matched.map(lambda m, s=stage: float(s in list(m))))
            for stage in stages}
