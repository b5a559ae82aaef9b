"""The generations as records for `curate export WS generations`: one per (model, template,
settings, mode, seed, item), with the reply, its parse status and what it maps back to."""
from __future__ import annotations

from generate.store import open_generations, read_generations


def generation_records(workspace) -> list[dict]:
    ws = open_generations(workspace)
    try:
        frame = read_generations(ws)
    finally:
        ws.close()
    frame = frame.astype(object).where(frame.notna(), None)
    return frame.to_dict("records")
