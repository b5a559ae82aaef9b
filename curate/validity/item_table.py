"""Every item's statistics and suspect scores in one table (``item_stats`` and ``suspects``
joined), as the report's "Items most likely broken", the filter's item-validity conditions, the
``suspects`` review queue, ``curate export WORKSPACE item-stats`` and ``curate plant evaluate``
all read it.

Which scores they read is decided here, once (``choose``): the mode each caller names (full by
default); the formulation named, else the workspace's own (its meta ``formulation``) when it has
scores in it, else the first one scored (cloze, then letters); the shot count named, else the one
with the most models (ties: the fewest shots), so a workspace holding only imported 5-shot
samples gets item validity from them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from curate.validity.item_stats import item_statistics
from curate.validity.responses import Responses, answers_matrix, join_answers, response_matrix
from curate.validity.suspects import suspects
from curate.core.errors import CurateError

#: The columns of ``curate export WORKSPACE item-stats``.
COLUMNS = ["item_id", "row_index", "suspect_score", "suspect", "suspect_basis", "verdict_evidence", "difficulty", "discrimination", "irt_a", "irt_b", "irt_a_se", "irt_b_se", "infit",
           "outfit", "easy", "label_error_score", "suspected_option", "preference_discrimination",
           "several_correct_score", "no_right_answer_score", "unparsed_answers",
           "mode", "formulation", "fewshot", "normalization", "models", "answer_models", "set_apart"]

@dataclass(frozen=True)
class Choice:
    """The scores item validity reads: one mode, formulation and shot count; ``fewshots``: every
    shot count stored in that mode and formulation (the chosen one among them when it is stored)."""
    mode: str
    formulation: str
    fewshot: int
    fewshots: tuple[int, ...] = ()

    @property
    def other_fewshots(self) -> list[int]:
        return [k for k in self.fewshots if k != self.fewshot]


def pick_fewshot(models_by_shot: Mapping[int, Iterable[str]]) -> int:
    """The rule for the shot count item validity reads when none is named: the one with the most
    models (ties: the fewest shots); 0 when nothing is scored."""
    counts = {int(k): len(set(models)) for k, models in models_by_shot.items()}
    return min(counts, key=lambda k: (-counts[k], k)) if counts else 0


def pick_formulation(workspace_formulation: str, present: Iterable[str]) -> str:
    """The workspace's own formulation when it has scores in it, else the first scored one that
    is not a rotation (cloze, then letters), as the report's primary formulation."""
    from curate.items.formulations import parse

    def order(name):
        try:
            kind, rotation = parse(name)
        except CurateError:
            return (2, 0, name)
        return (0 if kind == "cloze" else 1, rotation, name)

    present = sorted({f for f in present if order(f)[1] == 0}, key=order)
    return workspace_formulation if workspace_formulation in present or not present else present[0]


def choose(present: pd.DataFrame, workspace_formulation: str, *, mode: str = "full", formulation: str | None = None,
           fewshot: int | None = None, models=None) -> Choice:
    """Which scores item validity reads (the report, the filter, the review queue, the export and
    plant evaluate all call this). ``present``: rows with model, mode, formulation and fewshot (a
    ``read_scores`` frame or ``stored_conditions``); ``models``: count only these."""
    rows = present[present["mode"] == mode]
    if models is not None:
        rows = rows[rows["model"].isin(list(models))]
    if "formulation" not in rows.columns:  # frames from before the formulation axis
        rows = rows.assign(formulation="cloze")
    formulation = formulation or pick_formulation(workspace_formulation, rows["formulation"].unique())
    rows = rows[rows["formulation"] == formulation]
    shots = rows["fewshot"].astype(int) if "fewshot" in rows.columns else pd.Series(0, index=rows.index)
    by_shot = {int(k): set(group) for k, group in rows["model"].groupby(shots.to_numpy())}
    chosen = pick_fewshot(by_shot) if fewshot is None else int(fewshot)
    return Choice(mode, formulation, chosen, tuple(sorted(by_shot)))


def stored_conditions(ws) -> pd.DataFrame:
    """The distinct (model, mode, formulation, fewshot) of a workspace's scores (opened with
    ``scoring.store.open_scores``; none without a score table): what ``choose`` needs, without
    reading the scores."""
    if "scores" not in ws.tables():
        return pd.DataFrame(columns=["model", "mode", "formulation", "fewshot"])
    return pd.read_sql_query("SELECT DISTINCT model, mode, formulation, fewshot FROM scores", ws.conn)


def item_table(scores: pd.DataFrame, items: list[dict], *, models=None, mode: str = "full",
               formulation: str = "cloze", normalization: str | None = None,
               fewshot: int = 0, answers: pd.DataFrame | None = None) -> tuple[Responses, pd.DataFrame]:
    """The response matrix and one row per item it holds (row order): item statistics, then the
    suspect scores and their evidence (of the ``fewshot``-shot scores). ``answers`` (a
    ``scoring.answers.read_answers`` frame): the models that only answer join the matrix
    (``curate.validity.responses.join_answers``); with no scores, they make it alone. Verdicts
    join afterwards (``with_verdicts``), read by whoever can read them (a higher layer)."""
    named = models is not None  # models named by the caller are read whatever they cover
    if models is not None and answers is not None:  # the named models that only answer
        only = set(answers["model"]) - set(scores["model"] if "model" in scores.columns else ())
        models = [m for m in models if m not in only] or None
        scores = scores if models else scores.iloc[:0]
    if scores.empty and answers is not None and not answers.empty:
        responses = answers_matrix(answers, items, mode=mode, coverage=not named)
    else:
        responses = join_answers(response_matrix(scores, items, models=models, mode=mode, formulation=formulation,
                                                 normalization=normalization, fewshot=fewshot), answers,
                                 coverage=not named)
    stats = item_statistics(responses)
    table = stats.merge(suspects(responses, stats), on="item_id", how="left")
    return responses, with_verdicts(table, None)


def with_verdicts(table: pd.DataFrame, verdicts: pd.DataFrame | None) -> pd.DataFrame:
    """``table`` with the verdicts on its items pooled into ``suspect_score`` (``verdict_evidence``:
    their weighted sum per item; 0 without verdicts), the basis naming them; as many items are
    ``suspect`` as the models alone made so, the highest pooled scores; each source's weight is in
    ``table.attrs["verdict_sources"]`` (``curate.validity.judges.reliability``)."""
    from curate.validity.judges import pool

    on_items = None if verdicts is None else verdicts[verdicts["item_id"].isin(set(table["item_id"]))]
    if on_items is None or on_items.empty:
        out = table.assign(verdict_evidence=0.0)
        out.attrs["verdict_sources"] = []
        return out
    score, evidence, sources = pool(table["suspect_score"].to_numpy(float), table["item_id"].to_numpy(), on_items)
    flagged = np.zeros(len(score), dtype=bool)
    flagged[np.argsort(-score, kind="stable")[:int(table["suspect"].sum())]] = True
    out = table.assign(suspect_score=score, verdict_evidence=evidence, suspect=flagged,
                       suspect_basis=table["suspect_basis"] + f" + verdicts of {len(sources)} sources")
    out.attrs["verdict_sources"] = sources.to_dict("records")
    return out


def stored_answers(ws, models=None) -> pd.DataFrame | None:
    """An open workspace's stored answers (``scoring.answers.read_answers``, read in ``ws``;
    ``models``: only theirs), None when it holds none. A workspace with neither answers nor
    generations is not touched (reading answers first puts their tables in place)."""
    from scoring.answers import answers_frame, prepare

    if not {"answers", "generations"} & ws.table_names():
        return None
    found = answers_frame(prepare(ws))
    if models is not None:
        found = found[found["model"].isin(list(models))]
    return found if len(found) else None


def answer_models(responses: Responses) -> str:
    """The models read from their answers alone, each with where the answers come from."""
    return ", ".join(f"{m} ({s})" for m, s, a in zip(responses.models, responses.sources or (), responses.answer_only)
                     if a)


def normalization_for(scores: pd.DataFrame, preferred: str | None) -> str | None:
    """``preferred`` (the report's and the review's primary normalization) when the chosen scores
    all have it, else None: their own primary one (k-shot imports may hold fewer normalizations)."""
    from scoring.normalize import primary_normalization

    try:
        return preferred and primary_normalization(scores, preferred)
    except CurateError:
        return None


def workspace_table(ws, *, mode: str = "full", formulation: str | None = None, fewshot: int | None = None,
                    normalization: str | None = None, models=None, items: list[dict] | None = None,
                    preferred_normalization: str | None = None) -> tuple[Responses, pd.DataFrame, Choice]:
    """``item_table`` of an open workspace (``scoring.store.open_scores``; ``items``: its items,
    when already read) under ``choose``'s choice, reading only the chosen scores; a one-line
    error when there are none. ``normalization`` must be there; ``preferred_normalization`` is
    used where it is (``normalization_for``)."""
    from scoring.store import read_scores

    choice = choose(stored_conditions(ws), ws.meta("formulation", "cloze"), mode=mode, formulation=formulation,
                    fewshot=fewshot, models=models)
    scores = read_scores(ws, models=list(models) if models else None, modes=[mode], formulations=[choice.formulation],
                         fewshots=[choice.fewshot])
    answers = stored_answers(ws, models)
    if scores.empty and answers is None:
        stored = ", ".join(f"{k}-shot" for k in choice.fewshots)
        raise CurateError(f"{ws.root}: no {mode}-mode {choice.formulation} {choice.fewshot}-shot scores"
                          + (f" (stored: {stored}; choose one with --fewshot)" if stored else "")
                          + "; item statistics need several models' scores (curate score or curate import-scores)")
    normalization = normalization or normalization_for(scores, preferred_normalization)
    responses, table = item_table(scores, ws.items() if items is None else items, models=models, mode=mode, formulation=choice.formulation,
                                  normalization=normalization, fewshot=choice.fewshot, answers=answers)
    return responses, table, choice


def records(workspace, *, fewshot: int | None = None, verdicts=None) -> list[dict]:
    """The item-stats export: the models scored in full mode that can be read together (the others
    named in ``set_apart``, ``curate.validity.responses``), the workspace's formulation, the primary
    normalization, the shot count ``choose`` picks (or ``fewshot``); ``models`` are those read from
    their probabilities, ``answer_models`` those read from their answers alone (with the source).
    ``verdicts(ws, items)``: the verdicts to pool in (``annotate.verdict_store.all_verdicts``; the
    export passes it: a lower layer cannot read them)."""
    from scoring.store import open_scores

    with open_scores(workspace) as ws:
        items = ws.items()
        responses, table, choice = workspace_table(ws, fewshot=fewshot, items=items)
        table = with_verdicts(table, verdicts(ws, items) if verdicts else None)
    rows = {it["item_id"]: it["row_index"] for it in items}
    table = table.assign(row_index=table["item_id"].map(rows), mode=responses.mode, formulation=choice.formulation,
                         fewshot=choice.fewshot, normalization=responses.normalization,
                         models=", ".join(m for m, a in zip(responses.models, responses.answer_only) if not a),
                         answer_models=answer_models(responses),
                         set_apart="; ".join(f"{m}: {why}" for m, why in responses.set_apart))
    return table[COLUMNS].to_dict("records")
