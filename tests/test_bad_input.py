"""Bad input: a clear error naming file, row and field; exit status non-zero; nothing written."""
from __future__ import annotations

import gzip
import json

import pytest

from conftest import HELLASWAG, run_cli


def real_rows(n=5):
    with gzip.open(HELLASWAG, "rt", encoding="utf-8") as fh:
        return [json.loads(next(fh)) for _ in range(n)]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def broken(tmp_path, row, change):
    rows = real_rows()
    change(rows[row])
    return write_jsonl(tmp_path / "bad.jsonl", rows)


CASES = {
    "missing field": (lambda r: r.pop("ctx_a"), ["row 2", "field 'ctx_a'", "missing"]),
    "mistyped field": (lambda r: r.update(endings="not a list"),
                       ["row 2", "field 'endings'", "expected list, got str"]),
    "gold out of range": (lambda r: r.update(label=7), ["row 2", "field 'label'", "out of range"]),
    "empty option": (lambda r: r["endings"].__setitem__(1, "  [step] "), ["row 2", "field 'endings[1]'", "empty"]),
    "non-index label": (lambda r: r.update(label=2.5), ["row 2", "field 'label'", "float"]),
}


@pytest.mark.parametrize("case", CASES)
def test_field_errors(tmp_path, case):
    change, expected = CASES[case]
    data = broken(tmp_path, 2, change)
    ws = tmp_path / "ws"
    proc = run_cli("init", ws, "--benchmark", "hellaswag", "--data", data, check=False)
    assert proc.returncode == 2, proc.stderr
    assert str(data.name) in proc.stderr
    for text in expected:
        assert text in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not ws.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


def test_type_changing_between_rows(tmp_path):
    """JSON values are read as written, so the row whose value is wrong is the one named."""
    data = broken(tmp_path, 3, lambda r: r.update(label="two"))
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "hellaswag", "--data", data, check=False)
    assert proc.returncode == 2
    assert "row 3, field 'label'" in proc.stderr and "got str 'two'" in proc.stderr
    assert not (tmp_path / "ws").exists()


def test_unreadable_line(tmp_path):
    data = tmp_path / "bad.jsonl"
    lines = [json.dumps(r) for r in real_rows()]
    lines[3] = lines[3][:40]  # truncated JSON
    data.write_text("\n".join(lines) + "\n")
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "hellaswag", "--data", data, check=False)
    assert proc.returncode == 2
    assert "bad.jsonl" in proc.stderr and "line 4" in proc.stderr and "not valid JSON" in proc.stderr
    assert not (tmp_path / "ws").exists()


def test_non_utf8_file(tmp_path):
    data = tmp_path / "bad.jsonl"
    raw = b"".join(json.dumps(r).encode() + b"\n" for r in real_rows())
    data.write_bytes(raw.replace(b"A man is sitting", b"A m\xe4n is sitting"))
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "hellaswag", "--data", data, check=False)
    assert proc.returncode == 2
    assert "bad.jsonl" in proc.stderr and "line 1" in proc.stderr and "UTF-8" in proc.stderr
    assert not (tmp_path / "ws").exists()


def test_duplicate_ids(tmp_path):
    rows = real_rows()
    rows[4] = dict(rows[1])
    data = write_jsonl(tmp_path / "dup.jsonl", rows)
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "hellaswag", "--data", data, check=False)
    assert proc.returncode == 2
    assert "row 4" in proc.stderr and "duplicate id" in proc.stderr and "row 1" in proc.stderr
    assert not (tmp_path / "ws").exists()


def test_existing_workspace_is_refused(tmp_path):
    data = write_jsonl(tmp_path / "ok.jsonl", real_rows())
    run_cli("init", tmp_path / "ws", "--benchmark", "hellaswag", "--data", data)
    before = (tmp_path / "ws" / "workspace.db").read_bytes()
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "hellaswag", "--data", data, check=False)
    assert proc.returncode == 2 and "already exists" in proc.stderr
    assert (tmp_path / "ws" / "workspace.db").read_bytes() == before


def test_missing_source(tmp_path):
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "hellaswag", "--data", tmp_path / "nope.jsonl",
                   check=False)
    assert proc.returncode == 2 and "nope.jsonl" in proc.stderr
    assert not (tmp_path / "ws").exists()


def test_crash_mid_ingest_leaves_nothing(tmp_path, monkeypatch):
    """A failure after the database was half written leaves no workspace and no temp folder."""
    from curate.items import store
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions

    data = write_jsonl(tmp_path / "ok.jsonl", real_rows())

    def boom(*a, **k):
        raise RuntimeError("disk died")
    monkeypatch.setattr(store.os, "replace", boom)
    with pytest.raises(RuntimeError):
        Ingest(tmp_path / "ws", IngestOptions(data=str(data)), get_adapter("hellaswag")).run()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.jsonl"]


def generic(tmp_path, data, check=False):
    return run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", data, "--question", "q",
                   "--choices", "o", "--answer", "a", check=check)


def assert_one_line(proc, *expected):
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for text in expected:
        assert text in proc.stderr, proc.stderr


GOOD = {"q": "Which?", "o": ["a", "b"], "a": 0}


@pytest.mark.parametrize("layout", ["jsonl", "json"])
def test_damaged_json_text_is_refused_naming_row_and_field(tmp_path, layout):
    """A lone surrogate escape (half of an emoji's pair) was a misleading error in JSON Lines and
    silently dropped from a JSON array; a key written twice kept only its last value."""
    def write(text_of_row_1):
        rows = [json.dumps(GOOD), text_of_row_1, json.dumps(GOOD)]
        data = tmp_path / f"bad.{layout}"
        data.write_text("\n".join(rows) + "\n" if layout == "jsonl" else "[" + ",\n".join(rows) + "]")
        return data

    surrogate = write('{"q": "Which?", "o": ["a", "b \\ud83d"], "a": 0}')
    assert_one_line(generic(tmp_path, surrogate), "row 1, field 'o[1]'", "lone surrogate \\ud83d")
    twice = write('{"q": "Which?", "o": ["a", "b"], "a": 0, "q": "Which again?"}')
    assert_one_line(generic(tmp_path, twice), "row 1, field 'q'", "written twice")
    assert not (tmp_path / "ws").exists()
    pair = write('{"q": "Which \\ud83d\\ude00?", "o": ["a", "b"], "a": 0}')  # a whole pair is one character
    generic(tmp_path, pair, check=True)


def test_values_nested_thousands_deep_are_one_line(tmp_path):
    """Python's JSON reader and literal parser stop at a nesting depth: a row nesting lists
    50000 deep is refused naming the file and row, in JSON Lines, a JSON array and a CSV cell."""
    deep = "[" * 50000 + "]" * 50000
    (tmp_path / "deep.jsonl").write_text('{"q": "Q", "o": ' + deep + ', "a": 0}\n')
    (tmp_path / "deep.json").write_text('[{"q": "Q", "o": ' + deep + ', "a": 0}]')
    (tmp_path / "deep.csv").write_text('q,o,a\nQ,"' + deep + '",0\n')
    for name, where in (("deep.jsonl", "row 0: line 1"), ("deep.json", "deep.json:"), ("deep.csv", "row 0:")):
        assert_one_line(generic(tmp_path, tmp_path / name), name, where, "nests values deeper than can be read")
    assert not (tmp_path / "ws").exists()


def test_empty_files_and_zero_rows_say_so(tmp_path):
    import pandas as pd

    for name, content in [("empty.jsonl", ""), ("blank.jsonl", "\n \n"), ("empty.json", "[]")]:
        (tmp_path / name).write_text(content)
        assert_one_line(generic(tmp_path, tmp_path / name), name, "empty")
    pd.DataFrame({"q": pd.Series([], dtype=str), "a": pd.Series([], dtype=int)}).to_parquet(tmp_path / "none.parquet")
    assert_one_line(generic(tmp_path, tmp_path / "none.parquet"), "none.parquet", "no rows")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blank.jsonl", "empty.json", "empty.jsonl", "none.parquet"]


def test_empty_question_is_refused_like_a_missing_one(tmp_path):
    rows = [GOOD, dict(GOOD, q="  \n "), GOOD]
    assert_one_line(generic(tmp_path, write_jsonl(tmp_path / "g.jsonl", rows)), "g.jsonl, row 1, field 'q': is empty")
    piqa = [{"goal": "Open a jar.", "sol1": "Twist.", "sol2": "Freeze.", "label": 0}] * 2
    piqa[1] = dict(piqa[1], goal=" ")
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "piqa", "--data",
                   write_jsonl(tmp_path / "piqa.jsonl", piqa), check=False)
    assert_one_line(proc, "piqa.jsonl, row 1, field 'goal': is empty")
    assert not (tmp_path / "ws").exists()
    # A question or an option of zero-width characters shows nothing too (str.strip() keeps them).
    for row, field in ((dict(GOOD, q="\u200b\u2060"), "q"), (dict(GOOD, o=["a", "\ufeff\u200b"]), "o[1]")):
        rows = [GOOD, row, GOOD]
        assert_one_line(generic(tmp_path, write_jsonl(tmp_path / "z.jsonl", rows)), f"z.jsonl, row 1, field '{field}'")
    assert not (tmp_path / "ws").exists()
