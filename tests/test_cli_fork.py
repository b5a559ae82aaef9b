"""The tests' CLI runner (tests/cli_fork.py): a command forked from the fork server behaves as
the same command run by ``python -m curate``: same stdout, stderr, exit status and files, in
its own process, directory and environment; what could differ runs as a plain subprocess."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import cli_fork
from conftest import HELLASWAG, ROOT, run_cli


def both(tmp_path, *args, cwd=None, **env):
    """(forked, plain) runs of ``curate ARGS``."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    assert cli_fork.server().runs(full_env, {"cwd": cwd})
    forked = cli_fork.server().run([*map(str, args)], full_env, cwd=cwd)
    plain = subprocess.run([sys.executable, "-m", "curate", *map(str, args)], capture_output=True, text=True,
                           env=full_env, cwd=cwd)
    return forked, plain


def same(forked, plain):
    assert (forked.returncode, forked.stdout, forked.stderr) == (plain.returncode, plain.stdout, plain.stderr)


@pytest.mark.parametrize("args", [["--help"], ["score", "--help"], ["score", "/no/such/folder", "--model", "x"],
                                  ["init", "ws", "--benchmark", "nonsense"]])
def test_output_and_exit_status_equal_a_plain_process(tmp_path, args):
    same(*both(tmp_path, *args, cwd=tmp_path))


def test_a_command_runs_in_its_own_directory(tmp_path):
    """A relative workspace lands in the command's directory, made as a plain process makes it."""
    init = ("init", "ws", "--benchmark", "hellaswag", "--data", HELLASWAG, "--limit", "3")
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    forked, _ = both(tmp_path, *init, cwd=tmp_path / "a")
    plain = subprocess.run([sys.executable, "-m", "curate", *map(str, init)], capture_output=True, text=True,
                           cwd=tmp_path / "b", env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert forked.returncode == plain.returncode == 0
    assert forked.stdout.replace("/a/", "/b/") == plain.stdout and forked.stderr == plain.stderr
    for folder in ("a", "b"):
        same(*both(tmp_path, "items", "ws", "--out", "items.jsonl", cwd=tmp_path / folder))
    assert (tmp_path / "a" / "items.jsonl").read_text() == (tmp_path / "b" / "items.jsonl").read_text()


def test_what_is_read_at_import_time_runs_as_a_plain_subprocess():
    server = cli_fork.server()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert server.runs({**env, "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, {})
    assert not server.runs({**env, "HF_HUB_OFFLINE": "0"}, {})    # huggingface_hub reads it when imported
    assert not server.runs({**env, "OMP_NUM_THREADS": "7"}, {})   # the OpenMP runtime, when torch loads
    assert not server.runs(env, {"input": "y\n"})                  # options the server does not take


def test_a_command_past_its_timeout_is_killed(tmp_path):
    """`curate review` serves until stopped: the timeout ends it as subprocess.run's does."""
    from conftest import small_workspace
    ws = small_workspace(tmp_path / "ws", n=3)
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli("review", ws, "--port", "0", "--reviewer", "x", timeout=3)
    assert run_cli("items", ws, "--out", tmp_path / "i.jsonl").returncode == 0  # the server goes on
