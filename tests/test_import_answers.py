"""Answers as stored evidence (scoring/answers.py) and `curate import-answers`: answers without
probabilities stored per (model, item, run, source), from `curate generate`, Inspect AI logs,
lm-eval generate_until samples and plain tables, each refused in one line when bad and stored
all or nothing."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import SHARED, built_once, copy_ws, run_cli
from scoring.answers import open_answers, read_answers, read_runs, store_answers

ARC = SHARED / "benchmarks" / "arc_challenge" / "validation.jsonl.gz"


@pytest.fixture(scope="module")
def arc_ws(tmp_path_factory):
    """The first 20 ARC-Challenge items (read-only; tests copy it)."""
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    return built_once(tmp_path_factory, "answers-arc-ws",
                      lambda folder: Ingest(folder, IngestOptions(data=str(ARC),
                                                                  limit=20), get_adapter("arc_challenge")).run())


@pytest.fixture
def ws(arc_ws, tmp_path):
    return copy_ws(arc_ws, tmp_path / "ws")


def items_of(root):
    with open_answers(root) as w:
        return w.items()


def runs_of(root):
    with open_answers(root) as w:
        return read_runs(w)


# --- the store ---------------------------------------------------------------------------------

def test_store_and_read_answers(ws):
    items = items_of(ws)
    frame = pd.DataFrame({"model": ["m1", "m1", "m1", "m2"],
                          "item_id": [items[0]["item_id"], items[0]["item_id"], items[1]["item_id"],
                                      items[1]["item_id"]],
                          "choice": [items[0]["gold"], 1, np.nan, 0],
                          "run": ["seed=0", "seed=1", "seed=0", "epoch=1"]})
    info = {"file": "x.csv", "url": "https://me:hunter2hunter2@gw.example/v1"}
    assert store_answers(ws, frame, model_source="table", info=info) == 4
    got = read_answers(ws)
    assert list(got.columns) == ["model", "item_id", "choice", "run", "source"]
    assert str(got["choice"].dtype) == "Int64"
    assert got["choice"].isna().sum() == 1  # the unreadable answer is kept, as <NA>
    assert set(got["source"]) == {"table"}
    m1 = got[got["model"] == "m1"]  # by run, then in the items' row order
    assert m1["run"].tolist() == ["seed=0", "seed=0", "seed=1"]
    assert m1["item_id"].tolist() == [items[0]["item_id"], items[1]["item_id"], items[0]["item_id"]]
    runs = runs_of(ws)
    assert sorted(runs["model"]) == ["m1", "m2"] and "hunter2" not in "".join(runs["info_json"])

    # again: replaced, not duplicated; the replaced runs' records go
    frame.loc[1, "choice"] = 2
    store_answers(ws, frame, model_source="table", info={"file": "x.csv"})
    again = read_answers(ws)
    assert len(again) == 4 and again[(again["run"] == "seed=1")]["choice"].tolist() == [2]
    assert len(runs_of(ws)) == 2
    # another source keeps its own rows beside them
    store_answers(ws, frame.iloc[:1], model_source="inspect", info={})
    assert sorted(read_answers(ws)["source"].value_counts().items()) == [("inspect", 1), ("table", 4)]


@pytest.mark.parametrize("change, expected", [
    ({"item_id": "nope"}, "item 'nope', field 'item_id': no such item"),
    ({"choice": 9}, "field 'choice': option 9 is not one of the item's"),
    ({"choice": -1}, "field 'choice': option -1"),
    ({"choice": 1.5}, "field 'choice': 1.5 is not an option index"),
    ({"choice": "B"}, "field 'choice': 'B' is not an option index"),
    ({"run": ""}, "field 'run'"),
    ({"model": None}, "field 'model'"),
])
def test_store_refuses_bad_rows_storing_nothing(ws, change, expected):
    items = items_of(ws)
    good = {"model": "m", "item_id": items[0]["item_id"], "choice": 0, "run": "r"}
    frame = pd.DataFrame([good, {**good, "item_id": items[1]["item_id"]}, {**good, "item_id": items[2]["item_id"],
                                                                          **change}])
    from curate.core.errors import CurateError
    with pytest.raises(CurateError) as exc:
        store_answers(ws, frame, model_source="table", info={})
    message = str(exc.value)
    assert "\n" not in message and "answers row 2" in message and expected in message, message
    assert "nothing was stored" in message
    assert len(read_answers(ws)) == 0 and len(runs_of(ws)) == 0


def test_store_refuses_an_answer_given_twice(ws):
    item = items_of(ws)[0]["item_id"]
    frame = pd.DataFrame({"model": ["m", "m"], "item_id": [item, item], "choice": [0, 1], "run": ["r", "r"]})
    from curate.core.errors import CurateError
    with pytest.raises(CurateError, match="answers it twice in run 'r' \\(rows 0 and 1\\)"):
        store_answers(ws, frame, model_source="table", info={})
    with pytest.raises(CurateError, match="unknown source 'csv'"):
        store_answers(ws, frame.iloc[:1], model_source="csv", info={})


# --- curate generate's answers ---------------------------------------------------------------

def generate_answers(ws, monkeypatch):
    """`curate generate` by the stand-in Claude, always replying 2 (the second option shown)."""
    from annotate_helpers import MODEL, api_env
    from generate.run import Generate
    from generate.options import GenerateOptions
    from standin_anthropic import StandIn

    with StandIn(text_reply=lambda body: "2") as server:
        api_env(monkeypatch, server.url)
        Generate(ws, GenerateOptions(model=f"anthropic:{MODEL}", modes=["full"], seeds=2, quiet=True, limit=4,
                                     backoff=0.01)).run()


def generated(ws):
    from generate.store import open_generations, read_generations
    with open_generations(ws) as w:
        return read_generations(w)


def test_generated_answers_reach_the_store_mapped_to_the_original_option(ws, monkeypatch):
    generate_answers(ws, monkeypatch)
    records = generated(ws)
    got = read_answers(ws)
    assert len(got) == len(records) == 8 and set(got["source"]) == {"generate"}
    expected = {(r.model, r.item_id, f"mode=full,seed={r.seed},template={r.template},settings={r.settings}"):
                r.order[1] for r in records.itertuples()}
    assert {(r.model, r.item_id, r.run): r.choice for r in got.itertuples()} == expected
    assert any(order[1] != 1 for order in records["order"])  # the options were shuffled: mapped back, not copied


def test_generations_of_an_older_workspace_are_copied_once(ws, monkeypatch):
    """A workspace whose generations were stored before the answers table existed gets them the
    first time its answers are read; generating again keeps both in step."""
    import sqlite3

    generate_answers(ws, monkeypatch)
    before = read_answers(ws)
    with sqlite3.connect(ws / "workspace.db") as conn:  # as an older release left it
        conn.executescript("DROP TABLE answers; DROP TABLE answer_runs; "
                           "DELETE FROM migrations WHERE name LIKE 'answers-%';")
    pd.testing.assert_frame_equal(read_answers(ws), before)
    assert runs_of(ws)["source"].tolist() == ["generate"]

    from generate.store import delete_generations, open_generations
    with open_generations(ws) as w, w.transaction():  # what `curate generate --replace` does first
        [(template, settings)] = w.conn.execute("SELECT DISTINCT template, settings FROM generations").fetchall()
        delete_generations(w, before["model"][0], template, settings)
    assert len(read_answers(ws)) == 0 and len(runs_of(ws)) == 0


# --- Inspect AI logs -------------------------------------------------------------------------

#: What the stand-in model answers per item (by its position among the first 8): the option
#: ``gold + k`` (in the item's own order), or a reply with no letter (k None).
PLAN = [0, 1, 2, None, 0, 3, 1, 0]


@pytest.fixture(scope="module")
def inspect_log(arc_ws, tmp_path_factory):
    """A real Inspect AI eval log: Inspect's multiple_choice() solver and choice() scorer on the
    first 8 items, options shuffled when read (shuffle_choices), asked of Inspect's anthropic
    provider pointed at the loopback stand-in, which answers by option text (``PLAN``). Sample
    ids: an item id, a native id, or none of the workspace's (matched by content)."""
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.scorer import choice
    from inspect_ai.solver import multiple_choice

    from annotate_helpers import KEY, MODEL
    from standin_anthropic import StandIn

    items = items_of(arc_ws)[:8]
    expected = {it["item_id"]: (None if k is None else (it["gold"] + k) % len(it["options"]))
                for it, k in zip(items, PLAN)}
    wanted = {it["context_parts"]["question"]: (None if expected[it["item_id"]] is None
                                                else it["options"][expected[it["item_id"]]]) for it in items}

    def reply(body):
        text = body["messages"][0]["content"]
        text = text if isinstance(text, str) else "\n".join(b.get("text", "") for b in text)
        question = next(q for q in wanted if q in text)
        if wanted[question] is None:
            return "I would rather not say."
        letter = next(line[0] for line in text.splitlines() if line[1:3] == ") " and line[3:] == wanted[question])
        return f"ANSWER: {letter}"

    ids = [it["item_id"] if i % 3 == 0 else it["native_ids"]["id"] if i % 3 == 1 else f"q{i}"
           for i, it in enumerate(items)]
    dataset = MemoryDataset([Sample(input=it["context_parts"]["question"], choices=it["options"],
                                    target="ABCDE"[it["gold"]], id=sid) for it, sid in zip(items, ids)])
    dataset.shuffle_choices(seed=7)
    folder = tmp_path_factory.mktemp("inspect-logs")
    with StandIn(text_reply=reply) as server, pytest.MonkeyPatch.context() as env:
        env.setenv("ANTHROPIC_API_KEY", KEY)
        env.setenv("ANTHROPIC_BASE_URL", server.url)
        # the stand-in answers plain requests: no streaming (Inspect streams only when asked or for long replies)
        [log] = inspect_eval(Task(dataset=dataset, solver=multiple_choice(), scorer=choice()),
                             model=f"anthropic/{MODEL}", model_args={"streaming": False}, max_tokens=16,
                             log_dir=str(folder), display="none", max_retries=0)
    assert log.status == "success", log.error
    return Path(log.location), expected


def test_inspect_log_imported_mapped_back_to_the_original_options(ws, inspect_log):
    from inspect_ai.log import read_eval_log

    path, expected = inspect_log
    log = read_eval_log(str(path))
    assert any(s.choices != items_of(ws)[i]["options"] for i, s in enumerate(log.samples))  # shown shuffled
    proc = run_cli("import-answers", ws, path.parent, "--format", "inspect")
    assert "8 answers (1 unreadable), 1 run" in proc.stdout
    got = read_answers(ws)
    assert {r.item_id: (None if pd.isna(r.choice) else r.choice) for r in got.itertuples()} == expected
    assert set(got["model"]) == {log.eval.model} and set(got["source"]) == {"inspect"}
    assert got["run"].iloc[0] == f"task={log.eval.task},eval={log.eval.eval_id},epoch=1"
    from scoring.answer_imports import import_answers
    import_answers(ws, "inspect", [path], model="claude")  # again, renamed
    again = read_answers(ws)
    assert len(again) == 16 and (again[again["model"] == "claude"]["choice"].tolist()
                                 == got["choice"].tolist())


def changed_log(path: Path, out: Path, change) -> Path:
    """A copy of the log with ``change(samples)`` applied, written by Inspect's own writer as a
    JSON log (Inspect's other format)."""
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(path))
    change(log.samples)
    target = out / (path.stem + ".json")
    write_eval_log(log, str(target))
    return target


def test_a_bad_inspect_log_is_refused_in_one_line_storing_nothing(ws, inspect_log, tmp_path):
    from conftest import one_line_error
    from inspect_ai.log import read_eval_log

    path, _ = inspect_log
    bad = changed_log(path, tmp_path, lambda s: s[4].choices.__setitem__(2, "Something else entirely."))
    sample_id = read_eval_log(str(path)).samples[4].id
    proc = run_cli("import-answers", ws, bad, "--format", "inspect", check=False)
    one_line_error(proc, f"{bad}, sample {sample_id!r} (epoch 1), field 'choices.2': 'Something else entirely.' is "
                         f"not an option of item", "nothing was imported")
    assert len(read_answers(ws)) == 0  # the good samples read before it: not stored either


def test_inspect_sample_with_an_error_has_no_answer(ws, inspect_log, tmp_path):
    from inspect_ai.log import EvalError

    from scoring.answer_imports import import_answers

    path, expected = inspect_log
    log = changed_log(path, tmp_path, lambda s: setattr(s[0], "error", EvalError(
        message="overloaded", traceback="", traceback_ansi="")))
    [summary] = import_answers(ws, "inspect", [log])
    assert summary["answers"] == 7 and len(read_answers(ws)) == 7
    with open_answers(ws) as w:
        assert '"samples_with_errors": 1' in w.conn.execute("SELECT info_json FROM answer_runs").fetchone()[0]


@pytest.mark.parametrize("change, field, message", [
    (lambda s: setattr(s[1], "target", "A" if s[1].target != "A" else "B"), "field 'target'",
     "is not the shown letter"),
    (lambda s: setattr(s[2].scores["choice"], "answer", "A, B"), "field 'scores.choice.answer'", "not one letter"),
    (lambda s: s.__setitem__(2, s[0]), "field 'id'", "answers already"),
    (lambda s: setattr(s[5], "choices", None), "field 'choices'", "not a multiple-choice sample"),
])
def test_inspect_refusals(ws, inspect_log, tmp_path, change, field, message):
    from curate.core.errors import CurateError
    from scoring.answer_imports import import_answers

    path, _ = inspect_log
    bad = changed_log(path, tmp_path, change)
    with pytest.raises(CurateError) as exc:
        import_answers(ws, "inspect", [bad])
    line = str(exc.value)
    assert "\n" not in line and line.startswith(f"{bad}, sample ") and field in line and message in line, line
    assert len(read_answers(ws)) == 0


# --- lm-eval generate_until samples ------------------------------------------------------------

#: lm-eval 0.4.13's own --log_samples output of arc_challenge_chat (generate_until) on the first 20
#: ARC-Challenge items, by SmolLM2-135M (benchmarks/lm_eval_generate_fixtures.py writes it).
LM_EVAL = Path(__file__).parent / "fixtures" / "lm_eval_generate" / "SmolLM2-135M"


def lm_eval_samples() -> list[dict]:
    import gzip
    import json
    [path] = LM_EVAL.glob("samples_*.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def lm_eval_copy(tmp_path: Path, samples: list[dict]) -> Path:
    """The fixture run with ``samples`` as its sample file (the results file as lm-eval wrote it)."""
    import json
    import shutil
    folder = tmp_path / "lm-eval" / "SmolLM2-135M"
    folder.mkdir(parents=True)
    [results] = LM_EVAL.glob("results_*.json")
    shutil.copy(results, folder)
    [path] = LM_EVAL.glob("samples_*.jsonl.gz")
    out = folder / path.name.removesuffix(".gz")
    out.write_text("".join(json.dumps(s) + "\n" for s in samples))
    return out


def test_lm_eval_generate_samples_imported(ws, tmp_path):
    samples = lm_eval_samples()
    items = items_of(ws)
    assert {s["filtered_resps"][0] for s in samples} <= {"A", ": A"}  # SmolLM2-135M's answers, as filtered
    proc = run_cli("import-answers", ws, LM_EVAL, "--format", "lm-eval-generate")
    assert "SmolLM2-135M" in proc.stdout and "20 answers (0 unreadable), 1 run" in proc.stdout
    got = read_answers(ws)
    assert got["choice"].tolist() == [0] * 20 and got["item_id"].tolist() == [it["item_id"] for it in items]
    [path] = LM_EVAL.glob("samples_*.jsonl.gz")
    date = path.name.split("_")[-1].removesuffix(".jsonl.gz")
    assert set(got["run"]) == {f"task=arc_challenge_chat_local,date={date},filter=remove_whitespace"}

    # answers as a letter in parentheses, an option's text, an unreadable extraction
    samples[1]["filtered_resps"] = ["(C)"]
    samples[2]["filtered_resps"] = [items[2]["options"][3]]
    samples[3]["filtered_resps"] = ["[invalid]"]
    from scoring.answer_imports import import_answers
    [summary] = import_answers(ws, "lm-eval-generate", [lm_eval_copy(tmp_path, samples)])
    assert (summary["answers"], summary["unreadable"]) == (20, 1)
    again = read_answers(ws)
    assert len(again) == 20  # replaced, not added
    assert again["choice"].astype(object).where(again["choice"].notna(), None).tolist()[:5] == [0, 2, 3, None, 0]


@pytest.mark.parametrize("change, field, message", [
    (lambda s: s[4]["doc"].update(question="What is nothing at all?"), "field 'doc'", "matches no workspace item"),
    (lambda s: s[4]["arguments"]["gen_args_0"].update(arg_0=s[4]["arguments"]["gen_args_0"]["arg_0"].replace(
        s[4]["doc"]["choices"]["text"][1], "Another option")), "field 'arguments.gen_args_0.arg_0'",
     "does not show option"),
    (lambda s: s[4].update(target="A" if s[4]["target"] != "A" else "B"), "field 'target'", "gold is option"),
    (lambda s: s[4].update(filtered_resps=[3]), "field 'filtered_resps'", "is not a text answer"),
    (lambda s: s[4]["arguments"]["gen_args_0"].update(arg_1=" The best"), "field 'arguments.gen_args_0.arg_1'",
     "not a generate_until sample"),
    (lambda s: s.append(s[4]), "field 'doc'", "answers already"),
])
def test_lm_eval_generate_refusals(ws, tmp_path, change, field, message):
    from curate.core.errors import CurateError
    from scoring.answer_imports import import_answers

    samples = lm_eval_samples()
    change(samples)
    path = lm_eval_copy(tmp_path, samples)
    with pytest.raises(CurateError) as exc:
        import_answers(ws, "lm-eval-generate", [path])
    line = str(exc.value)
    assert "\n" not in line and line.startswith(f"{path}, doc_id 4, ") and field in line and message in line, line
    assert line.endswith("nothing was imported") and len(read_answers(ws)) == 0


def test_lm_eval_generate_several_filters_need_one_named(ws, tmp_path):
    from conftest import one_line_error
    samples = lm_eval_samples()
    other = [{**s, "filter": "take_first", "filtered_resps": ["B"]} for s in samples]
    path = lm_eval_copy(tmp_path, samples + other)
    one_line_error(run_cli("import-answers", ws, path, "--format", "lm-eval-generate", check=False),
                   f"{path}, field 'filter': holds the answers of filters remove_whitespace, take_first",
                   "choose one with --filter")
    from scoring.answer_imports import import_answers
    import_answers(ws, "lm-eval-generate", [path], filter="take_first", model="smol")
    got = read_answers(ws)
    assert set(got["model"]) == {"smol"} and got["choice"].tolist() == [1] * 20


# --- plain tables --------------------------------------------------------------------------------

def test_tables_csv_jsonl_parquet(ws, tmp_path):
    import json
    items = items_of(ws)
    csv = tmp_path / "answers.csv"
    csv.write_text("model,item,choice\n"
                   f"m1,{items[0]['item_id']},2\n"          # an index
                   "m1,1,C\n"                               # a row, a letter
                   f"m1,2,\"{items[2]['options'][1].upper()}\"\n"   # an option's text (case aside)
                   "m1,3,\n")                               # unreadable
    proc = run_cli("import-answers", ws, csv, "--format", "table")
    assert "m1" in proc.stdout and "4 answers (1 unreadable), 1 run" in proc.stdout
    got = read_answers(ws)
    assert got["choice"].tolist()[:3] == [2, 2, 1] and pd.isna(got["choice"].iloc[3])
    assert set(got["run"]) == {"answers.csv"} and set(got["source"]) == {"table"}

    jsonl = tmp_path / "more.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in [
        {"model": "m2", "item": items[0]["item_id"], "choice": 1, "run": 0},
        {"model": "m2", "item": items[0]["item_id"], "choice": "B", "run": 1},
        {"model": "m2", "item": 5, "choice": None, "run": 0}]))
    parquet = tmp_path / "more.parquet"
    pd.DataFrame({"item": [items[7]["item_id"]], "choice": ["D"]}).to_parquet(parquet)
    from scoring.answer_imports import import_answers
    import_answers(ws, "table", [jsonl])
    import_answers(ws, "table", [parquet], model="m3")
    import_answers(ws, "table", [csv])  # again: replaced, not added
    got = read_answers(ws)
    assert len(got) == 8 and got.groupby("model")["run"].nunique().to_dict() == {"m1": 1, "m2": 2, "m3": 1}
    assert got[got["model"] == "m3"]["choice"].tolist() == [3]


@pytest.mark.parametrize("row, field, message", [
    ("m,nope,1", "field 'item'", "'nope' is no item id of the workspace, nor a row of it (0-19)"),
    ("m,99,1", "field 'item'", "nor a row of it"),
    ("m,4,7", "field 'choice'", "'7' is not an option index of item arc_challenge/validation/4 (0-3)"),
    ("m,4,F", "field 'choice'", "letter 'F' is past item arc_challenge/validation/4's 4 options (A-D)"),
    ("m,4,Paris", "field 'choice'", "'Paris' is no option of item arc_challenge/validation/4"),
    (",4,1", "field 'model'", "is not a model name"),
    ("m,1,2", "field 'item'", "which {bad}, row 0 answers already"),
])
def test_a_bad_table_row_is_refused_naming_file_row_and_field(ws, tmp_path, row, field, message):
    from curate.core.errors import CurateError
    from scoring.answer_imports import import_answers

    good = tmp_path / "good.csv"
    good.write_text("model,item,choice\nm,0,1\n")
    bad = tmp_path / "bad.csv"
    bad.write_text(f"model,item,choice\nm,1,1\nm,2,1\n{row}\n")
    with pytest.raises(CurateError) as exc:
        import_answers(ws, "table", [good, bad], model=None)
    line = str(exc.value)
    assert "\n" not in line and line.startswith(f"{bad}, row 2, {field}: "), line
    assert message.format(bad=bad) in line and line.endswith("nothing was imported"), line
    assert len(read_answers(ws)) == 0  # nor the good file, nor the good rows before it


def test_a_table_without_its_columns_is_refused_in_one_line(ws, tmp_path):
    from conftest import one_line_error
    bad = tmp_path / "answers.csv"
    bad.write_text("item,answer\n0,1\n")
    one_line_error(run_cli("import-answers", ws, bad, "--format", "table", check=False),
                   f"{bad}: has no column 'choice', 'model'", "or give --model", "nothing was imported")
    assert len(read_answers(ws)) == 0


def test_an_empty_lm_eval_generate_samples_file_is_refused(ws, tmp_path):
    """A samples file with no sample ended in an IndexError traceback (its filters: none)."""
    from conftest import one_line_error
    path = lm_eval_copy(tmp_path, [])
    one_line_error(run_cli("import-answers", ws, path, "--format", "lm-eval-generate", check=False),
                   f"{path}: holds no samples", "nothing was imported")
    assert len(read_answers(ws)) == 0
