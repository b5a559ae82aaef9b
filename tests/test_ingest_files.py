"""Real-world files through the generic adapter, built from the real MMLU data: a semicolon CSV
whose choices are Python list literals, a cp1252 file, MMLU-Redux's Mac Roman CSVs, answers as
letters, 0- or 1-based numbers, labels in another case or the answer's text, options that look
like numbers; every failure one line naming file, row and field."""
from __future__ import annotations

import csv
import gzip
import json
import re

import pytest

from conftest import SHARED, one_line_error, run_cli
from curate.items.store import Workspace

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


# MMLU-Redux (edinburgh-dawg/mmlu-redux) as its CSVs are downloaded: its columns, the choices a
# Python list literal, the answer an index, 100 rows of the subject's MMLU test questions, written
# in Mac Roman. moral_scenarios holds three ’ (0xD5: "sister’s", "bully’s"), its only bytes above
# 127; anatomy is the real rows with the typography of a Mac editor: ’ in "patient’s", … (0xC9),
# and in the second file “ ” (0xD2, 0xD3) too. Row 52 of anatomy is left out: its → has no byte
# in Mac Roman. cp850 reads 0xD5 as a dotless ı ("sisterıs"), a letter, so these files were refused.
REDUX_HEADER = ["question", "choices", "answer", "error_type", "source", "correct_answer", "potential_reason"]
MORAL_PICKS = [*range(97), 189, 285, 619]
ANATOMY_PICKS = [*(i for i in range(100) if i != 52), 118]


def apostrophes(text):
    return re.sub(r"(?<=[a-z])'(?=[a-z])", "’", text)


def curly(text):
    return apostrophes(text).replace('"The right', "“The right").replace('valve…"', "valve…”")


def redux_csv(path, mmlu_rows, subject, picks, typography=str):
    """The rows written as MMLU-Redux's CSV in Mac Roman, and the rows."""
    rows = [r for r in mmlu_rows if r["subject"] == subject]
    chosen = [{**rows[i], "question": typography(rows[i]["question"]),
               "choices": [typography(c) for c in rows[i]["choices"]]} for i in picks]
    write_csv(path, REDUX_HEADER, [(r["question"], repr(r["choices"]), r["answer"], "ok", "", "", "") for r in chosen],
              encoding="mac_roman")
    return path, chosen


@pytest.mark.parametrize("subject,picks,typography", [
    ("moral_scenarios", MORAL_PICKS, str),
    ("anatomy", ANATOMY_PICKS, apostrophes),
    ("anatomy", ANATOMY_PICKS, curly),
])
def test_mmlu_redux_mac_roman_csvs_ingest_without_flags(tmp_path, mmlu_rows, subject, picks, typography):
    data, chosen = redux_csv(tmp_path / f"mmlu_{subject}.csv", mmlu_rows, subject, picks, typography)
    assert b"\xd5" in data.read_bytes()  # ’, in every file
    run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", data, "--question", "question",
            "--choices", "choices", "--answer", "answer")
    got = items(tmp_path / "ws")
    assert [it["context_parts"]["question"] for it in got] == [r["question"] for r in chosen]
    assert [it["options"] for it in got] == [[c.strip() for c in r["choices"]] for r in chosen]
    assert [it["gold"] for it in got] == [r["answer"] for r in chosen]
    assert any("sister’s" in q or "patient’s" in q for q in (r["question"] for r in chosen))
    with Workspace.open(tmp_path / "ws") as w:
        assert w.meta("source")["encoding"] == "mac-roman"


def test_charset_normalizer_alone_misreads_the_moral_scenarios_shape(tmp_path, mmlu_rows):
    """Why textfiles.py has its apostrophe rule: the detector's own pick for the moral_scenarios
    file is cp1250 ("sisterŐs"). Should a version pick Mac Roman, prefer its judgement."""
    from charset_normalizer import from_bytes

    data, _ = redux_csv(tmp_path / "mmlu_moral_scenarios.csv", mmlu_rows, "moral_scenarios", MORAL_PICKS)
    best = from_bytes(data.read_bytes()).best()
    assert best.encoding == "cp1250" and "sisterŐs" in str(best)


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
    # 1 is an integer as written (kept as "1"); 2.5 is the float whose written form is lost
    assert "floats.jsonl, row 0, field 'o[1]'" in proc.stderr and "store the options as text" in proc.stderr


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
    # With the delimiter named, a row with a field too many (which pandas would take as an index,
    # shifting every value one column left) or too few is refused, not read.
    for text, row, fields in (("q;o1;o2;a\nextra;What?;yes;no;1\n", 0, 5), ("q;o1;o2;a\nA?;yes;no;0\nB?;yes;no\n", 1, 3)):
        data.write_text(text)
        proc = run_cli("init", tmp_path / "ws3", "--benchmark", "generic", "--data", data, "--question", "q",
                       "--choices", "o1,o2", "--answer", "a", "--delimiter", ";", check=False)
        assert one_line_error(proc).endswith(f"odd.csv, row {row}: has {fields} fields but the header has 4 "
                                             "(delimiter ';')")
        assert not (tmp_path / "ws3").exists()
    # Without it, a ragged row is named too (by the delimiter that splits the header), rather than
    # a guess that the delimiter could not be told.
    data.write_text("q;o1;o2;a\nA?;yes;no;0\nB?;yes;no\n")
    proc = run_cli("init", tmp_path / "ws3", "--benchmark", "generic", "--data", data, "--question", "q",
                   "--choices", "o1,o2", "--answer", "a", check=False)
    assert one_line_error(proc).endswith("odd.csv, row 1: has 3 fields but the header has 4 (delimiter ';', the "
                                         "header's); fix the row, or name another delimiter with --delimiter")


def test_audit_config_reads_builtins_and_file_options(tmp_path):
    import yaml
    from curate.audit.config import config_problems, load_config

    def config(benchmark, **extra):
        path = tmp_path / "audit.yaml"
        path.write_text(yaml.safe_dump({"workspace": "ws", "benchmark": benchmark, **extra}))
        return path

    from curate.audit.stages.ingest import resolved

    b = load_config(config({"adapter": "mmlu"}), cwd=tmp_path, check_files=False).options("ingest")[0]
    assert resolved(b) == {"data": "cais/mmlu", "split": "test", "config": "all", "revision": None, "limit": None,
                          "delimiter": None, "encoding": None}
    columns = {"question": "question", "choices": "choices", "answer": "answer", "kind": "continuation"}
    b = load_config(config({"adapter": "generic", "path": "x.csv", "delimiter": ";", "encoding": "cp1252",
                            "columns": columns}), cwd=tmp_path, check_files=False).options("ingest")[0]
    assert (resolved(b)["delimiter"], resolved(b)["encoding"], b.adapter.kind) == (";", "cp1252", "continuation")
    # 'config' with 'path' picks a per-configuration subfolder of a local Hub-layout folder, as
    # `curate ingest --config` does; 'revision' only pins a Hub dataset.
    b = load_config(config({"adapter": "arc_easy", "path": "clone", "config": "ARC-Easy"}),
                    cwd=tmp_path, check_files=False).options("ingest")[0]
    assert (resolved(b)["data"], resolved(b)["config"]) == (str(tmp_path / "clone"), "ARC-Easy")
    problems = dict(config_problems({"workspace": "ws", "benchmark": {"adapter": "arc_easy", "path": "x",
                                                                      "revision": "abc"}}))
    assert "needs 'hub'" in problems["benchmark.revision"]
    problems = dict(config_problems({"workspace": "ws", "benchmark": {"adapter": "arc_easy", "hub": "allenai/ai2_arc",
                                                                      "delimiter": ";"}}))
    assert "needs 'path'" in problems["benchmark.delimiter"]
    scoring = {"models": ["smollm2-135m"], "modes": ["full"], "formulations": ["cloze", "letters+rotations"]}
    [s] = load_config(config({"adapter": "sciq"}, scoring=scoring), cwd=tmp_path, check_files=False).options("score")
    assert tuple(s.formulations) == ("cloze", "letters+rotations")
    assert config_problems({"workspace": "ws", "benchmark": {"adapter": "sciq"},
                            "scoring": {**scoring, "formulations": ["bogus"]}})


def init_generic(tmp_path, data, *extra, ws="ws", check=True, choices="choices"):
    return run_cli("init", tmp_path / ws, "--benchmark", "generic", "--data", data, "--question", "question",
                   "--choices", choices, "--answer", "answer", *extra, check=check)


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_folder_without_the_split_is_refused_listing_its_files(tmp_path):
    """The real MMLU folder holds test, dev and validation: --split train once ingested all
    three as one split (15858 items). Now one line listing the files, and no workspace."""
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "mmlu", "--data", SHARED / "benchmarks" / "mmlu",
                   "--split", "train", check=False)
    one_line_error(proc, "benchmarks/mmlu, field 'split'", "no file for split 'train'",
                   "dev.jsonl.gz, test.jsonl.gz, validation.jsonl.gz")
    assert not (tmp_path / "ws").exists()
    # One file whose name is not the split is refused too (its name says nothing of the split).
    write_jsonl(tmp_path / "one" / "data.jsonl", [{"question": "Q?", "choices": ["a", "b"], "answer": 0}])
    one_line_error(init_generic(tmp_path, tmp_path / "one", check=False), "no file for split 'validation'",
                   "data.jsonl")
    init_generic(tmp_path, tmp_path / "one" / "data.jsonl")  # named itself, it ingests
    # The split's file next to a compressed copy of itself would give every row twice.
    write_jsonl(tmp_path / "two" / "validation.jsonl", [{"question": "Q?", "choices": ["a", "b"], "answer": 0}])
    plain = tmp_path / "two" / "validation.jsonl"
    (tmp_path / "two" / "validation.jsonl.gz").write_bytes(gzip.compress(plain.read_bytes()))
    one_line_error(init_generic(tmp_path, tmp_path / "two", ws="ws2", check=False),
                   "validation.jsonl and validation.jsonl.gz look like two copies of one file")
    # ... and so would the same rows as JSON Lines and as one JSON array.
    (tmp_path / "two" / "validation.jsonl.gz").unlink()
    (tmp_path / "two" / "validation.json").write_text(json.dumps([{"question": "Q?", "choices": ["a", "b"], "answer": 0}]))
    one_line_error(init_generic(tmp_path, tmp_path / "two", ws="ws2", check=False),
                   "validation.json and validation.jsonl look like two copies of one file")


def test_a_hub_clone_with_one_subfolder_per_config_needs_config(tmp_path, mmlu_rows):
    """cais/mmlu's layout: all/ holds every subject, and each subject has its own subfolder.
    Reading them all repeated every row; now refused naming the subfolders, and --config
    picks one (for a built-in too), read from its parquet files."""
    import pandas as pd

    clone = tmp_path / "clone"
    subjects = ("virology", "world_religions")
    for name, rows in [("all", [r for r in mmlu_rows if r["subject"] in subjects]),
                       *((s, [r for r in mmlu_rows if r["subject"] == s]) for s in subjects)]:
        (clone / name).mkdir(parents=True)
        pd.DataFrame(rows).to_parquet(clone / name / "test-00000-of-00001.parquet")
        pd.DataFrame(rows[:5]).to_parquet(clone / name / "dev-00000-of-00001.parquet")
    (clone / ".git").mkdir()
    (clone / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (clone / "README.md").write_text("# mmlu\n")
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "mmlu", "--data", clone, check=False)
    one_line_error(proc, "split 'test' are in 3 subfolders (all, virology, world_religions)", "--config NAME")
    assert not (tmp_path / "ws").exists()
    out = run_cli("init", tmp_path / "ws", "--benchmark", "mmlu", "--data", clone, "--config", "all").stdout
    n_all = sum(r["subject"] in subjects for r in mmlu_rows)
    assert f"with {n_all} items" in out
    with Workspace.open(tmp_path / "ws") as w:
        assert w.meta("source")["files"] == ["test-00000-of-00001.parquet"]
    proc = run_cli("init", tmp_path / "ws2", "--benchmark", "mmlu", "--data", clone, "--config", "al", check=False)
    one_line_error(proc, "no subfolder 'al' for --config", "all, virology, world_religions")


def test_json_values_stay_as_written_when_a_column_mixes_types(tmp_path):
    """Arrow gives a column one type, so "007" next to a number became 7, ids "001" and 1 were
    one id, and "2.50" next to 2.5 was taken for the float. Read as written, none of that."""
    rows = [{"id": "001", "question": "Which?", "choices": ["007", "2.50", "x"], "answer": 0},
            {"id": 1, "question": "Which now?", "choices": [1, 2, 3], "answer": 2}]
    for name in ("mixed.jsonl", "mixed.json"):
        data = tmp_path / name
        data.write_text("".join(json.dumps(r) + "\n" for r in rows) if name.endswith("l") else json.dumps(rows))
        init_generic(tmp_path, data, "--id-columns", "id", ws=f"ws-{name}")
        got = items(tmp_path / f"ws-{name}")
        assert [it["options"] for it in got] == [["007", "2.50", "x"], ["1", "2", "3"]], name
        assert [it["native_ids"] for it in got] == [{"id": "001"}, {"id": 1}], name
    piqa = [{"question": "Cost?", "sol1": "2.50", "sol2": "3", "answer": 0},
            {"question": "Cost then?", "sol1": 2.5, "sol2": "4", "answer": 1}]
    data = write_jsonl(tmp_path / "piqa.jsonl", piqa)
    proc = init_generic(tmp_path, data, choices="sol1,sol2", ws="p", check=False)
    one_line_error(proc, "piqa.jsonl, row 1, field 'sol1'", "the number 2.5")  # row 0's "2.50" is text


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
@pytest.mark.parametrize("damage", ["truncated", "not compressed"])
def test_a_corrupt_compressed_csv_is_one_line(tmp_path, suffix, damage):
    import bz2
    import lzma

    text = "question,choices,answer\n" + "".join(f"Q{i}?,\"['a', 'b']\",0\n" for i in range(200))
    packed = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[suffix](text.encode())
    data = tmp_path / f"f.csv{suffix}"
    data.write_bytes(packed[: len(packed) // 2] if damage == "truncated" else text.encode())
    proc = init_generic(tmp_path, data, check=False)
    one_line_error(proc, f"f.csv{suffix}: cannot be read to the end", "truncated or corrupt")
    assert not (tmp_path / "ws").exists()


def test_csv_with_old_mac_line_endings_and_refused_headers(tmp_path):
    data = tmp_path / "mac.csv"
    data.write_bytes(b'question,choices,answer\r"Two\rlines?","[\'a\', \'b\']",1\rOne?,"[\'c\', \'d\']",0\r')
    init_generic(tmp_path, data)
    got = items(tmp_path / "ws")
    assert [it["context_parts"]["question"] for it in got] == ["Two\rlines?", "One?"]
    assert [it["gold"] for it in got] == [1, 0]
    data = write_csv(tmp_path / "dup.csv", ["question", "choices", "answer", "choices"],
                     [("Q?", "['a', 'b']", "0", "['c', 'd']")])
    one_line_error(init_generic(tmp_path, data, ws="ws2", check=False),
                   "dup.csv: the header names column 'choices' twice (columns 2 and 4)")
    (tmp_path / "empty.csv").write_text("\n  \n")
    one_line_error(init_generic(tmp_path, tmp_path / "empty.csv", ws="ws3", check=False),
                   "empty.csv: the file is empty")


def test_a_saved_dataset_dict_folder_gives_the_split(tmp_path, mmlu_rows):
    """`DatasetDict.save_to_disk` writes one subfolder per split; --split picks it."""
    import datasets

    datasets.DatasetDict({"test": datasets.Dataset.from_list(mmlu_rows[:7]),
                          "dev": datasets.Dataset.from_list(mmlu_rows[7:10])}).save_to_disk(tmp_path / "saved")
    out = run_cli("init", tmp_path / "ws", "--benchmark", "mmlu", "--data", tmp_path / "saved", "--split", "dev").stdout
    assert "with 3 items" in out
    one_line_error(run_cli("init", tmp_path / "ws2", "--benchmark", "mmlu", "--data", tmp_path / "saved",
                           "--split", "train", check=False), "no subfolder 'train' for --split", "dev, test")
