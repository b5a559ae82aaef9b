"""The one cost ledger of annotation and generation runs: a row per reply paid for, per request in
flight and per request given up on (``curate.anthropic_api.spend`` settles them), in each stage's
own table (``annotation_ledger`` adds the Message Batches flag)."""
from __future__ import annotations

from dataclasses import dataclass

from curate.core.clock import now
from curate.core.secrets import redact

#: The token counts of a reply, as the API reports them and the ledger keeps them.
LEDGER_TOKENS = ("input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens")


#: What one ledger row says: which request (item, request key, attempt), what it cost.
ROW = ("item_id", "request_key", "attempt", "model_snapshot", "usage", "usd")


@dataclass(frozen=True)
class CostLedger:
    """A stage's ledger table; ``batch``: it has the Message Batches column."""
    table: str
    batch: bool = False
    runs: str = ""  # the stage's run table, which each row's run_id names

    def create_sql(self) -> str:
        """The table (the stage's migration that made it runs this): a row per reply, re-ask
        (``attempt`` 2..) or request in flight, its tokens and USD."""
        batch = "            batch              INTEGER NOT NULL,   -- 1 when sent through the Message Batches API\n"
        tokens = "".join(f"            {t:<18} INTEGER NOT NULL,\n" for t in LEDGER_TOKENS)
        return (f"\n        CREATE TABLE {self.table} (\n"
                f"            run_id             TEXT NOT NULL REFERENCES {self.runs}(run_id),\n"
                "            item_id            TEXT NOT NULL,\n            request_key        TEXT NOT NULL,\n"
                "            attempt            INTEGER NOT NULL,\n" + (batch if self.batch else "") +
                "            model_snapshot     TEXT,\n" + tokens +
                "            usd                REAL NOT NULL,\n            created_at         TEXT NOT NULL\n        );\n"
                f"        CREATE INDEX {self.table}_run ON {self.table}(run_id);\n")

    def add(self, ws, *, run_id: str, batch: bool = False, state: str = "billed", **row) -> int:
        """Append what one reply cost, or (``state``) a request in flight or given up on; its rowid.
        ``row``: the ``ROW`` fields (which request: item, key, attempt; what it cost: the model
        snapshot, the usage's token counts, USD)."""
        if set(row) != set(ROW):
            raise TypeError(f"a ledger row has the fields {', '.join(ROW)}, not {', '.join(sorted(row))}")
        item_id, request_key, attempt, model_snapshot, usage, usd = (row[k] for k in ROW)
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
