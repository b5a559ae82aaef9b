"""The workspace: one directory, one SQLite database that every stage appends to.

Layout::

    WORKSPACE/
      workspace.db     items, provenance, and each later stage's own tables
      exports/         files written by `curate ... --out` when no path is given

Each stage owns its tables and declares them as a list of named migrations (plain SQL) which
``Workspace.migrate`` applies once, in order, recording them in the ``migrations`` table. So a
stage never edits another stage's schema, and an old workspace upgrades when a newer toolkit
opens it.

The database records its workspace format (SQLite's ``user_version``, ``WORKSPACE_FORMAT``). A
workspace is opened only when its database is a whole SQLite file of a format this toolkit
reads, holding the core tables: an emptied, truncated or foreign file, or one written by a newer
toolkit, is refused in one line instead of being recreated empty or failing in a traceback.
"""
from __future__ import annotations

import errno
import json
import os
import re
import shutil
import sqlite3
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import curate
from curate.core.atomic import temp_folder
from curate.core.clock import now
from curate.core.errors import CurateError
from curate.core.lock import claimed, remove_stale

DB_NAME = "workspace.db"

#: The workspace format this toolkit writes and reads (PRAGMA user_version); 0 = made before
#: formats were recorded (read as 1). Raise it when a change needs a newer reader.
WORKSPACE_FORMAT = 1
SQLITE_HEADER = b"SQLite format 3\x00"
CORE_TABLES = {"meta", "items", "migrations"}

#: The foundation's own tables. Later stages pass their own lists to ``Workspace.migrate``.
MIGRATIONS = [
    ("core-001-meta", """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """),
    ("core-002-items", """
        CREATE TABLE items (
            item_id      TEXT PRIMARY KEY,
            row_index    INTEGER NOT NULL UNIQUE,
            source       TEXT,
            content_hash TEXT NOT NULL,
            item_json    TEXT NOT NULL,   -- the canonical item (schemas/item.schema.json)
            raw_json     TEXT NOT NULL    -- the source row as read, for releases in source format
        );
        CREATE INDEX items_content_hash ON items(content_hash);
    """),
]


#: How long a write waits for another process's transaction before SQLite gives up ("database is locked").
BUSY_TIMEOUT_S = 60


def connect(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db_path, timeout=BUSY_TIMEOUT_S, isolation_level=None)  # we manage transactions
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def connect_read_only(db: Path) -> sqlite3.Connection:
    """A connection that reads ``db`` and never writes (for a workspace on a read-only file system)."""
    conn = sqlite3.connect(read_only_uri(db), uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    conn.row_factory = sqlite3.Row
    return conn


def check_database_file(db: Path) -> tuple[int, set[str]]:
    """The workspace format and table names of database ``db``; refuses, in one line, a file
    that is empty, not SQLite, or shorter than its header says (truncated).

    The file is read through SQLite alone (read-only, so nothing is created or recreated): on
    POSIX, closing any other descriptor of the file would drop every lock this process holds on
    it, SQLite's included, and let another process write under a transaction this one has open.
    Only a file SQLite has refused is opened directly, to say what is wrong with it."""
    if db.stat().st_size == 0:  # stat opens no descriptor
        raise CurateError(f"{db}: the database file is empty (0 bytes): the workspace's data is gone; restore it "
                          f"from a copy, or create a new workspace with `curate init`")
    try:
        with closing(sqlite3.connect(read_only_uri(db), uri=True)) as ro:
            format_ = ro.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in ro.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise CurateError(unreadable(db, exc)) from None
    return format_, tables


def read_only_filesystem(path: Path) -> bool:
    """Whether ``path`` lies on a file system mounted read-only."""
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)


def read_only_uri(db: Path) -> str:
    """SQLite's read-only address of ``db``. On a read-only file system SQLite cannot make the
    WAL index (``-shm``) it needs even to read, so the file is opened as immutable, which is exact
    when there is no ``-wal`` file (all was checkpointed into the database when it was closed)."""
    uri = f"{db.resolve().as_uri()}?mode=ro"
    if read_only_filesystem(db.parent) and not db.with_name(db.name + "-wal").exists():
        uri += "&immutable=1"
    return uri


def unreadable(db: Path, exc: sqlite3.DatabaseError) -> str:
    """Why SQLite could not read ``db``, in words. The header is read directly only when SQLite
    found the file not a database or damaged (no lock of this process can matter on it then)."""
    if getattr(exc, "sqlite_errorname", "") in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
        with open(db, "rb") as fh:
            header = fh.read(100)
            size = os.fstat(fh.fileno()).st_size
        if not header.startswith(SQLITE_HEADER):
            return (f"{db}: not a SQLite database (the file starts with {header[:16]!r}): not a benchcurate "
                    f"workspace, or overwritten")
        if len(header) < 100:
            return f"{db}: truncated ({size} bytes, shorter than a SQLite header); restore it from a copy"
        expected = _header_size(header)
        if size < expected:
            return f"{db}: truncated ({size} bytes, its header says {expected}); restore it from a copy"
    if read_only_filesystem(db.parent):
        return (f"{db}: cannot be read on this read-only file system ({exc}): SQLite needs to write its working "
                f"files beside a database that has a {db.name}-wal file; open it once where it can be written")
    return (f"{db}: the database cannot be read ({exc}): it is damaged (restore the workspace from a copy), or "
            f"there is no room for SQLite's working files beside it")


def _header_size(header: bytes) -> int:
    """The database size a SQLite header states (0 when its page count is not valid)."""
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    valid = header[24:28] == header[92:96]  # the page count is valid when the change counter matches it
    return int.from_bytes(header[28:32], "big") * page_size if valid else 0


class Workspace:
    """An open workspace. Use ``Workspace.open(dir)`` or ``create_workspace``.

    On a read-only file system it opens read-only: commands that read work, and a command that
    would write is refused in one line when it first tries (``refuse_if_read_only``)."""

    read_only = False

    def __init__(self, root: Path, conn: sqlite3.Connection):
        self.root, self.conn = root, conn
        self._temp_migrations: set[str] = set()  # migrations applied to TEMP tables (read_only)

    @classmethod
    def open(cls, root: str | os.PathLike, *stores: Iterable[tuple[str, str]]) -> "Workspace":
        """The workspace at ``root``, checked, with the core tables and then those of ``stores``
        (other stores' migrations) in place; closed again if any of that fails."""
        root = Path(root)
        db = root / DB_NAME
        if not db.is_file():
            raise CurateError(f"{root}: not a benchcurate workspace (no {DB_NAME}); create one with `curate init`")
        # read-only first: a database this toolkit must not use is left exactly as it was
        format_, tables = check_database_file(db)
        if format_ > WORKSPACE_FORMAT:
            raise CurateError(f"{db}: workspace format {format_} was written by a newer benchcurate (this one reads "
                              f"up to format {WORKSPACE_FORMAT}, version {curate.__version__}); upgrade benchcurate")
        if not CORE_TABLES <= tables:
            raise CurateError(f"{db}: a SQLite database without the workspace tables "
                              f"({', '.join(sorted(CORE_TABLES - tables))} missing): not a benchcurate workspace")
        read_only = read_only_filesystem(db.parent)
        conn = connect_read_only(db) if read_only else connect(db)
        ws = cls(root, conn)
        ws.read_only = read_only
        try:
            for migrations in (MIGRATIONS, *stores):
                ws.migrate(migrations)
            for (key,) in conn.execute("SELECT key FROM meta"):  # every later read of meta can trust it
                ws.meta(key)
            if format_ == 0 and not read_only:
                conn.execute(f"PRAGMA user_version = {WORKSPACE_FORMAT}")
        except BaseException:
            conn.close()
            raise
        return ws

    @classmethod
    def peek(cls, root: str | os.PathLike) -> "Workspace | None":
        """The workspace at ``root`` opened to read what it holds and nothing else (None when
        there is none yet): read-only, nothing created or upgraded, so a plan made before a run
        leaves the workspace exactly as it was. A damaged one is refused as ``open`` refuses it."""
        db = Path(root) / DB_NAME
        if not db.is_file():
            return None
        format_, tables = check_database_file(db)
        if format_ > WORKSPACE_FORMAT or not CORE_TABLES <= tables:
            return cls.open(root)  # refused, in open's words
        ws = cls(Path(root), connect_read_only(db))
        ws.read_only = True
        return ws

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def exports(self) -> Path:
        return self.root / "exports"

    # --- transactions and migrations -------------------------------------------------------

    @contextmanager
    def transaction(self, *, foreign_keys: bool = True) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT; any exception rolls everything back.

        ``foreign_keys=False`` skips SQLite's reference check on every row written, for bulk
        writes whose references hold by construction (rows made from the workspace's own items
        and a run added in the same transaction): on a million-row import it is 40% of the time."""
        self.refuse_if_read_only("writes to the workspace")
        if not foreign_keys:
            self.conn.execute("PRAGMA foreign_keys=OFF")  # has no effect once a transaction is open
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:  # SQLite rolls back itself after some errors (a full disk)
                    self.conn.execute("ROLLBACK")
                raise
        finally:
            if not foreign_keys:
                self.conn.execute("PRAGMA foreign_keys=ON")

    def migrate(self, migrations: Iterable[tuple[str, str]]) -> list[str]:
        """Apply the named migrations not yet applied, each in its own transaction.

        Safe when several processes open a fresh workspace at once: each migration's script
        first records its name, inside the write transaction, so a process that lost the race
        fails on that row before creating any table, rolls back and finds the migration done."""
        if self.read_only:
            return self._migrate_read_only(list(migrations))
        self.conn.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        done = {r[0] for r in self.conn.execute("SELECT name FROM migrations")}
        applied = []
        for name, sql in migrations:
            if name in done:
                continue
            # One script, one transaction: a migration is applied whole or not at all.
            quoted = name.replace("'", "''")
            try:
                self.conn.executescript(f"BEGIN IMMEDIATE;\nINSERT INTO migrations VALUES ('{quoted}', '{now()}');\n"
                                        f"{sql}\n;COMMIT;")
            except sqlite3.IntegrityError:  # another process applied it since we looked
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                if not self.conn.execute("SELECT 1 FROM migrations WHERE name = ?", (name,)).fetchone():
                    raise
                continue
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            applied.append(name)
        return applied

    def _migrate_read_only(self, migrations: list[tuple[str, str]]) -> list[str]:
        """On a read-only file system, a stage never used in this workspace gets its tables, empty,
        in this connection's TEMP schema (gone when it closes), so a command that reads finds no
        rows there, as it would in a writable workspace. A stage stored by an older toolkit needs
        its tables upgraded, which writes: refused."""
        done = {r[0] for r in self.conn.execute("SELECT name FROM migrations")} | self._temp_migrations
        pending = [(name, sql) for name, sql in migrations if name not in done]
        if len(pending) < len(migrations) and pending:
            self.refuse_if_read_only(f"would upgrade tables an older benchcurate made (migration {pending[0][0]})")
        self.conn.execute("PRAGMA temp_store = MEMORY")
        for name, sql in pending:
            self.conn.executescript(re.sub(r"\bCREATE\s+TABLE\b", "CREATE TEMP TABLE", sql, flags=re.IGNORECASE))
            self._temp_migrations.add(name)
        return [name for name, _ in pending]

    def refuse_if_read_only(self, what: str) -> None:
        """CurateError naming the read-only file system when this workspace was opened on one."""
        if self.read_only:
            raise CurateError(f"{self.root}: is on a read-only file system and this command {what}; commands that "
                              f"only read work there: copy the workspace somewhere writable, or mount it read-write")

    # --- meta ------------------------------------------------------------------------------

    def meta(self, key: str, default=None):
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return _json(row[0], self.root, f"meta '{key}'") if row else default

    def set_meta(self, key: str, value) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    # --- items -----------------------------------------------------------------------------

    def count_items(self) -> int:
        return self.conn.execute("SELECT count(*) FROM items").fetchone()[0]

    def items(self) -> list[dict]:
        """All canonical items in row order."""
        return [_json(r[1], self.root, f"items row {r[0]}")
                for r in self.conn.execute("SELECT row_index, item_json FROM items ORDER BY row_index")]

    def raw_rows(self) -> list[dict]:
        """The source rows as read, in row order (for writing releases in the source format)."""
        return [_json(r[1], self.root, f"items row {r[0]} (raw_json)")
                for r in self.conn.execute("SELECT row_index, raw_json FROM items ORDER BY row_index")]

    def table_names(self) -> set[str]:
        """The tables the database has (a stage's appear once it first ran here)."""
        return {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def columns(self, table: str) -> set[str]:
        """The columns of ``table`` as the database has them (an older toolkit's may lack some)."""
        return {r[1] for r in self.conn.execute(f'PRAGMA table_info("{table}")')}

    def tables(self) -> dict[str, int]:
        """Row count of every table, for `curate info` (stages' own tables included)."""
        names = [r[0] for r in self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return {n: self.conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}


@dataclass
class Holdings:
    """What one store of a workspace holds, as the audit's plan reads it (each store's
    ``holdings(ws)``, on a workspace opened with ``Workspace.peek``).

    ``facts``: what later stages may read, in the words filter kinds declare their needs in
    (``curate.filter.kinds``): ``("annotation", annotator, round)``, ``("scores", model, mode,
    formulation, fewshot, normalization)``, ``("generations", model, mode)``, ``("answers",
    model)``, ``("formulation", name)`` (the one scores are in when none is named).
    ``state``: rows that change whenever the store's content does (the audit's fingerprint of the
    workspace: a stage that recomputes from stored data reruns when it changes); None: the store
    adds nothing to it."""
    facts: set[tuple] = field(default_factory=set)
    state: list[tuple] | None = field(default_factory=list)


def holdings(ws: Workspace) -> Holdings:
    """The items' part: the formulation scores are in by default, and the item count and last row."""
    formulation = ws.meta("formulation")
    facts = {("formulation", formulation)} if formulation else set()
    return Holdings(facts, [tuple(ws.conn.execute("SELECT count(*), max(row_index) FROM items").fetchone())])


def _json(text: str, root: Path, where: str):
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise CurateError(f"{root / DB_NAME}, {where}: not valid JSON ({exc}); the workspace was edited or damaged") from None


def check_new_workspace(root: Path) -> None:
    """A workspace goes into a new or empty folder only."""
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise CurateError(f"{root}: already exists and is not empty; choose a new workspace directory")


def create_workspace(root: str | os.PathLike, *, meta: dict, items: list[dict], raw_rows: list[dict]) -> Path:
    """Build a complete workspace in a temporary folder, then move it into place.

    A crash or an error at any point leaves no workspace at ``root`` (nothing half-ingested).
    The temporary folder is named after this process and held while it is built, so what a
    ``kill -9`` leaves is removed by the next run (``remove_stale``).
    """
    root = Path(root)
    check_new_workspace(root)
    target = Path(os.path.abspath(root))  # "." or "sub/.." name a folder, not a name to rename onto
    # Beside a new folder; inside an existing empty one, which then stays (it may be a shell's
    # working folder, or a mount point, where a rename from beside it cannot land).
    home = target if target.is_dir() else target.parent
    home.mkdir(parents=True, exist_ok=True)
    remove_stale(home, rf"\.{re.escape(target.name)}\.(\d+)\.[a-z0-9_]+\.partial")
    tmp = temp_folder(home, f".{target.name}.{os.getpid()}.", ".partial")
    try:
        with claimed(tmp):
            _build(tmp, target, meta, items, raw_rows, shown=root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # nothing there once moved into place
    return root if root.is_dir() else target  # "new/sub/.." does not resolve as written


def _build(tmp: Path, root: Path, meta: dict, items: list[dict], raw_rows: list[dict], *, shown: Path) -> None:
    """Write the workspace into ``tmp``, then move it to ``root`` (``shown`` as the user named it)
    in one step."""
    conn = connect(tmp / DB_NAME)
    ws = Workspace(tmp, conn)
    ws.migrate(MIGRATIONS)
    conn.execute(f"PRAGMA user_version = {WORKSPACE_FORMAT}")
    with ws.transaction() as c:
        for key, value in meta.items():
            ws.set_meta(key, value)
        c.executemany(
            "INSERT INTO items VALUES (?, ?, ?, ?, ?, ?)",
            ((it["item_id"], it["row_index"], it["source"], it["content_hash"],
              json.dumps(it, ensure_ascii=False), json.dumps(raw, ensure_ascii=False, default=str))
             for it, raw in zip(items, raw_rows, strict=True)))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    (tmp / "exports").mkdir()
    try:  # one atomic step, never onto another's workspace
        if tmp.parent == root:  # the database file is the workspace: linked in, or refused if there
            os.link(tmp / DB_NAME, root / DB_NAME)
            (root / "exports").mkdir(exist_ok=True)
        else:
            os.replace(tmp, root)  # onto nothing or an empty folder
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise
        raise CurateError(f"{shown}: was created by another process while this one was ingesting; "
                          f"nothing was written by this one") from None
