"""A workspace on a read-only file system (a real read-only mount: a bind mount remounted
read-only, which needs root; skipped elsewhere): the commands that only read it work, the ones
that write it say the file system is read-only, in one line, and nothing is changed."""
from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

from annotate.store import open_annotations
from conftest import one_line_error, run_cli, small_workspace
from curate.review.verdicts import save_verdict
from review_helpers import RULES, write_study_scores


def mount(*args) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def read_only_ws(tmp_path_factory):
    """A workspace with scores and a verdict (no generations: that stage was never used), seen
    through a read-only bind mount."""
    base = tmp_path_factory.mktemp("readonly")
    ws = small_workspace(base / "src" / "ws", 10)
    write_study_scores(ws)
    with open_annotations(ws) as w:
        save_verdict(w, w.items()[0], 1, "alice", {"labels": ["high_quality"]})
    (base / "ro").mkdir()
    if not mount("--bind", str(base / "src"), str(base / "ro")):
        pytest.skip("cannot mount here (needs root): no read-only file system to test on")
    try:
        if not mount("-o", "remount,ro,bind", str(base / "ro")):
            pytest.skip("cannot remount read-only here")
        yield base / "ro" / "ws"
    finally:
        subprocess.run(["umount", str(base / "ro")], check=True)


def snapshot(ws) -> dict:
    return {p.name: p.read_bytes() for p in ws.iterdir() if p.is_file()}


def test_commands_that_read_work_on_a_read_only_file_system(read_only_ws, tmp_path):
    before = snapshot(read_only_ws)
    info = run_cli("info", read_only_ws).stdout
    assert "10 items" in info and "scores                         240" in info
    run_cli("items", read_only_ws, "--out", tmp_path / "items.jsonl")
    assert len((tmp_path / "items.jsonl").read_text().splitlines()) == 10
    for kind, rows in (("scores", 240), ("annotations", 1), ("generations", 0)):  # generations: never used here
        run_cli("export", read_only_ws, kind, "--out", tmp_path / f"{kind}.csv")
        assert len(pd.read_csv(tmp_path / f"{kind}.csv")) == rows, kind
    (tmp_path / "rules.yaml").write_text(RULES)
    run_cli("filter", read_only_ws, "--rules", tmp_path / "rules.yaml", "--out", tmp_path / "decisions")
    assert len(pd.read_parquet(tmp_path / "decisions" / "decisions.parquet")) == 10
    assert snapshot(read_only_ws) == before


def test_commands_that_write_say_the_file_system_is_read_only(read_only_ws, tmp_path):
    before = snapshot(read_only_ws)
    verdicts = tmp_path / "v.jsonl"
    verdicts.write_text(json.dumps({"item_id": "hellaswag/validation/1", "reviewer": "bob", "round": 1,
                                    "labels": ["high_quality"]}) + "\n")
    for command in (["import-review", read_only_ws, "--format", "jsonl", "--file", verdicts],
                    ["annotate", read_only_ws, "--round", "1", "--annotator", "local:smollm2-135m"],
                    ["score", read_only_ws, "--model", "smollm2-135m", "--modes", "full"],
                    ["review", read_only_ws, "--port", "0", "--reviewer", "bob"]):
        one_line_error(run_cli(*command, check=False), "read-only file system")
    assert snapshot(read_only_ws) == before
