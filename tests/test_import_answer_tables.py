"""`curate import-answers --format table` on real tables (issues 44 and 45): items named by the
workspace's id, the benchmark's own id or the row, and the closest id named when none fits; choice
cells read as the file shows them (MMLU's numeric options), ambiguous ones refused; a table imported
again replaces what it gave before; tables bounded in size, their output in lines. Real MMLU rows,
MMLU-Redux's development split (../shared/data/mmlu-redux-dev) and ARC-Challenge."""
from __future__ import annotations

import csv
import gzip
import json
import os
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SHARED, built_once, copy_ws, one_line_error, run_cli
from scoring.answers import open_answers, read_answers

MMLU = SHARED / "benchmarks" / "mmlu" / "test.jsonl.gz"
REDUX = SHARED / "mmlu-redux-dev"
ARC = SHARED / "benchmarks" / "arc_challenge" / "validation.jsonl.gz"


def mmlu_rows(n: int) -> list[dict]:
    with gzip.open(MMLU, "rt", encoding="utf-8") as fh:
        return [json.loads(next(fh)) for _ in range(n)]


@pytest.fixture(scope="module")
def mmlu_built(tmp_path_factory):
    """MMLU's first 20 test items (abstract_algebra): 9 have options that are numbers."""
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    return built_once(tmp_path_factory, "answer-tables-mmlu",
                      lambda folder: Ingest(folder, IngestOptions(data=str(MMLU), split="test",
                                                                  limit=20), get_adapter("mmlu")).run())


@pytest.fixture
def mmlu_ws(mmlu_built, tmp_path):
    return copy_ws(mmlu_built, tmp_path / "mmlu")


@pytest.fixture(scope="module")
def redux_built(tmp_path_factory):
    """MMLU-Redux's 1900 development items by generic ingest, their own ids kept (ids: [id])."""
    return built_once(tmp_path_factory, "answer-tables-redux", lambda folder: run_cli(
        "init", folder, "--benchmark", "generic", "--data", REDUX / "items.jsonl", "--split", "test",
        "--columns", "{question: question, choices: choices, answer: answer, ids: [id]}"))


@pytest.fixture(scope="module")
def arc_built(tmp_path_factory):
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    return built_once(tmp_path_factory, "answer-tables-arc",
                      lambda folder: Ingest(folder, IngestOptions(data=str(ARC),
                                                                  limit=20), get_adapter("arc_challenge")).run())


@pytest.fixture
def arc_ws(arc_built, tmp_path):
    return copy_ws(arc_built, tmp_path / "arc")


def write_table(path: Path, rows: list[tuple], header=("model", "item", "choice")) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(header)
        out.writerows(rows)
    return path


def choice(value) -> int | None:
    import pandas as pd
    return None if pd.isna(value) else int(value)


def choices_of(ws) -> dict:
    return {(r.model, r.item_id): choice(r.choice) for r in read_answers(ws).itertuples()}


# --- items: the workspace's id, the benchmark's own id, the row ----------------------------------

def test_items_by_the_benchmarks_own_ids(redux_built, tmp_path):
    """MMLU-Redux's answers.csv names items by the benchmark's own ids (abstract_algebra/0): every
    row lands on its item, checked against the file's letters."""
    ws = copy_ws(redux_built, tmp_path / "ws")
    proc = run_cli("import-answers", ws, "--format", "table", REDUX / "answers.csv")
    assert "imported 37806 answers of 20 models (table)" in proc.stdout, proc.stdout
    with open_answers(ws) as w:
        own = {it["item_id"]: it["native_ids"]["id"] for it in w.items()}
    got = read_answers(ws)
    with (REDUX / "answers.csv").open(encoding="utf-8") as fh:
        expected = {(r["model"], r["item"]): (None if not r["choice"] else "ABCD".index(r["choice"]))
                    for r in csv.DictReader(fh)}
    assert {(r.model, own[r.item_id]): choice(r.choice) for r in got.itertuples()} == expected


@pytest.mark.parametrize("cell, closest", [("abstract_algebra/O", "abstract_algebra/0"),
                                           ("high_school_physic/12", "high_school_physics/12"),
                                           ("generic/test/12O5", "generic/test/1205")])
def test_an_item_that_matches_nothing_names_the_closest_id(redux_built, tmp_path, cell, closest):
    ws = copy_ws(redux_built, tmp_path / "ws")
    table = write_table(tmp_path / "a.csv", [("m", "abstract_algebra/1", "A"), ("m", cell, "B")])
    line = one_line_error(run_cli("import-answers", ws, "--format", "table", table, check=False),
                          f"{table}, row 1, field 'item': {cell!r} is no item id of the workspace, nor a row of it "
                          f"(0-1899), nor one of the benchmark's own ids (id)", f"the closest is {closest!r}",
                          "nothing was imported")
    assert len(read_answers(ws)) == 0, line


def test_item_references_of_every_kind_in_one_table(redux_built, tmp_path):
    from curate.items.references import ItemRefs
    ws = copy_ws(redux_built, tmp_path / "ws")
    with open_answers(ws) as w:
        items = w.items()
    refs = ItemRefs(items)
    assert refs.find("abstract_algebra/3")["item_id"] == items[3]["item_id"]
    assert refs.find(items[7]["item_id"])["row_index"] == 7
    assert refs.find("12")["row_index"] == refs.find(12)["row_index"] == refs.find(12.0)["row_index"] == 12
    assert refs.find("12", how="row")["row_index"] == 12
    with pytest.raises(ValueError, match="is not a row of the workspace"):
        refs.find("abstract_algebra/3", how="row")
    # the column functions other table readers take: one list in, one out, the bad cell by position
    from curate.items.references import CellError, items_of, options_of
    column = items_of(["abstract_algebra/3", items[7]["item_id"], 12, "abstract_algebra/3"], refs)
    assert [it["row_index"] for it in column] == [3, 7, 12, 3]
    with pytest.raises(CellError) as exc:
        items_of(["abstract_algebra/3", "abstract_algebra/O"], refs)
    assert exc.value.index == 1 and "the closest is 'abstract_algebra/0'" in str(exc.value)
    assert options_of(column, ["A", "", None, items[3]["options"][2]]) == [0, None, None, 2]
    with pytest.raises(CellError) as exc:
        options_of(column, ["A", "B", "Z", "C"])
    assert exc.value.index == 2 and "is past item" in str(exc.value)
    table = write_table(tmp_path / "t.csv", [("m", "abstract_algebra/3", "A"), ("m", items[7]["item_id"], "B"),
                                             ("m", "12", "C")])
    run_cli("import-answers", ws, "--format", "table", table)
    assert choices_of(ws) == {("m", items[3]["item_id"]): 0, ("m", items[7]["item_id"]): 1,
                              ("m", items[12]["item_id"]): 2}


@pytest.mark.parametrize("cell", ["²", "٣", "１", "1.5", "-1", "True"])
def test_an_item_cell_that_is_no_row_is_one_line(arc_ws, tmp_path, cell):
    """A Unicode digit (²: str.isdigit says yes, int() says no) is no row: one line, no traceback."""
    table = write_table(tmp_path / "t.csv", [("m", "0", "A"), ("m", cell, "B")])
    one_line_error(run_cli("import-answers", arc_ws, "--format", "table", table, check=False),
                   f"{table}, row 1, field 'item': {cell!r} is no item id of the workspace, nor a row of it (0-19)",
                   "nothing was imported")


@pytest.mark.parametrize("cell", ["²", "٣", "１"])
def test_a_choice_cell_of_unicode_digits_is_one_line(arc_ws, tmp_path, cell):
    table = write_table(tmp_path / "t.csv", [("m", "0", "A"), ("m", "1", cell)])
    one_line_error(run_cli("import-answers", arc_ws, "--format", "table", table, check=False),
                   f"{table}, row 1, field 'choice': {cell!r} is no option of item", "nothing was imported")


def test_a_row_and_another_items_own_id_alike_are_refused_unless_declared(tmp_path):
    """HellaSwag's own id `ind` is a number: in a table whose every cell is both a row and an
    `ind`, each reading naming another item, the cell is refused until --item-as says which."""
    from conftest import small_workspace
    ws = small_workspace(tmp_path / "ws", 30)
    with open_answers(ws) as w:
        items = w.items()
    assert items[0]["native_ids"]["ind"] == 24  # row 0 is ind 24; row 24 is another item
    table = write_table(tmp_path / "t.csv", [("m", "24", "A")])
    one_line_error(run_cli("import-answers", ws, "--format", "table", table, check=False),
                   f"{table}, row 0, field 'item': '24' is the benchmark's own id (ind) of item {items[0]['item_id']} "
                   f"and the row of item {items[24]['item_id']}", "--item-as row", "--item-as own")
    run_cli("import-answers", ws, "--format", "table", table, "--item-as", "own")
    assert choices_of(ws) == {("m", items[0]["item_id"]): 0}
    run_cli("import-answers", ws, "--format", "table", table, "--item-as", "row")
    assert choices_of(ws) == {("m", items[24]["item_id"]): 0}  # the same file again: replaced
    # a table of rows where most cells are no ind: read as rows, as it can only be
    rows = write_table(tmp_path / "rows.csv", [("m", str(i), "A") for i in range(30)])
    run_cli("import-answers", ws, "--format", "table", rows)
    assert {i for (_, i) in choices_of(ws)} >= {it["item_id"] for it in items}


# --- choices: index, letter or text, and the ones that are two of them ---------------------------

def numeric_items(ws) -> list[dict]:
    """Items one of whose options is the digit of another option's index."""
    with open_answers(ws) as w:
        return [it for it in w.items()
                if any(o.strip().isdigit() and int(o) < len(it["options"]) and it["options"][int(o)] != o
                       for o in it["options"])]


def test_a_table_of_option_texts_on_mmlus_numeric_options(mmlu_ws, tmp_path):
    """Each of the 20 items answered by an option's text: the items whose options are numbers
    (['8', '2', '24', '120']) read as text like every other cell of the file, never as an index."""
    with open_answers(mmlu_ws) as w:
        items = w.items()
    assert len(numeric_items(mmlu_ws)) >= 5
    picks = {it["item_id"]: (it["gold"] + 1) % 4 for it in items}
    table = write_table(tmp_path / "texts.csv", [("m", it["item_id"], it["options"][picks[it["item_id"]]])
                                                 for it in items])
    run_cli("import-answers", mmlu_ws, "--format", "table", table)
    assert choices_of(mmlu_ws) == {("m", i): c for i, c in picks.items()}
    row1 = next(it for it in items if it["options"] == ["8", "2", "24", "120"])
    assert choices_of(mmlu_ws)[("m", row1["item_id"])] == picks[row1["item_id"]]


def test_a_choice_that_is_an_index_and_another_options_text_is_refused(mmlu_ws, tmp_path):
    """A file whose every cell reads both ways: refused naming file, row and field, until
    --choice-as says how the column is read."""
    items = numeric_items(mmlu_ws)
    rows, expected_text, expected_index = [], {}, {}
    for it in items:
        text = next(o for o in it["options"] if o.strip().isdigit() and int(o) < 4 and it["options"][int(o)] != o)
        rows.append(("m", it["item_id"], text))
        expected_text[("m", it["item_id"])] = it["options"].index(text)
        expected_index[("m", it["item_id"])] = int(text)
    table = write_table(tmp_path / "both.csv", rows)
    first = items[0]
    cell = rows[0][2]
    one_line_error(run_cli("import-answers", mmlu_ws, "--format", "table", table, check=False),
                   f"{table}, row 0, field 'choice': {cell!r} is option {int(cell)}'s index and option "
                   f"{first['options'].index(cell)}'s text of item {first['item_id']}",
                   "--choice-as index", "--choice-as text", "nothing was imported")
    assert len(read_answers(mmlu_ws)) == 0
    run_cli("import-answers", mmlu_ws, "--format", "table", table, "--choice-as", "text")
    assert choices_of(mmlu_ws) == expected_text
    run_cli("import-answers", mmlu_ws, "--format", "table", table, "--choice-as", "index")
    assert choices_of(mmlu_ws) == expected_index


def test_one_ambiguous_cell_among_letters_and_texts_is_refused(mmlu_ws, tmp_path):
    with open_answers(mmlu_ws) as w:
        items = w.items()
    [amb] = [it for it in items if it["options"] == ["8", "2", "24", "120"]]
    plain = [it for it in items if not any(o.strip().isdigit() or len(o.strip()) == 1 for o in it["options"])]
    rows = [("m", it["item_id"], "ABCD"[it["gold"]]) for it in plain[:3]] + [("m", amb["item_id"], "2")] + \
           [("m", plain[3]["item_id"], plain[3]["options"][0])]
    table = write_table(tmp_path / "mixed.csv", rows)
    one_line_error(run_cli("import-answers", mmlu_ws, "--format", "table", table, check=False),
                   f"{table}, row 3, field 'choice': '2' is option 2's index and option 1's text of item "
                   f"{amb['item_id']}", "--choice-as")
    run_cli("import-answers", mmlu_ws, "--format", "table", table, "--choice-as", "letter", check=False)
    assert len(read_answers(mmlu_ws)) == 0  # '2' is no letter, the text no letter either: refused whole


def test_choice_as_letter_reads_only_letters(arc_ws, tmp_path):
    table = write_table(tmp_path / "t.csv", [("m", "0", "B"), ("m", "1", "(C)")])
    run_cli("import-answers", arc_ws, "--format", "table", table, "--choice-as", "letter")
    assert sorted(choices_of(arc_ws).values()) == [1, 2]
    bad = write_table(tmp_path / "bad.csv", [("m", "0", "1")])
    one_line_error(run_cli("import-answers", arc_ws, "--format", "table", bad, "--choice-as", "letter", check=False),
                   f"{bad}, row 0, field 'choice': '1' is not a letter of item")


# --- importing again replaces; the audit notices a changed file ----------------------------------

def test_rows_deleted_from_a_table_leave_the_workspace_when_it_is_imported_again(arc_ws, tmp_path):
    table = write_table(tmp_path / "t.csv", [("m1", str(i), "A") for i in range(10)] + [("m2", "0", "B")])
    run_cli("import-answers", arc_ws, "--format", "table", table)
    other = write_table(tmp_path / "other.csv", [("m1", "15", "C")])
    run_cli("import-answers", arc_ws, "--format", "table", other)
    assert len(read_answers(arc_ws)) == 12
    write_table(table, [("m1", str(i), "A") for i in range(4)])  # m2 gone, m1 down to 4 rows
    proc = run_cli("import-answers", arc_ws, "--format", "table", table)
    got = read_answers(arc_ws)
    assert sorted(got["model"]) == ["m1"] * 5 and len(got) == 5, got  # 4 from t.csv, 1 from other.csv
    assert "replaced the 11 answers" in proc.stdout, proc.stdout
    with open_answers(arc_ws) as w:  # the run record of m2 went with its answers
        assert sorted(r[0] for r in w.conn.execute("SELECT model FROM answer_runs")) == ["m1", "m1"]


def test_a_file_imported_under_another_name_keeps_both(arc_ws, tmp_path):
    table = write_table(tmp_path / "t.csv", [("m1", str(i), "A") for i in range(5)])
    run_cli("import-answers", arc_ws, "--format", "table", table)
    run_cli("import-answers", arc_ws, "--format", "table", table, "--model", "renamed")
    write_table(table, [("m1", str(i), "A") for i in range(2)])
    run_cli("import-answers", arc_ws, "--format", "table", table)
    assert read_answers(arc_ws)["model"].value_counts().to_dict() == {"renamed": 5, "m1": 2}


def test_an_older_workspaces_imports_are_replaced_too(arc_ws, tmp_path):
    """Answers stored before answers recorded their file: the first import again still replaces
    them (the run record names the one file they came from)."""
    import sqlite3
    table = write_table(tmp_path / "t.csv", [("m1", str(i), "A") for i in range(6)])
    run_cli("import-answers", arc_ws, "--format", "table", table)
    with sqlite3.connect(arc_ws / "workspace.db") as conn:  # as the release before left it
        conn.executescript("UPDATE answers SET file = NULL; DELETE FROM answer_imports; "
                           "DELETE FROM migrations WHERE name = 'answers-003-files';")
        conn.executescript("ALTER TABLE answers DROP COLUMN file; "
                           "ALTER TABLE answers DROP COLUMN named; "
                           "DROP TABLE answer_imports;")
    write_table(table, [("m1", str(i), "A") for i in range(3)])
    run_cli("import-answers", arc_ws, "--format", "table", table)
    assert len(read_answers(arc_ws)) == 3


# --- bounds: size, rows, lines printed ---------------------------------------------------------

def test_a_table_that_is_a_device_is_refused_at_once(arc_ws, tmp_path):
    zero = tmp_path / "zero.csv"
    zero.symlink_to("/dev/zero")
    one_line_error(run_cli("import-answers", arc_ws, "--format", "table", zero, check=False, timeout=60),
                   f"{zero}: is not a regular file")


def test_a_table_over_the_limits_is_refused(arc_ws, tmp_path, monkeypatch):
    from curate.core.errors import CurateError
    from scoring.answer_imports import import_answers, table

    monkeypatch.setattr(table, "MAX_ROWS", 50)
    path = write_table(tmp_path / "t.csv", [(f"m{j}", str(i), "A") for j in range(3) for i in range(20)])
    with pytest.raises(CurateError, match=r"holds more than 50 answers, the most one import reads"):
        import_answers(arc_ws, "table", [path])
    monkeypatch.setattr(table, "MAX_BYTES", 100)
    with pytest.raises(CurateError, match=r"is larger than 100 bytes, the size limit of an answers table"):
        import_answers(arc_ws, "table", [path])
    gz = tmp_path / "t.csv.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    with pytest.raises(CurateError, match=r"is larger than 100 bytes, the size limit of an answers table"):
        import_answers(arc_ws, "table", [gz])
    assert len(read_answers(arc_ws)) == 0


def test_many_models_print_a_few_lines_and_a_count(arc_ws, tmp_path):
    path = write_table(tmp_path / "t.csv", [(f"model-{j}", str(i), "ABCD"[(i + j) % 4])
                                            for j in range(500) for i in range(20)])
    proc = run_cli("import-answers", arc_ws, "--format", "table", path)
    lines = proc.stdout.splitlines()
    assert len(lines) <= 25, proc.stdout
    assert "... and 490 more models" in proc.stdout and "imported 10000 answers of 500 models" in proc.stdout


@pytest.mark.slow
def test_a_million_row_table_stays_small(arc_ws, tmp_path):
    """1,000,000 answers (50,000 models x 20 items, 17 MB): measured 900 MB and 82 s before."""
    path = write_table(tmp_path / "big.csv", [(f"model-{j}", str(i), "ABCD"[(i + j) % 4])
                                              for j in range(50_000) for i in range(20)])
    code = ("import resource, sys\nfrom curate.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code\nprint('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
    import subprocess
    proc = subprocess.run([sys.executable, "-c", code, "import-answers", str(arc_ws), "--format", "table", str(path)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    peak_mb = int(proc.stdout.split("peak ")[-1]) / 1024
    print(f"peak {peak_mb:.0f} MB")
    assert peak_mb < 500 and len(proc.stdout.splitlines()) <= 25, proc.stdout[-2000:]
    assert len(read_answers(arc_ws)) == 1_000_000


def test_the_advice_of_a_garbled_table_names_options_import_answers_has(arc_ws, tmp_path):
    """A table that is not UTF-8 was refused with "name its encoding with --encoding", an option
    import-answers did not have (issue 44): it has it now, and --delimiter too."""
    table = tmp_path / "t.csv"
    table.write_bytes("model,item,choice\nmodèle,0,A\nmodèle à deux,1,B\n".encode("utf-8")
                      + "modèle,2,C\n".encode("cp1252"))
    one_line_error(run_cli("import-answers", arc_ws, "--format", "table", table, check=False),
                   f"{table}: line 4 is not valid UTF-8", "--encoding")
    latin = tmp_path / "latin.csv"
    latin.write_bytes("model;item;choice\nmodèle;0;A\n".encode("cp1252"))
    run_cli("import-answers", arc_ws, "--format", "table", latin, "--encoding", "cp1252", "--delimiter", ";")
    assert choices_of(arc_ws) == {("modèle", read_answers(arc_ws)["item_id"][0]): 0}
    one_line_error(run_cli("import-answers", arc_ws, "--format", "inspect", latin, "--encoding", "cp1252", check=False),
                   "--encoding is for --format table")
