"""The scores table as records for `curate export WS scores`: one per (model, mode, formulation,
fewshot, item, option), the key the store holds them under."""
from __future__ import annotations

from scoring.store import open_scores, read_scores

COLUMNS = ("item_id", "row_index", "source", "model", "mode", "formulation", "fewshot", "option_index", "logprob_sum", "n_tokens",
           "n_chars", "n_bytes", "is_greedy", "seq_mean", "study_sum", "study_byte_mean", "flags",
           "content_hash", "run_id")


def score_records(workspace) -> list[dict]:
    ws = open_scores(workspace)
    try:
        frame = read_scores(ws)
    finally:
        ws.close()
    frame = frame[list(COLUMNS)].astype(object).where(frame[list(COLUMNS)].notna(), None)
    return frame.to_dict("records")
