"""Real-world files through the generic adapter, built from the real MMLU data: a semicolon CSV
whose choices are Python list literals, a cp1252 file, answers as letters, 0- or 1-based numbers,
labels in another case or the answer's text, options that look like numbers; every failure one
line naming file, row and field."""
from __future__ import annotations

import csv
import gzip
import json

import pytest

from conftest import SHARED, run_cli
from curate.store import Workspace

MMLU = SHARED / "benchmarks" / "mmlu" / "test.jsonl.gz"


@pytest.fixture(scope="module")
def mmlu_rows():
    with gzip.open(MMLU, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def items(ws):
    with Workspace.open(ws) as w:
        return w.items()


def write_csv(path, header, rows, delimiter=",", encoding="utf-8"):
    with open(path, "w", newline="", encoding=encoding) as fh:
        writer = csv.writer(fh, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_semicolon_csv_with_python_list_literals(tmp_path, mmlu_rows):
    """The layout of a well-known cleaned MMLU release: ';'-separated, choices as a Python list
    literal, the answer as a letter; rows whose question holds ';' and ',' included."""
    chosen = mmlu_rows[:60] + [r for r in mmlu_rows if ";" in r["question"]][:20]
    data = write_csv(tmp_path / "mmlu.csv", ["question", "subject", "choices", "answer"],
                     [(r["question"], r["subject"], repr(r["choices"]), "ABCD"[r["answer"]]) for r in chosen],
                     delimiter=";")
    assert "['" in data.read_text() and "Expected" not in data.read_text()
    run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", data, "--question", "question",
            "--choices", "choices", "--answer", "answer", "--source-column", "subject")
    got = items(tmp_path / "ws")
    assert [it["options"] for it in got] == [[c.strip() for c in r["choices"]] for r in chosen]
    assert [it["gold"] for it in got] == [r["answer"] for r in chosen]
    assert [it["context_parts"]["question"] for it in got] == [r["question"] for r in chosen]
    with Workspace.open(tmp_path / "ws") as w:
        assert w.meta("source")["delimiter"] == ";" and w.meta("source")["encoding"] == "utf-8"


def test_cp1252_file_keeps_its_characters(tmp_path, mmlu_rows):
    def fits(r):
        text = r["question"] + "".join(r["choices"])
        try:
            text.encode("cp1252")
        except UnicodeEncodeError:
            return False
        return any(ord(c) > 127 for c in text)
    chosen = [r for r in mmlu_rows if fits(r)][:60]
    header = ["question", "A", "B", "C", "D", "answer"]
    rows = [(r["question"], *r["choices"], str(r["answer"])) for r in chosen]
    data = write_csv(tmp_path / "legacy.csv", header, rows, encoding="cp1252")
    with pytest.raises(UnicodeDecodeError):
        data.read_bytes().decode("utf-8")
    for extra in ((), ("--encoding", "cp1252")):  # detected, and named
        ws = tmp_path / f"ws{len(extra)}"
        run_cli("init", ws, "--benchmark", "generic", "--data", data, "--question", "question",
                "--choices", "A,B,C,D", "--answer", "answer", *extra)
        got = items(ws)
        assert [it["context_parts"]["question"] for it in got] == [r["question"] for r in chosen]
        assert [it["options"] for it in got] == [[c.strip() for c in r["choices"]] for r in chosen]
        with Workspace.open(ws) as w:
            assert w.meta("source")["encoding"] == "cp1252"


def test_answer_spellings(tmp_path, mmlu_rows):
    """One file per spelling; all give the same gold: 1-based numbers, the answer's text (in
    another case), labels that differ from the answer only in case."""
    rows = mmlu_rows[100:130]
    gold = [r["answer"] for r in rows]
    cases = {
        "index1": ([str(r["answer"] + 1) for r in rows], ("--answer-format", "index1")),
        "text": ([r["choices"][r["answer"]].strip().upper() for r in rows], ()),
        "index": ([str(r["answer"]) for r in rows], ()),
    }
    for name, (answers, extra) in cases.items():
        data = tmp_path / f"{name}.jsonl"
        data.write_text("".join(json.dumps({"q": r["question"], "choices": r["choices"], "a": a}) + "\n"
                                for r, a in zip(rows, answers)))
        run_cli("init", tmp_path / name, "--benchmark", "generic", "--data", data, "--question", "q",
                "--choices", "choices", "--answer", "a", *extra)
        assert [it["gold"] for it in items(tmp_path / name)] == gold, name
    data = tmp_path / "labels.jsonl"
    data.write_text("".join(json.dumps({"q": r["question"], "choices": r["choices"], "labels": list("abcd"),
                                        "a": "ABCD"[r["answer"]]}) + "\n" for r in rows))
    run_cli("init", tmp_path / "labels", "--benchmark", "generic", "--data", data, "--question", "q",
            "--choices", "choices", "--answer", "a", "--choice-labels", "labels")
    assert [it["gold"] for it in items(tmp_path / "labels")] == gold


def test_numeric_looking_options_stay_text(tmp_path):
    """Option columns holding 1, 2.5, 2.50, 10 ingest as the texts they are, from CSV columns
    and from list literals; a file that stores them as floats is refused in one line."""
    data = write_csv(tmp_path / "nums.csv", ["q", "o1", "o2", "o3", "o4", "a", "lst"],
                     [("How much?", "1", "2.5", "2.50", "10", "C", "[1, 2.50, -3, '007']"),
                      ("How many?", "007", "1e3", "0.10", "-4", "0", "[0.5, 1.0, 2, 3]")])
    run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", data, "--question", "q",
            "--choices", "o1,o2,o3,o4", "--answer", "a")
    assert [it["options"] for it in items(tmp_path / "ws")] == [["1", "2.5", "2.50", "10"], ["007", "1e3", "0.10", "-4"]]
    run_cli("init", tmp_path / "ws2", "--benchmark", "generic", "--data", data, "--question", "q",
            "--choices", "lst", "--answer", "a")
    assert [it["options"] for it in items(tmp_path / "ws2")] == [["1", "2.50", "-3", "007"], ["0.5", "1.0", "2", "3"]]
    floats = tmp_path / "floats.jsonl"
    floats.write_text(json.dumps({"q": "x", "o": [1, 2.5], "a": 0}) + "\n" + json.dumps({"q": "y", "o": [2.5, 3.0], "a": 1})
                      + "\n")
    proc = run_cli("init", tmp_path / "ws3", "--benchmark", "generic", "--data", floats, "--question", "q",
                   "--choices", "o", "--answer", "a", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "floats.jsonl, row 0, field 'o[0]'" in proc.stderr and "store the options as text" in proc.stderr


@pytest.mark.parametrize("case", ["bad literal", "ambiguous answer", "answer out of range", "code in a literal"])
def test_failures_name_file_row_field(tmp_path, case):
    good = ("Q?", "['a', 'b', 'c']", "B")
    bad = {"bad literal": ("Q?", "['a', 'b'", "B"), "ambiguous answer": ("Q?", "['maybe', 'Maybe', 'no']", "MAYBE"),
           "answer out of range": ("Q?", "['a', 'b', 'c']", "3"),
           "code in a literal": ("Q?", "[__import__('os').getcwd(), 'b']", "B")}[case]
    data = write_csv(tmp_path / "f.csv", ["question", "choices", "answer"], [good, good, bad], delimiter=";")
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", data, "--question", "question",
                   "--choices", "choices", "--answer", "answer", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "f.csv, row 2, field '" in proc.stderr, proc.stderr
    assert not (tmp_path / "ws").exists()
    if case == "answer out of range":
        assert "index1" in proc.stderr  # the hint for files that count from 1


def test_delimiter_given_or_refused_when_unclear(tmp_path):
    data = tmp_path / "odd.csv"
    data.write_text("a;b,c\nx;y,z\n")  # both ';' and ',' split every line into two fields
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", data, "--question", "a",
                   "--choices", "b,c", "--answer", "a", check=False)
    assert proc.returncode == 2 and "--delimiter" in proc.stderr and "odd.csv" in proc.stderr
    data.write_text("q;o1;o2;a\nWhat, then?;yes, sure;no;1\n")
    run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", data, "--question", "q",
            "--choices", "o1,o2", "--answer", "a", "--delimiter", ";")
    assert items(tmp_path / "ws")[0]["options"] == ["yes, sure", "no"]
    proc = run_cli("init", tmp_path / "ws2", "--benchmark", "generic", "--data", data, "--question", "q",
                   "--choices", "o1,o2", "--answer", "a", "--config", "main", check=False)
    assert proc.returncode == 2 and "config" in proc.stderr


def test_audit_config_reads_builtins_and_file_options(tmp_path):
    import yaml
    from curate.audit_config import config_problems, load_config

    def config(benchmark, **extra):
        path = tmp_path / "audit.yaml"
        path.write_text(yaml.safe_dump({"workspace": "ws", "benchmark": benchmark, **extra}))
        return path

    b = load_config(config({"adapter": "mmlu"}), check_files=False).benchmark
    assert b.source() == {"data": "cais/mmlu", "split": "test", "config": "all", "revision": None, "limit": None,
                          "delimiter": None, "encoding": None}
    columns = {"question": "question", "choices": "choices", "answer": "answer", "kind": "continuation"}
    b = load_config(config({"adapter": "generic", "path": "x.csv", "delimiter": ";", "encoding": "cp1252",
                            "columns": columns}), check_files=False).benchmark
    assert (b.source()["delimiter"], b.source()["encoding"], b.make_adapter().kind) == (";", "cp1252", "continuation")
    problems = dict(config_problems({"workspace": "ws", "benchmark": {"adapter": "arc_easy", "path": "x",
                                                                      "config": "ARC-Easy"}}))
    assert "needs 'hub'" in problems["benchmark.config"]
    problems = dict(config_problems({"workspace": "ws", "benchmark": {"adapter": "arc_easy", "hub": "allenai/ai2_arc",
                                                                      "delimiter": ";"}}))
    assert "needs 'path'" in problems["benchmark.delimiter"]
    scoring = {"models": ["smollm2-135m"], "modes": ["full"], "formulations": ["cloze", "letters+rotations"]}
    s = load_config(config({"adapter": "sciq"}, scoring=scoring), check_files=False).scoring
    assert s.formulations == ("cloze", "letters+rotations")
    assert config_problems({"workspace": "ws", "benchmark": {"adapter": "sciq"},
                            "scoring": {**scoring, "formulations": ["bogus"]}})
