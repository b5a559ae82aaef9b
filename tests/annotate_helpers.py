"""Shared pieces of the annotation tests: a small real workspace and an llm-katan server."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from conftest import ROOT, copy_ws, small_workspace  # noqa: F401 (re-exported for the annotation tests)

KEY = "sk-ant-test-0123456789-DO-NOT-LEAK-abcdef"
MODEL = "claude-haiku-4-5"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def katan(tmp_path: Path, *flags: str):
    """llm-katan serving the Anthropic Messages API with its echo backend on 127.0.0.1."""
    port = free_port()
    katan_bin = Path(sys.executable).with_name("llm-katan")
    log = open(tmp_path / f"katan-{port}.log", "w")
    proc = subprocess.Popen([str(katan_bin), "--model", MODEL, "--backend", "echo", "--providers", "anthropic",
                             "--host", "127.0.0.1", "--port", str(port), "--disable-dashboard",
                             "--stats-file", str(tmp_path / f"katan-{port}-stats.json"), *flags],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(url + "/health", timeout=1)
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError((tmp_path / f"katan-{port}.log").read_text())
                time.sleep(0.2)
        else:
            raise RuntimeError("llm-katan did not start")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:  # uvicorn waits for open connections; don't
            proc.kill()
            proc.wait()
        log.close()


def api_env(monkeypatch, url: str) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)


def records(root, **kw):
    from annotate.store import open_annotations, read_annotations
    ws = open_annotations(root)
    try:
        return read_annotations(ws, **kw)
    finally:
        ws.close()


def items_of(root) -> list[dict]:
    """The workspace's canonical items, in row order."""
    from curate.items.store import Workspace
    with Workspace.open(root) as ws:
        return ws.items()
def kill_when_stored(args: list[str], db: Path, table: str, rows: int, *, env: dict | None = None,
                     timeout: float = 120) -> None:
    """Run `curate ARGS` in a child process and kill -9 it as soon as ``table`` in ``db`` holds
    at least ``rows`` rows (the child must not finish first)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "curate", *map(str, args)], env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + timeout
    while True:
        assert time.time() < deadline and proc.poll() is None
        try:
            with sqlite3.connect(db, timeout=5) as conn:
                if conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] >= rows:
                    break
        except sqlite3.OperationalError:  # the table does not exist yet
            pass
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


TWINS = [{"question": "What is 2+2?", "choices": ["3", "4", "5", "6"], "answer": 1},
         {"question": "What is the capital of France?", "choices": ["Paris", "Rome", "Berlin", "Madrid"], "answer": 0},
         {"question": "What is 2+2?", "choices": ["3", "4", "5", "6"], "answer": 1}]


def twin_workspace(root):
    """Three question items; the first and the last have the same content (and request key)."""
    import json

    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions

    data = root.parent / f"{root.name}-twins.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in TWINS))
    Ingest(root, IngestOptions(data=str(data)), get_adapter("generic", question="question", choices=("choices",),
                                                     answer="answer")).run()
    items = items_of(root)
    assert items[0]["content_hash"] == items[2]["content_hash"] != items[1]["content_hash"]
    return root
