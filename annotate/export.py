"""The annotations as a flat table users take away: one row per (annotator, round, item)."""
from __future__ import annotations

from annotate.store import open_annotations, read_annotations
from curate.asking.ledger import LEDGER_TOKENS
from curate.core.secrets import redact

FIELDS = ("labels", "best", "equally_good", "all_implausible", "worst")
COLUMNS = ("annotator", "round", "item_id", "row_index", "source", "status", *FIELDS, "prompt_version",
           "model_snapshot", "request_key", "content_hash", "run_id", "cost_usd", *LEDGER_TOKENS, "created_at", "raw")


def annotation_rows(ws) -> list[dict]:
    """Status, the parsed answer fields (None where the round or status has none), what made the
    answer (prompt version, model snapshot, request key, run) and what it cost."""
    rows = []
    for r in read_annotations(ws).to_dict("records"):
        result, cost = r["result"] or {}, r["cost"] or {}
        rows.append({
            "annotator": r["annotator"], "round": r["round"], "item_id": r["item_id"],
            "row_index": r["row_index"], "source": r["source"], "status": r["status"],
            **{f: result.get(f) for f in FIELDS},
            "prompt_version": r["prompt_version"], "model_snapshot": r["model_snapshot"],
            "request_key": r["request_key"], "content_hash": r["content_hash"], "run_id": r["run_id"],
            "cost_usd": cost.get("usd"), **{k: cost.get(k) for k in LEDGER_TOKENS},
            "created_at": r["created_at"], "raw": redact(r["raw"]),  # a workspace older than redaction
        })
    return rows


def records(workspace) -> list[dict]:
    """``annotation_rows`` of the workspace folder (what `curate export WS annotations` writes)."""
    with open_annotations(workspace) as ws:
        return annotation_rows(ws)
