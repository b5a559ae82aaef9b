"""Run `curate` commands as real processes without paying their start-up each time.

Most of a short `curate score` or `curate annotate` run in the tests is Python importing torch,
transformers, anthropic and pandas (3-5 s a process, some 400 processes a `make test`). A
*fork server* imports the CLI and those libraries once per test process; each command is then a
child forked from it: its own process, pid, argument list, environment, working directory,
stdout/stderr (files, read back as ``subprocess.run(text=True)`` reads pipes) and exit status,
running the same ``curate.cli.main`` that ``python -m curate`` runs. Nothing is imported in the
server that a command would set up differently: a command whose environment differs in anything
read at import time (``IMPORT_SAFE`` says what is not) runs as a plain subprocess instead, as does
every command when ``BENCHCURATE_TEST_SUBPROCESS=1``.

The server reads one JSON request a line on its stdin and answers one JSON line on its stdout;
it exits when its stdin closes (the test process ended).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Imported once in the server, before any fork: the CLI and the modules its commands import
#: when they run (each pulls in its heavy libraries).
PRELOAD = ("curate.cli", "curate.items.ingest", "curate.filter.run", "curate.analyses.report", "curate.audit.run",
           "curate.release.targets", "curate.review.server", "scoring.run", "scoring.models", "scoring.reference",
           "annotate.run", "annotate.claude", "annotate.local", "generate.run", "transformers.modeling_utils")

#: Environment variables read only while a command runs, never when a module is imported, so a
#: child may be given values the server did not start with.
IMPORT_SAFE = ("ANTHROPIC_", "PYTEST_", "BENCHCURATE_REQUIRE_BROWSER")


def _serve() -> None:
    """The server's loop: fork a child per request, wait for it, answer with its exit status."""
    import importlib
    import select
    import signal
    import time

    requests = os.fdopen(os.dup(0), "rb")
    replies = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # nothing but a child's own output may land in a child's capture files
    before = dict(os.environ)
    for name in PRELOAD:
        importlib.import_module(name)
    # What the imports set in the environment, a child sets again (as its own imports would have).
    added = {k: v for k, v in os.environ.items() if k not in before}
    # Forking a process that runs threads can copy a lock some thread held: refuse to serve.
    ready = {"threads": threading.active_count(), "env": before, "added": added}
    os.write(replies, (json.dumps(ready) + "\n").encode())
    for line in requests:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(req, added, requests, replies)
        deadline = None if req["timeout"] is None else time.monotonic() + req["timeout"]
        timed_out = False
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if deadline is not None and time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                timed_out, status = True, 0
                break
            select.select([], [], [], 0.005)
        code = os.waitstatus_to_exitcode(status) if not timed_out else None
        os.write(replies, (json.dumps({"returncode": code, "timed_out": timed_out}) + "\n").encode())


def _child(req: dict, added: dict, requests, replies: int) -> None:
    """Become the command: its descriptors, environment, directory and argv; run; exit."""
    import atexit
    import traceback

    code = 1
    try:
        requests.close()
        os.close(replies)
        for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        os.environ.clear()
        os.environ.update({**added, **req["env"]})
        if req["cwd"] is not None:
            os.chdir(req["cwd"])
        sys.argv = [str(ROOT / "curate" / "__main__.py"), *req["args"]]
        from curate.cli import main
        try:
            main.main(args=req["args"], prog_name="python -m curate")
            code = 0
        except SystemExit as exc:  # what the interpreter makes of sys.exit(...)
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        threading._shutdown()  # as at interpreter exit: wait for the command's own threads
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


class ForkServer:
    """The test process's handle on its server (started on first use, one per process)."""

    def __init__(self, env: dict):
        code = f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); import cli_fork; cli_fork._serve()"
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, env=env, cwd=ROOT)
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            raise RuntimeError(f"the CLI fork server did not start:\n{self.log.read().decode(errors='replace')}")
        ready = json.loads(line)
        if ready["threads"] != 1:
            raise RuntimeError(f"the CLI fork server runs {ready['threads']} threads after its imports: forking it "
                               "is unsafe; drop the module that starts them from PRELOAD")
        self.env, self.added = ready["env"], ready["added"]
        self.lock = threading.Lock()

    def runs(self, env: dict, kw: dict) -> bool:
        """Whether a command with this environment and these subprocess options can be forked."""
        return self.serves(kw) and not self.unsafe(env)

    def serves(self, kw: dict) -> bool:
        """Whether the server is up and takes these subprocess options."""
        return self.proc.poll() is None and not set(kw) - {"cwd", "timeout"}

    def unsafe(self, env: dict) -> set[str]:
        """The variables of ``env`` that differ from what the server started with and may be read at
        import time. Those its imports set (a child gets them too) may be set alike or not at all."""
        server = {**self.env, **self.added}
        changed = {k for k in set(env) | set(server) if env.get(k) != server.get(k)}
        return {k for k in changed if not k.startswith(IMPORT_SAFE) and not (k in self.added and k not in env)}

    def run(self, cmd: list[str], env: dict, cwd=None, timeout=None) -> subprocess.CompletedProcess:
        with self.lock, tempfile.TemporaryDirectory(prefix="curate-cli-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            req = {"args": cmd, "env": env, "cwd": None if cwd is None else str(cwd), "timeout": timeout,
                   "stdout": str(out), "stderr": str(err)}
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
            reply = json.loads(self.proc.stdout.readline())
            stdout, stderr = _text(out), _text(err)
        full = [sys.executable, "-m", "curate", *cmd]
        if reply["timed_out"]:
            raise subprocess.TimeoutExpired(full, timeout, output=stdout, stderr=stderr)
        return subprocess.CompletedProcess(full, reply["returncode"], stdout, stderr)


def _text(path: Path) -> str:
    """A capture file read as ``subprocess.run(text=True)`` reads a pipe (universal newlines)."""
    import locale
    data = path.read_bytes() if path.exists() else b""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


_server: ForkServer | None = None


def server() -> ForkServer:
    """This process's fork server, started on first use."""
    global _server
    if _server is None:
        _server = ForkServer({**os.environ, "PYTHONPATH": str(ROOT)})
    return _server


def run(cmd: list[str], env: dict, overrides=(), **kw) -> subprocess.CompletedProcess:
    """``curate CMD`` in a forked child when it can be, else ``python -m curate CMD``. A plain
    subprocess that no ``overrides`` (variables the test sets on purpose) explain is a warning:
    something changed this process's environment, and the suite runs slower."""
    if os.environ.get("BENCHCURATE_TEST_SUBPROCESS") != "1" and server().serves(kw):
        unsafe = server().unsafe(env)
        if not unsafe:
            return server().run(cmd, env, **kw)
        unexplained = unsafe - set(overrides)
        if unexplained:
            import warnings
            warnings.warn(f"curate {cmd[0]} ran as a plain subprocess: {sorted(unexplained)} changed in the "
                          "environment after the CLI fork server started (see tests/cli_fork.py IMPORT_SAFE)")
    return subprocess.run([sys.executable, "-m", "curate", *cmd], capture_output=True, text=True, env=env, **kw)
