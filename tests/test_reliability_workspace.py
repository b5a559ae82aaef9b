"""Reliability, workspaces and input faults (issue 14, items 8 and 9): damaged, emptied, foreign
and newer-format workspaces; two `init` at once; a full disk during init and score (simulated
with RLIMIT_FSIZE, see ``limited``); label "²"; truncated or corrupt .jsonl.gz; an unwritable
export path. Each: one clear line, exit 2, nothing half-written."""
from __future__ import annotations

import gzip
import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing

import pytest

from annotate_helpers import small_workspace
from conftest import HELLASWAG, ROOT, one_line_error, run_cli, save_tiny


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return small_workspace(tmp_path_factory.mktemp("wsbase") / "ws", n=60)


@pytest.fixture
def ws(base, tmp_path):
    return shutil.copytree(base, tmp_path / "ws")


def sql(db, statement):
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(statement)


def damage(db, case):
    if case == "emptied":
        db.write_bytes(b"")
    elif case == "truncated":
        db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    elif case == "garbage":
        db.write_bytes(b"this is not a database\n" * 200)
    elif case == "newer format":
        sql(db, "PRAGMA user_version = 99")
    elif case == "foreign sqlite":
        db.unlink()
        sql(db, "CREATE TABLE t (x)")
    elif case == "bad meta JSON":
        sql(db, "UPDATE meta SET value = '{not json' WHERE key = 'source'")


@pytest.mark.parametrize("case, expected", [
    ("emptied", "the database file is empty (0 bytes)"),
    ("truncated", "truncated ("),
    ("garbage", "not a SQLite database"),
    ("newer format", "workspace format 99 was written by a newer benchcurate"),
    ("foreign sqlite", "not a benchcurate workspace"),
    ("bad meta JSON", "meta 'source': not valid JSON"),
])
def test_a_damaged_workspace_is_one_clear_line_and_is_not_recreated(ws, case, expected):
    db = ws / "workspace.db"
    damage(db, case)
    before = db.read_bytes()
    for command in (["items", ws, "--out", ws.parent / "items.jsonl"],
                    ["filter", ws, "--rules", ROOT / "rules" / "zero-prompt-core.yaml", "--out", ws.parent / "dec"]):
        one_line_error(run_cli(*command, check=False), expected)
    assert db.read_bytes() == before                     # an emptied file stays empty: no new workspace
    assert not (ws.parent / "items.jsonl").exists() and not (ws.parent / "dec").exists()


def _write_and_close(db, stop):
    """Open, write a row, close: each close of the last connection checkpoints and removes the WAL."""
    from curate.items.store import connect

    n = 0
    while not stop.is_set():
        with closing(connect(db)) as conn:
            conn.execute("INSERT INTO t VALUES (?)", ("x" * 3000 + str(n),))
        n += 1


def test_a_workspace_being_written_by_others_is_never_called_damaged(tmp_path):
    """Found by CI: a review server opening the workspace while another one closed its connection
    saw the header of a half-done checkpoint (pages not appended yet) and its WAL vanishing, and
    called the file truncated. Two processes write and close in a loop while this one checks."""
    import multiprocessing
    import time

    from curate.items.store import check_database_file, connect

    db = tmp_path / "workspace.db"
    with closing(connect(db)) as conn:
        conn.execute("CREATE TABLE t (x)")
    stop = multiprocessing.Event()
    writers = [multiprocessing.Process(target=_write_and_close, args=(db, stop)) for _ in range(2)]
    for w in writers:
        w.start()
    errors, checks, end = [], 0, time.monotonic() + 4
    try:
        while time.monotonic() < end:
            try:
                check_database_file(db)
            except Exception as exc:  # noqa: BLE001 - any error here is the bug
                errors.append(str(exc))
            checks += 1
    finally:
        stop.set()
        for w in writers:
            w.join()
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT count(*) FROM t").fetchone()[0]
    assert rows > 50 and checks > 100 and errors == []


def test_the_workspace_format_is_recorded_and_older_workspaces_open(ws):
    from curate.items.store import WORKSPACE_FORMAT, Workspace

    with closing(sqlite3.connect(ws / "workspace.db")) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == WORKSPACE_FORMAT == 1
    sql(ws / "workspace.db", "PRAGMA user_version = 0")   # as made before formats were recorded
    with Workspace.open(ws) as w:
        assert w.count_items() == 60
    with closing(sqlite3.connect(ws / "workspace.db")) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1


def test_two_inits_into_one_folder_at_once(tmp_path):
    data = tmp_path / "rows.jsonl"
    with gzip.open(HELLASWAG, "rt", encoding="utf-8") as fh:
        data.write_text("".join(next(fh) for _ in range(1500)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "curate", "init", str(tmp_path / "ws"), "--benchmark", "hellaswag", "--data", str(data)]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.returncode, err) for p in procs for _, err in [p.communicate(timeout=300)]]
    assert sorted(code for code, _ in results) == [0, 2], results
    loser = next(err for code, err in results if code == 2)
    assert "Traceback" not in loser and ("already exists" in loser or "created by another process" in loser)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl", "ws"]       # no .partial left
    assert run_cli("info", tmp_path / "ws").returncode == 0


def test_an_init_stopped_by_sigterm_or_killed_leaves_nothing_behind(tmp_path):
    """`timeout` and `kill` send SIGTERM: the half-built workspace is removed as after Ctrl-C.
    What a `kill -9` leaves (a hidden folder named after the dead process) is removed by the
    next init into that place."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "curate", "init", str(tmp_path / "ws"), "--benchmark", "hellaswag", "--data", str(HELLASWAG)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob(".ws.*.partial")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(sig)
        proc.wait(timeout=120)
        assert proc.returncode == (143 if sig == signal.SIGTERM else -9)
        left = sorted(p.name for p in tmp_path.iterdir())
        assert left == [] if sig == signal.SIGTERM else (len(left) == 1 and left[0].startswith(".ws.")), left
    run_cli("init", tmp_path / "ws", "--benchmark", "hellaswag", "--data", HELLASWAG, "--limit", "5")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def test_init_into_the_folder_it_is_run_in(tmp_path):
    """`curate init .` in an empty folder: the workspace is made in it (the folder stays, as a
    shell may be in it); a non-empty one is refused."""
    (tmp_path / "here").mkdir()
    proc = subprocess.run([sys.executable, "-m", "curate", "init", ".", "--benchmark", "hellaswag", "--data",
                           str(HELLASWAG), "--limit", "5"], cwd=tmp_path / "here", capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert proc.returncode == 0 and proc.stdout.startswith("created . with 5 items"), proc.stderr
    assert sorted(p.name for p in (tmp_path / "here").iterdir()) == ["exports", "workspace.db"]
    assert run_cli("info", tmp_path / "here").returncode == 0


def test_init_losing_the_race_at_the_final_rename(tmp_path, monkeypatch):
    """The other process's workspace appears after this one checked the folder (forced here by
    creating it from inside the build): this one is refused and cleans up; theirs is untouched."""
    from curate.items import store
    from curate.items.adapters import get_adapter
    from curate.core.errors import CurateError
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions

    root = tmp_path / "ws"
    real_connect = store.connect

    def other_process_wins(path):
        root.mkdir(exist_ok=True)
        (root / "workspace.db").write_bytes(b"theirs")
        return real_connect(path)
    monkeypatch.setattr(store, "connect", other_process_wins)
    with pytest.raises(CurateError, match="created by another process"):
        Ingest(root, IngestOptions(data=str(HELLASWAG), limit=5), get_adapter("hellaswag")).run()
    assert (root / "workspace.db").read_bytes() == b"theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def limited(max_bytes: int):
    """What a full disk looks like to a process, without root: RLIMIT_FSIZE makes any write past
    ``max_bytes`` in a file fail with EFBIG (SIGXFSZ ignored, so the write fails instead of killing
    the process). SQLite, pyarrow and Python's own writes all see a failing write, as on ENOSPC."""
    def preexec():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    return preexec


def test_disk_full_during_init_leaves_nothing(tmp_path):
    result = run_cli("init", tmp_path / "ws", "--benchmark", "hellaswag", "--data", HELLASWAG, "--limit", "300",
                     check=False, preexec_fn=limited(64 * 1024))
    one_line_error(result, "nothing is half-written")
    assert list(tmp_path.iterdir()) == []


def test_disk_full_during_score_keeps_whole_items_and_resumes(ws, tmp_path):
    from scoring.models import load_tokenizer, resolve
    from scoring.store import open_scores

    # A seeded tiny random Llama with SmolLM2's tokenizer, saved before the limit applies: the
    # workspace's writes, not the model, are tested.
    model = save_tiny(tmp_path / "tiny", "llama", load_tokenizer(resolve("smollm2-135m")))
    open_scores(ws).close()                     # the score tables exist; the WAL is checkpointed away
    # 40 KiB: room for SQLite's 32 KiB shared-memory file and a few pages of write-ahead log, so
    # the first small batches commit and a later one finds the disk full.
    score = ["score", ws, "--model", model, "--label", "tiny", "--modes", "full", "--limit", "12",
             "--batch-tokens", "300"]
    result = run_cli(*score, check=False, preexec_fn=limited(40 * 1024))
    one_line_error(result, "nothing is half-written")
    with open_scores(ws) as w:                  # the workspace still opens; only whole items were kept
        per_item = [n for (n,) in w.conn.execute("SELECT count(*) FROM scores GROUP BY item_id")]
    assert all(n == 4 for n in per_item) and len(per_item) < 12
    run_cli(*score)                             # the rerun scores the rest
    with open_scores(ws) as w:
        assert w.conn.execute("SELECT count(*) FROM scores").fetchone()[0] == 48


def test_label_superscript_two_is_one_clear_line(tmp_path):
    with gzip.open(HELLASWAG, "rt", encoding="utf-8") as fh:
        rows = [json.loads(next(fh)) for _ in range(4)]
    for r in rows:
        r["label"] = str(r["label"])            # string labels throughout, as some copies have them
    rows[2]["label"] = "\u00b2"                 # '²'.isdigit() is True, int('²') fails
    data = tmp_path / "sup.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    result = run_cli("init", tmp_path / "ws", "--benchmark", "hellaswag", "--data", data, check=False)
    one_line_error(result, "sup.jsonl, row 2, field 'label': expected an option index")
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize("fault", ["truncated", "corrupt"])
def test_a_truncated_or_corrupt_gzip_file_is_one_clear_line(tmp_path, fault):
    raw = HELLASWAG.read_bytes()
    data = tmp_path / "validation.jsonl.gz"
    if fault == "truncated":
        data.write_bytes(raw[: len(raw) // 2])
    else:  # the CRC at the end no longer matches the content
        data.write_bytes(raw[:-8] + bytes(b ^ 0xFF for b in raw[-8:-4]) + raw[-4:])
    result = run_cli("init", tmp_path / "ws", "--benchmark", "hellaswag", "--data", data, check=False)
    one_line_error(result, f"{data}: cannot be read to the end", "truncated or corrupt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["validation.jsonl.gz"]


@pytest.mark.parametrize("where", ["under a file", "a folder", "in /proc"])
def test_an_unwritable_export_path_is_one_clear_line(ws, tmp_path, where):
    (tmp_path / "plain.txt").write_text("x")
    out = {"under a file": tmp_path / "plain.txt" / "items.jsonl", "a folder": tmp_path,
           "in /proc": "/proc/benchcurate-test/items.jsonl"}[where]
    result = run_cli("items", ws, "--out", out, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert str(out) in result.stderr
    assert (tmp_path / "plain.txt").read_text() == "x"
