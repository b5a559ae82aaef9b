"""Review queues: which items a reviewer goes through, in which order.

A queue is named by a short spec, resolved against the workspace's data into an ordered list of
item ids (row order unless said otherwise). Membership depends only on the items, the scores, the
LLM annotators' records and the filter decisions, never on the reviewers' own verdicts, so a
queue does not shift under a reviewer while they work through it.

=====================  ==============================================================================
spec                   items
=====================  ==============================================================================
``removed``            removed by a filter decision (``--decisions``), any stage
``removed:STAGE``      removed by that stage (the first stage that matched them)
``disagree``           two LLM annotators with valid records disagree on any label (round 1) or
                       answer (round 2: best, worst, gold-not-best, any-equally-good, all-implausible)
``wrong``              every one of the strongest models (up to 3, by full-mode accuracy) is wrong in
                       full mode; ``wrong:K`` takes the K strongest
``duplicates``         in a pair found by the last `curate duplicates` search (any scope), the closest
                       pair first; ``duplicates:SCOPE`` (within, split, cross) keeps one scope
``min_k_pp``           the top 5% of items by Min-K%++ (k=20) of their own text under any text-scored
                       model, highest first; ``min_k_pp:MODEL`` under that model
``suspects``           models prefer another option: items whose label-error score (every model scored
                       in full mode, and every model's stored answers, ``curate.validity.suspects``) is
                       above the ``label_error`` filter
                       condition's default cut (odds of 9 to 1), likeliest first; ``suspects:N`` the N
                       highest, whatever their score. The scores read are the report's and the
                       filter's (``curate.validity.item_table.choose``); ``suspects:K-shot`` and
                       ``suspects:N:K-shot`` read the K-shot scores
``sample``             a seeded random sample for calibration: ``sample:N`` (default 50),
                       ``sample:N:SEED`` (default seed 0), in sampled order
``ids:FILE``           the item ids listed in FILE (one per line; ``#`` comments), in file order
``all``                every item
=====================  ==============================================================================
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from curate.core.errors import CurateError, InputError
from curate.core.reading import DOCUMENT_LIMIT, read_text
from curate.review.data import ReviewData

DEFAULT_SAMPLE, DEFAULT_STRONG = 50, 3


def resolve(data: ReviewData, spec: str, annotations: pd.DataFrame | None = None) -> list[str]:
    """The item ids of queue ``spec``; ``annotations`` (every record, as read_annotations
    returns) is needed for ``disagree`` only."""
    kind, _, arg = spec.partition(":")
    if kind == "all":
        return [it["item_id"] for it in data.items]
    if kind == "removed":
        return removed(data, arg or None)
    if kind == "disagree":
        return disagree(data, annotations if annotations is not None else pd.DataFrame())
    if kind == "wrong":
        return wrong(data, _int(arg, spec) if arg else DEFAULT_STRONG)
    if kind == "duplicates":
        return duplicates(data, arg or None)
    if kind == "min_k_pp":
        return min_k_pp(data, arg or None)
    if kind == "suspects":
        return suspects(data, *_suspects_args(arg, spec))
    if kind == "sample":
        n, _, seed = arg.partition(":")
        return sample(data, _int(n, spec) if n else DEFAULT_SAMPLE, _int(seed, spec, 0) if seed else 0)
    if kind == "ids":
        if not arg:
            raise CurateError("queue ids:FILE needs a file of item ids")
        return id_list(data, Path(arg))
    raise CurateError(f"unknown queue {spec!r}; use removed, removed:STAGE, disagree, wrong, wrong:K, "
                      "duplicates, duplicates:SCOPE, min_k_pp, min_k_pp:MODEL, suspects, suspects:N, suspects:K-shot, "
                      "suspects:N:K-shot, sample, sample:N, sample:N:SEED, ids:FILE or all")


def _int(text: str, spec: str, minimum: int = 1) -> int:
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise CurateError(f"queue {spec!r}: {text!r} is not a whole number >= {minimum}")
    return value


def removed(data: ReviewData, stage: str | None) -> list[str]:
    if not data.decisions:
        raise CurateError("queue 'removed' needs the filter's decisions: pass --decisions DIR "
                          "(a `curate filter --out` folder)")
    names = {s["stage"] for d in data.decisions for s in d.stages}
    if stage is not None and stage not in names:
        raise CurateError(f"no filter stage {stage!r} in the decisions; stages: {', '.join(sorted(names))}")
    gone = set()
    for d in data.decisions:
        frame = d.frame[~d.frame["kept"].astype(bool)]
        if stage is not None:
            frame = frame[frame["first_stage"] == stage]
        gone.update(frame.index)
    return [it["item_id"] for it in data.items if it["item_id"] in gone]


def disagree(data: ReviewData, annotations: pd.DataFrame) -> list[str]:
    """Items where two LLM annotators' valid records differ on any agreement facet."""
    from annotate.agreement import facets
    from curate.review.verdicts import is_human

    if annotations.empty:
        return []
    llm = annotations[(annotations["status"] == "valid") & ~annotations["annotator"].map(is_human)]
    differing = set()
    for (rnd, item_id), group in llm.groupby(["round", "item_id"]):
        if group["annotator"].nunique() < 2:
            continue
        gold = data.by_id[item_id]["gold"]
        seen = {tuple(sorted(facets(r, int(rnd), gold).items())) for r in group["result"]}
        if len(seen) > 1:
            differing.add(item_id)
    return [it["item_id"] for it in data.items if it["item_id"] in differing]


def strongest(data: ReviewData, k: int) -> tuple[list[str], pd.DataFrame]:
    """The k models with the highest full-mode accuracy, and their full-mode predictions."""
    full = data.scores[data.scores["mode"] == "full"] if not data.scores.empty else data.scores
    if full.empty:
        raise CurateError("queue 'wrong' needs full-mode scores; score or import some first")
    preds = data.predictions(full)
    preds["correct"] = preds["pred"].to_numpy() == preds["item_id"].map(
        {i: it["gold"] for i, it in data.by_id.items()}).to_numpy()
    accuracy = preds.groupby("model")["correct"].mean().sort_values(ascending=False, kind="stable")
    return list(accuracy.index[:k]), preds


def wrong(data: ReviewData, k: int) -> list[str]:
    models, preds = strongest(data, k)
    strong = preds[preds["model"].isin(models)]
    counts = strong.groupby("item_id").agg(n=("correct", "size"), right=("correct", "sum"))
    all_wrong = set(counts.index[(counts["n"] == len(models)) & (counts["right"] == 0)])
    return [it["item_id"] for it in data.items if it["item_id"] in all_wrong]


def _suspects_args(arg: str, spec: str) -> tuple[int | None, int | None]:
    """(N, K) of ``suspects[:N][:K-shot]``."""
    parts = arg.split(":") if arg else []
    fewshot = None
    if parts and parts[-1].endswith("-shot"):
        fewshot = _int(parts.pop()[:-len("-shot")], spec, 0)
    if len(parts) > 1:
        raise CurateError(f"queue {spec!r}: use suspects, suspects:N, suspects:K-shot or suspects:N:K-shot")
    return (_int(parts[0], spec) if parts else None), fewshot


def suspect_table(data: ReviewData, fewshot: int | None = None) -> pd.DataFrame:
    """Every item's suspect score (the models' evidence with every verdict the workspace holds
    pooled in: judges', reviewers', the annotators'), suspected option and evidence, likeliest
    first, from the full-mode scores item validity reads (``curate.validity.item_table.choose``;
    ``fewshot``: that shot count), which may be k-shot scores the review's 0-shot ``data.scores``
    do not hold. Computed once per shot count: the queue and its item pages read the same table."""
    from annotate.verdict_store import all_verdicts
    from curate.validity.item_table import with_verdicts, workspace_table
    from scoring.store import open_scores

    key = ("suspects", fewshot)
    if key not in data.derived:
        with open_scores(data.root) as ws:
            try:
                _, found, _ = workspace_table(ws, fewshot=fewshot, items=data.items,
                                              preferred_normalization=data.normalization)
                found = with_verdicts(found, all_verdicts(ws, data.items))
            except CurateError as exc:
                raise CurateError(f"queue 'suspects' needs full-mode scores: {exc}") from None
        data.derived[key] = found.sort_values("suspect_score", ascending=False, kind="stable")
    return data.derived[key]


def suspects(data: ReviewData, top: int | None, fewshot: int | None = None) -> list[str]:
    """Likely broken items, likeliest first (Platinum-style: review the surest errors first): the
    items the ranking makes suspects (``curate.validity.suspects.CUTS``), or the ``top`` highest
    suspect scores (``suspect_table``)."""
    found = suspect_table(data, fewshot)
    if top is not None:
        return found["item_id"].head(top).tolist()
    return found.loc[found["suspect"], "item_id"].tolist()


def reasons(data: ReviewData, spec: str) -> dict[str, dict]:
    """Why queue ``spec`` holds each of its items, where the item's page would not show it
    otherwise: for ``suspects`` queues, item id -> its suspect score, what it rests on, its
    label-error score, suspected option and evidence (``suspect_table``); empty for every other
    queue (a removed item's filter stages are on its page already)."""
    kind, _, arg = spec.partition(":")
    if kind != "suspects":
        return {}
    top, fewshot = _suspects_args(arg, spec)
    table = suspect_table(data, fewshot).set_index("item_id")
    return {i: {"suspect_score": float(table.at[i, "suspect_score"]), "suspect_basis": table.at[i, "suspect_basis"],
                "label_error_score": float(table.at[i, "label_error_score"]),
                "suspected_option": int(table.at[i, "suspected_option"]), "evidence": table.at[i, "evidence"]}
            for i in suspects(data, top, fewshot)}


def duplicates(data: ReviewData, scope: str | None) -> list[str]:
    """The workspace's items in a duplicate pair, closest pair first (each item once, at its
    closest pair), so a reviewer sees the surest copies first."""
    from curate.items.duplicates import store
    from curate.items.store import Workspace

    scopes = ("within", "split", "cross")
    if scope is not None and scope not in scopes:
        raise CurateError(f"queue 'duplicates:{scope}': the scope is one of {', '.join(scopes)}")
    with Workspace.open(data.root) as ws:
        if ws.meta("duplicates") is None or "duplicate_pairs" not in ws.tables():
            raise CurateError(f"queue 'duplicates' needs a duplicate search: run `curate duplicates {data.root}` first")
        records = store.records(ws)  # closest first
    out: dict[str, None] = {}
    for r in records:
        if scope is None or store.scope_of(r) == scope:
            for item_id, collection in ((r["item_a"], r["collection_a"]), (r["item_b"], r["collection_b"])):
                if collection == "workspace":
                    out.setdefault(item_id)
    return list(out)


def min_k_pp(data: ReviewData, model: str | None, share: float = 0.05) -> list[str]:
    """Items in the top ``share`` by Min-K%++ (k=20) under ``model`` (or any text-scored model),
    each once at its highest score, highest first: the likeliest memorised items first."""
    from curate.items.store import Workspace
    from scoring.text_store import text_scores

    with Workspace.open(data.root) as ws:
        frame = text_scores(ws)
    if model is not None:
        if model not in set(frame["model"]):
            raise CurateError(f"queue 'min_k_pp:{model}': no text scores of {model!r}; text-scored models: "
                              f"{', '.join(sorted(frame['model'].unique())) or 'none'}")
        frame = frame[frame["model"] == model]
    if frame.empty:
        raise CurateError(f"queue 'min_k_pp' needs text scores: run `curate text-scores {data.root} --model M` first")
    cut = frame.groupby("model")["min_kpp_20"].transform(lambda v: v.quantile(1 - share, interpolation="higher"))
    top = frame[frame["min_kpp_20"] >= cut].sort_values("min_kpp_20", ascending=False, kind="stable")
    return list(dict.fromkeys(top["item_id"]))


def has_text_scores(data: ReviewData) -> bool:
    from curate.items.store import Workspace
    from scoring.text_store import text_scores

    with Workspace.open(data.root) as ws:
        return not text_scores(ws).empty


def has_duplicate_search(data: ReviewData) -> bool:
    from curate.items.store import Workspace

    with Workspace.open(data.root) as ws:
        return ws.meta("duplicates") is not None


def sample(data: ReviewData, n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(data.items), size=min(n, len(data.items)), replace=False)
    return [data.items[i]["item_id"] for i in picks]


def id_list(data: ReviewData, path: Path) -> list[str]:
    lines = read_text(path, DOCUMENT_LIMIT, "a list of item ids").splitlines()
    out, seen = [], set()
    for n, line in enumerate(lines, start=1):
        item_id = line.split("#", 1)[0].strip()
        if not item_id:
            continue
        if item_id not in data.by_id:
            raise InputError(f"{item_id!r} is not an item of this workspace", path=str(path), row=n, field="item_id")
        if item_id not in seen:
            out.append(item_id)
            seen.add(item_id)
    return out


def available(data: ReviewData, annotations: pd.DataFrame) -> list[dict]:
    """The queues this workspace can fill, with their sizes (for the app's queue list)."""
    out = [{"name": "all", "items": len(data.items), "about": "every item"}]
    if data.decisions:
        out.append({"name": "removed", "items": len(removed(data, None)), "about": "removed by a filter decision"})
        for d in data.decisions:
            for s in d.stages:
                out.append({"name": f"removed:{s['stage']}", "items": int(s["removed_here"]),
                            "about": s.get("description") or s["stage"]})
    out.append({"name": "disagree", "items": len(disagree(data, annotations)), "about": "LLM annotators disagree"})
    if data.normalization is not None and (data.scores["mode"] == "full").any():
        models, _ = strongest(data, DEFAULT_STRONG)
        out.append({"name": "wrong", "items": len(wrong(data, DEFAULT_STRONG)),
                    "about": f"wrong in full mode for all of {', '.join(models)}"})
    if has_duplicate_search(data):
        out.append({"name": "duplicates", "items": len(duplicates(data, None)),
                    "about": "in a duplicate pair, closest first"})
    if has_text_scores(data):
        out.append({"name": "min_k_pp", "items": len(min_k_pp(data, None)),
                    "about": "top 5% by Min-K%++ of the item's own text (suspected memorised)"})
    out.append({"name": "sample", "items": min(DEFAULT_SAMPLE, len(data.items)),
                "about": "random sample (seed 0) for calibration"})
    return out
