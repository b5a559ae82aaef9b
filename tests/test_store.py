"""The workspace store: WAL mode, named migrations applied once, transactional writes."""
from __future__ import annotations

import sqlite3

import pytest

from curate.items.store import Workspace


def test_wal_and_migrations(hellaswag_ws):
    with Workspace.open(hellaswag_ws) as ws:
        assert ws.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        names = [r[0] for r in ws.conn.execute("SELECT name FROM migrations ORDER BY name")]
        assert names[:2] == ["core-001-meta", "core-002-items"]


def test_stage_migration_applies_once_and_atomically(tmp_path, hellaswag_ws):
    import shutil
    root = tmp_path / "copy"
    shutil.copytree(hellaswag_ws, root)
    stage = [("test-001-notes", "CREATE TABLE notes (item_id TEXT REFERENCES items(item_id), note TEXT);")]
    with Workspace.open(root) as ws:
        assert ws.migrate(stage) == ["test-001-notes"]
        assert ws.migrate(stage) == []
        bad = [("test-002-broken", "CREATE TABLE half (x INT); CREATE TABLE half (x INT);")]
        with pytest.raises(sqlite3.OperationalError):
            ws.migrate(bad)
        tables = ws.tables()
        assert "half" not in tables and "notes" in tables
        with pytest.raises(RuntimeError):
            with ws.transaction() as c:
                c.execute("INSERT INTO notes VALUES ('hellaswag/validation/0', 'x')")
                raise RuntimeError
        assert ws.tables()["notes"] == 0


def test_a_bulk_transaction_without_reference_checks_turns_them_back_on(tmp_path, hellaswag_ws):
    """The study import writes a million rows with SQLite's foreign-key checks off (their
    references hold by construction); the checks are on again after it, committed or rolled back."""
    import shutil
    root = tmp_path / "copy"
    shutil.copytree(hellaswag_ws, root)
    stage = [("test-001-notes", "CREATE TABLE notes (item_id TEXT REFERENCES items(item_id), note TEXT);")]
    insert = "INSERT INTO notes VALUES ('no-such-item', 'x')"
    with Workspace.open(root) as ws:
        ws.migrate(stage)
        with ws.transaction(foreign_keys=False):
            ws.conn.execute(insert)                   # not checked: the caller vouches for its rows
        assert ws.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        with pytest.raises(RuntimeError), ws.transaction(foreign_keys=False):
            raise RuntimeError("fails half-way")
        assert ws.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        with pytest.raises(sqlite3.IntegrityError), ws.transaction():
            ws.conn.execute(insert)                   # the default checks every reference
