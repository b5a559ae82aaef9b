"""Workspaces as an earlier version left them, for the migration tests of the score store."""
from __future__ import annotations

from curate.items.store import Workspace


def scored_before(root, n_migrations: int, formulation: str | None = None) -> None:
    """Stop ``root``'s score tables at their first ``n_migrations`` migrations and store, as that
    version did, model m's full-mode scores of 2 items x 2 options (logprob_sum -(i + j)),
    under ``formulation`` when that version had the column."""
    from scoring.store import MIGRATIONS

    old = Workspace.open(root)
    old.migrate(MIGRATIONS[:n_migrations])
    old.conn.execute("INSERT INTO score_runs (run_id, model, origin, info_json, created_at) "
                     "VALUES ('r', 'm', 'scored', '{}', 'now')")
    columns, values = ("formulation, ", f"'{formulation}', ") if formulation else ("", "")
    old.conn.executemany(f"INSERT INTO scores (model, mode, {columns}item_id, option_index, logprob_sum, content_hash, "
                         f"run_id) VALUES ('m', 'full', {values}?, ?, ?, 'h', 'r')",
                         [(f"copa/validation/{i}", j, -float(i + j)) for i in range(2) for j in range(2)])
    old.close()
