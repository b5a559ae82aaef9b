"""An error starts on its own line after a progress bar (issue 26): `curate filter` printed it onto
the bar's unfinished line, and the bar redrew itself after it at exit. The CLI now closes every
open bar before printing an error; checked on filter's stage bar and ingest's item bar."""
from __future__ import annotations

import pandas as pd
import pytest

from conftest import ROOT, run_cli, small_workspace


def bad_csv(path):
    """2500 rows (enough for ingest's bar, shown from 2000 items) whose row 2200 has no question."""
    rows = [{"q": f"question {i}?", "a": "yes", "b": "no", "key": "A"} for i in range(2500)]
    rows[2200]["q"] = ""
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("command", ["filter", "init"])
def test_an_error_after_a_progress_bar_starts_on_its_own_line(tmp_path, command):
    if command == "filter":  # the rules' annotator has no records: refused at the first stage
        ws = small_workspace(tmp_path / "ws", 20)
        args, bar, message = (["filter", ws, "--rules", ROOT / "rules" / "human-override.yaml", "--out", tmp_path / "o"],
                              "filter stages:", "annotator 'human:reviewer' has no round-1 records")
    else:
        args, bar, message = (["init", tmp_path / "ws", "--benchmark", "generic", "--data", bad_csv(tmp_path / "d.csv"),
                               "--question", "q", "--choices", "a,b", "--answer", "key", "--answer-format", "letter"],
                              "ingest:", "row 2200")
    proc = run_cli(*args, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.split("\n") if line.strip()]
    assert any(bar in line for line in lines), proc.stderr  # a bar was drawn
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("error: ") and message in errors[0], proc.stderr
    assert lines[-1] == errors[0], proc.stderr  # no bar redrawn after it
