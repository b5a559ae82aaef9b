"""Every item's statistics and suspect scores in one table (``item_stats`` and ``suspects``
joined), as the report's "Items most likely broken", the filter's item-validity conditions, the
``suspects`` review queue and ``curate export WORKSPACE item-stats`` all read it.
"""
from __future__ import annotations

import pandas as pd

from curate.analyses.item_stats import item_statistics
from curate.analyses.responses import Responses, response_matrix
from curate.analyses.suspects import suspects
from curate.errors import CurateError

#: The columns of ``curate export WORKSPACE item-stats``.
COLUMNS = ["item_id", "row_index", "difficulty", "discrimination", "irt_a", "irt_b", "irt_a_se", "irt_b_se", "infit",
           "outfit", "easy", "label_error_score", "suspected_option", "several_correct_score", "no_right_answer_score",
           "mode", "formulation", "normalization", "models"]


def item_table(scores: pd.DataFrame, items: list[dict], *, models=None, mode: str = "full",
               formulation: str = "cloze", normalization: str | None = None,
               fewshot: int = 0) -> tuple[Responses, pd.DataFrame]:
    """The response matrix and one row per item it holds (row order): item statistics, then the
    suspect scores and their evidence (of the ``fewshot``-shot scores)."""
    responses = response_matrix(scores, items, models=models, mode=mode, formulation=formulation,
                                normalization=normalization, fewshot=fewshot)
    stats = item_statistics(responses)
    return responses, stats.merge(suspects(responses, stats), on="item_id", how="left")


def records(workspace) -> list[dict]:
    """The item-stats export: every model scored in full mode (0-shot), the workspace's
    formulation, the primary normalization."""
    from scoring.store import open_scores, read_scores

    with open_scores(workspace) as ws:
        items, formulation = ws.items(), ws.meta("formulation", "cloze")
        scores = read_scores(ws, modes=["full"], fewshots=[0])
    if scores.empty:
        raise CurateError(f"{workspace}: no full-mode scores; item statistics need several models' scores "
                          "(curate score or curate import-scores)")
    responses, table = item_table(scores, items, formulation=formulation)
    rows = {it["item_id"]: it["row_index"] for it in items}
    table = table.assign(row_index=table["item_id"].map(rows), mode=responses.mode, formulation=formulation,
                         normalization=responses.normalization, models=", ".join(responses.models))
    return table[COLUMNS].to_dict("records")
