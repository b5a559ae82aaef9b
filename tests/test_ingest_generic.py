"""The generic adapter: MMLU-, ARC- and PIQA-shaped files ingest by column mapping alone."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import one_line_error, run_cli
from curate.items.store import Workspace

MMLU = [
    {"question": "What is the capital of France?", "subject": "geography",
     "choices": ["Berlin", "Paris", "Rome", "Madrid"], "answer": "B"},
    {"question": "Which gas do plants take in?", "subject": "biology",
     "choices": ["Oxygen", "Nitrogen", "Carbon dioxide", "Helium"], "answer": "C"},
    {"question": "2 + 2 = ?", "subject": "math", "choices": ["3", "4", "5", "22"], "answer": "b"},
    {"question": "Largest planet?", "subject": "astronomy", "choices": ["Jupiter", "Mars", "Venus", "Earth"], "answer": "A"},
]


def test_mmlu_shaped_jsonl_with_letter_answers(tmp_path):
    data = tmp_path / "mmlu.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in MMLU))
    ws = tmp_path / "ws"
    run_cli("init", ws, "--benchmark", "generic", "--name", "mmlu", "--data", data, "--split", "test",
            "--question", "question", "--choices", "choices", "--answer", "answer",
            "--source-column", "subject", "--template", "Question: {question}\nAnswer:")
    with Workspace.open(ws) as w:
        items = w.items()
    assert [it["gold"] for it in items] == [1, 2, 1, 0]
    assert items[1]["item_id"] == "mmlu/test/1" and items[1]["source"] == "biology"
    assert items[0]["prompts"]["full"] == "Question: What is the capital of France?\nAnswer:"
    assert items[0]["prompts"]["zero"] == "" and items[0]["prompts"]["choice-only"] == ""


def test_mmlu_shaped_parquet_with_index_answers_and_wide_csv(tmp_path):
    frame = pd.DataFrame(MMLU).assign(answer=[1, 2, 1, 0])
    frame.to_parquet(tmp_path / "mmlu.parquet")
    run_cli("init", tmp_path / "ws1", "--benchmark", "generic", "--data", tmp_path / "mmlu.parquet",
            "--question", "question", "--choices", "choices", "--answer", "answer", "--answer-format", "index")
    wide = pd.DataFrame({"q": [r["question"] for r in MMLU],
                         **{f"opt{k}": [r["choices"][k] for r in MMLU] for k in range(4)},
                         "key": ["B", "C", "B", "A"]})
    wide.to_csv(tmp_path / "mmlu.csv", index=False)
    run_cli("init", tmp_path / "ws2", "--benchmark", "generic", "--data", tmp_path / "mmlu.csv",
            "--question", "q", "--choices", "opt0,opt1,opt2,opt3", "--answer", "key", "--answer-format", "letter")
    with Workspace.open(tmp_path / "ws1") as a, Workspace.open(tmp_path / "ws2") as b:
        ia, ib = a.items(), b.items()
    assert [i["gold"] for i in ia] == [i["gold"] for i in ib] == [1, 2, 1, 0]
    assert [i["options"] for i in ia] == [i["options"] for i in ib]
    assert [i["content_hash"] for i in ia] == [i["content_hash"] for i in ib]


def test_arc_shaped_labels(tmp_path):
    rows = [{"id": "Mercury_1", "question": "Which is a metal?", "answerKey": "3",
             "choices": {"text": ["wood", "glass", "iron"], "label": ["1", "2", "3"]}},
            {"id": "Mercury_2", "question": "Which is wet?", "answerKey": "A",
             "choices": {"text": ["water", "sand", "salt", "dust"], "label": ["A", "B", "C", "D"]}}]
    data = tmp_path / "arc.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--name", "arc", "--data", data,
            "--question", "question", "--choices", "choices", "--answer", "answerKey",
            "--choice-labels", "choices.label", "--id-columns", "id")
    with Workspace.open(tmp_path / "ws") as w:
        items = w.items()
    assert [i["gold"] for i in items] == [2, 0] and [len(i["options"]) for i in items] == [3, 4]
    assert items[0]["native_ids"] == {"id": "Mercury_1"}


def test_piqa_shaped_two_columns(tmp_path):
    rows = [{"goal": "Open a jar.", "sol1": "Twist the lid.", "sol2": "Freeze the jar.", "label": 0}]
    data = tmp_path / "piqa.jsonl"
    data.write_text(json.dumps(rows[0]) + "\n")
    run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", data,
            "--question", "goal", "--choices", "sol1,sol2", "--answer", "label")
    with Workspace.open(tmp_path / "ws") as w:
        [item] = w.items()
    assert item["options"] == ["Twist the lid.", "Freeze the jar."] and item["gold"] == 0


def test_generic_errors_name_row_and_field(tmp_path):
    rows = [dict(MMLU[0]), dict(MMLU[1], answer="Qq"), dict(MMLU[2])]
    data = tmp_path / "mmlu.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", data,
                   "--question", "question", "--choices", "choices", "--answer", "answer", check=False)
    assert proc.returncode == 2
    assert "mmlu.jsonl" in proc.stderr and "row 1" in proc.stderr and "field 'answer'" in proc.stderr
    assert not (tmp_path / "ws").exists()
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", data,
                   "--question", "question", "--choices", "options", "--answer", "answer", check=False)
    assert proc.returncode == 2 and "row 0" in proc.stderr and "field 'options'" in proc.stderr


@pytest.mark.parametrize("row, args, message", [
    # labels that do not pair one to one with the options would read the gold against others
    ({"q": "Q", "opts": {"text": ["a", "b", "c"], "label": ["A", "B"]}, "key": "B"},
     ["--choices", "opts", "--choice-labels", "opts.label"], "row 0, field 'opts.label': 2 labels for 3 options"),
    ({"q": "Q", "opts": {"text": ["a", "b", "c"], "label": ["A", "A", "B"]}, "key": "A"},
     ["--choices", "opts", "--choice-labels", "opts.label"], "row 0, field 'opts.label': label 'A' appears twice"),
    ({"q": "Q", "choices": ["a", "b"], "key": 0, "z": 5},
     ["--choices", "choices", "--zero-column", "z"], "row 0, field 'z': expected str, got int"),
    ({"q": "Q", "choices": ["a", "b"], "key": 0, "z": ["x"]},
     ["--choices", "choices", "--zero-column", "z"], "row 0, field 'z': expected str, got list"),
])
def test_labels_and_zero_column_are_checked_naming_the_field(tmp_path, row, args, message):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(row) + "\n")
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", data, "--question", "q",
                   "--answer", "key", *args, check=False)
    assert one_line_error(proc).endswith(message)
    assert not (tmp_path / "ws").exists()


def test_a_column_mapping_naming_no_column_is_a_usage_error(tmp_path):
    proc = run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", tmp_path / "x.jsonl",
                   "--question", "q", "--choices", ",", "--answer", "a", check=False)
    assert proc.returncode == 2 and "name the choices column(s)" in proc.stderr and "Traceback" not in proc.stderr


def test_columns_take_the_audit_configs_mapping_inline_or_as_a_file_as_the_single_flags_do(tmp_path):
    """`curate init --columns` is the audit config's benchmark.columns: the same keys, the same
    checks; the single flags (hidden now) still work and give the same items."""
    data = tmp_path / "mmlu.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in MMLU))
    common = ("init", "--benchmark", "generic", "--data", data, "--split", "test")
    run_cli(common[0], tmp_path / "flags", *common[1:], "--name", "mmlu", "--question", "question",
            "--choices", "choices", "--answer", "answer", "--source-column", "subject")
    mapping = "{name: mmlu, question: question, choices: choices, answer: answer, source: subject}"
    run_cli(common[0], tmp_path / "inline", *common[1:], "--columns", mapping)
    (tmp_path / "columns.yaml").write_text("name: mmlu\nquestion: question\nchoices: choices\nanswer: answer\n")
    run_cli(common[0], tmp_path / "file", *common[1:], "--columns", tmp_path / "columns.yaml", "--source-column", "subject")
    with Workspace.open(tmp_path / "flags") as a, Workspace.open(tmp_path / "inline") as b, \
            Workspace.open(tmp_path / "file") as c:
        assert a.items() and [i["content_hash"] for i in a.items()] == [i["content_hash"] for i in b.items()] == \
            [i["content_hash"] for i in c.items()]
    assert "--question" not in run_cli("init", "--help").stdout  # one spelling shown: --columns

    bad_key = run_cli(common[0], tmp_path / "w1", *common[1:], "--columns", "{question: q, choices: c, answr: a}",
                      check=False)
    assert bad_key.returncode == 2 and "--columns" in bad_key.stderr and "answr" in bad_key.stderr
    twice = run_cli(common[0], tmp_path / "w2", *common[1:], "--columns", mapping, "--question", "q", check=False)
    assert twice.returncode == 2 and "--question and --columns both give question" in twice.stderr
    builtin = run_cli("init", tmp_path / "w3", "--benchmark", "piqa", "--data", data, "--columns", mapping, check=False)
    assert builtin.returncode == 2 and "takes no column mapping" in builtin.stderr
    assert not any((tmp_path / w).exists() for w in ("w1", "w2", "w3"))


def test_a_parquet_file_replaced_with_the_same_time_is_read_anew_and_arrow_files_of_either_format(tmp_path):
    """The rows come from the bytes whose sha256 is recorded: `datasets`' cache, which knows a
    local file by path and modification time, gave a file replaced with the same time (cp -p,
    rsync -t) the old file's rows. Arrow data reads in the IPC stream and file formats."""
    import os

    import pyarrow as pa

    data = tmp_path / "data.parquet"
    args = ["--benchmark", "generic", "--question", "q", "--choices", "choices", "--answer", "ans"]
    pd.DataFrame({"q": ["old question"], "choices": [["a", "b"]], "ans": [0]}).to_parquet(data)
    run_cli("init", tmp_path / "ws1", "--data", data, *args)
    stamp = data.stat()
    pd.DataFrame({"q": ["new question"], "choices": [["a", "b"]], "ans": [1]}).to_parquet(data)
    os.utime(data, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    run_cli("init", tmp_path / "ws2", "--data", data, *args)
    with Workspace.open(tmp_path / "ws2") as ws:
        assert [(it["prompts"]["full"], it["gold"]) for it in ws.items()] == [("new question", 1)]
    table = pa.table({"q": ["Q1", "Q2"], "choices": [["a", "b"], ["c", "d"]], "ans": [0, 1]})
    for name, writer in (("stream.arrow", pa.ipc.new_stream), ("file.arrow", pa.ipc.new_file)):
        with pa.OSFile(str(tmp_path / name), "wb") as sink, writer(sink, table.schema) as out:
            out.write_table(table)
        run_cli("init", tmp_path / name.replace(".", "-"), "--data", tmp_path / name, *args)
        with Workspace.open(tmp_path / name.replace(".", "-")) as ws:
            assert [it["options"] for it in ws.items()] == [["a", "b"], ["c", "d"]]


def test_items_with_ids_arrow_cannot_type_export_to_parquet_as_json_text(tmp_path):
    """Native ids mixing numbers and text, or beyond 64 bits, ingest as written (JSON); the
    parquet export writes such a column as JSON text instead of failing with Arrow's error."""
    data = tmp_path / "ids.jsonl"
    data.write_text("".join(json.dumps({"id": i, "q": f"Q{n}", "choices": ["a", "b"], "ans": 0}) + "\n"
                            for n, i in enumerate([1, "x", 12345678901234567890123])))
    run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", data, "--question", "q",
            "--choices", "choices", "--answer", "ans", "--id-columns", "id")
    run_cli("items", tmp_path / "ws", "--out", tmp_path / "items.parquet")
    frame = pd.read_parquet(tmp_path / "items.parquet")
    assert [json.loads(v) for v in frame["native_ids"]] == [{"id": 1}, {"id": "x"}, {"id": 12345678901234567890123}]
    assert frame["options"].map(list).tolist() == [["a", "b"]] * 3  # columns Arrow can type stay nested
