"""The one cost ledger of annotation and generation runs: a row per reply paid for, per request in
flight and per request given up on (``curate.anthropic_api.spend`` settles them), in each stage's
own table (``annotation_ledger`` adds the Message Batches flag)."""
from __future__ import annotations

from dataclasses import dataclass

from curate.core.clock import now
from curate.core.secrets import redact

#: The token counts of a reply, as the API reports them and the ledger keeps them.
LEDGER_TOKENS = ("input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens")


@dataclass(frozen=True)
class CostLedger:
    """A stage's ledger table; ``batch``: it has the Message Batches column."""
    table: str
    batch: bool = False

    def add(self, ws, *, run_id: str, item_id: str, request_key: str, attempt: int, model_snapshot: str | None,
            usage: dict, usd: float, batch: bool = False, state: str = "billed") -> int:
        """Append what one reply cost, or (``state``) a request in flight or given up on; its rowid."""
        columns = ["run_id", "item_id", "request_key", "attempt", *(["batch"] if self.batch else []), "model_snapshot",
                   *LEDGER_TOKENS, "usd", "created_at", "state"]
        values = [run_id, item_id, request_key, attempt, *([int(batch)] if self.batch else []), redact(model_snapshot),
                  *(int(usage.get(k) or 0) for k in LEDGER_TOKENS), usd, now(), state]
        return ws.conn.execute(f"INSERT INTO {self.table} ({', '.join(columns)}) VALUES "
                               f"({', '.join('?' * len(values))})", values).lastrowid

    def totals(self, ws, run_id: str | None = None) -> dict:
        """Summed tokens, USD and reply count of the billed replies, for one run or (run_id None)
        the whole workspace, and ``possibly_billed`` / ``possibly_billed_usd``: the requests given
        up on or left in flight, at the most each could cost."""
        row = ws.conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'billed'), "
            + ", ".join(f"coalesce(sum({k}) FILTER (WHERE state = 'billed'), 0)" for k in LEDGER_TOKENS)
            + ", coalesce(sum(usd) FILTER (WHERE state = 'billed'), 0), count(*) FILTER (WHERE state != 'billed'), "
            f"coalesce(sum(usd) FILTER (WHERE state != 'billed'), 0) FROM {self.table}"
            + (" WHERE run_id = ?" if run_id else ""), (run_id,) if run_id else ()).fetchone()
        return {"replies": row[0], **dict(zip(LEDGER_TOKENS, row[1:5])), "usd": round(row[5], 6),
                "possibly_billed": row[6], "possibly_billed_usd": round(row[7], 6)}
