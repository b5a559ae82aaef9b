"""Answers as item-validity evidence in the audit (issue 40's leftovers): the config's
``answers.imports`` (checked by check-config, run after the ingest, nothing new on a rerun), the
plan check of the answers a filter rule reads, and the report of a workspace holding answers and
no scores. Real HellaSwag rows and the study's released scores; answers from a CSV written here."""
from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest
import yaml

from conftest import HELLASWAG, built_once, copy_ws, one_line_error, run_cli, study_slice

N = 30
LETTERS = "ABCD"


def hellaswag_golds(n: int = N) -> list[int]:
    """The gold option of each of HellaSwag's first ``n`` validation rows."""
    with gzip.open(HELLASWAG, "rt", encoding="utf-8") as fh:
        return [int(json.loads(next(fh))["label"]) for _ in range(n)]


#: Three models that only answer: how each picks its option for row i with gold g.
ANSWERERS = {
    "model/strong": lambda i, g: g if i % 10 != 3 else (g + 1) % 4,
    "model/middling": lambda i, g: g if i % 3 else (g + 2) % 4,
    "model/weak": lambda i, g: (g + i) % 4,
}


def write_answers(path: Path, models=ANSWERERS, *, change=None) -> Path:
    """A table of answers (``--format table``): item as the row, choice as a letter for the strong
    model and an index for the others; the weak model's answer to row 0 could not be read.
    ``change``: {(model, row): choice} written instead."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["model", "item", "choice"])
        for model, pick in models.items():
            for i, gold in enumerate(hellaswag_golds()):
                choice = (change or {}).get((model, i), pick(i, gold))
                cell = "" if (model, i) == ("model/weak", 0) else (LETTERS[choice] if model == "model/strong" else choice)
                out.writerow([model, i, cell])
    return path


def write_config(folder: Path, *, workspace: str = "out/ws", answers=None, filter_rules=None, analyze=True,
                 **benchmark) -> Path:
    """An audit config in ``folder`` reading HellaSwag's first N rows; ``answers``: the
    ``answers.imports`` list."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"workspace": workspace,
              "benchmark": {"adapter": "hellaswag", "path": str(HELLASWAG), "limit": N, **benchmark}}
    if answers is not None:
        config["answers"] = {"imports": answers}
    if filter_rules is not None:
        config["filter"] = {"rules": filter_rules, "out": "out/decisions"}
    if analyze:
        config["analyze"] = {"out": "out/report"}
    path = folder / "audit.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


# --- 1. the config's answers imports ---------------------------------------------------------

def test_check_config_takes_answers_imports_relative_to_the_config(tmp_path):
    from curate.audit.config import load_config

    write_answers(tmp_path / "cfg" / "data" / "answers.csv")
    config = write_config(tmp_path / "cfg", answers=[{"format": "table", "path": "data/answers.csv"}])
    cfg = load_config(config, cwd=tmp_path)
    [imp] = cfg.options("answers")
    assert imp.path == tmp_path / "cfg" / "data" / "answers.csv"
    assert (imp.options.format, imp.options.model, imp.options.filter) == ("table", None, None)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run_cli("check-config", config, cwd=elsewhere)
    assert f"answers    import table answers from {tmp_path / 'cfg' / 'data' / 'answers.csv'}" in proc.stdout
    assert "plan complete" in proc.stdout, proc.stdout


@pytest.mark.parametrize("why, imports, csv_change, field, message", [
    ("unknown format", [{"format": "csv", "path": "answers.csv"}], None, "answers.imports[0].format",
     "'csv' is not one of ['inspect', 'lm-eval-generate', 'table']"),
    ("no path", [{"format": "table"}], None, "answers.imports[0].path", "missing (required)"),
    ("unknown key", [{"format": "table", "path": "answers.csv", "models": ["x"]}], None, "answers.imports[0].models",
     "unknown key; expected one of: format, path, model, filter"),
    ("missing file", [{"format": "table", "path": "nowhere.csv"}], None, "answers.imports[0].path",
     "no such file or folder"),
    ("a choice no option", [{"format": "table", "path": "answers.csv"}], {("model/middling", 2): 7},
     "answers.imports[0].path", f"row {N + 2}, field 'choice': '7' is not an option index of item"),
    ("a filter for a table", [{"format": "table", "path": "answers.csv", "filter": "strict-match"}], None,
     "answers.imports[0].filter", "filter is for format lm-eval-generate"),
])
def test_check_config_refuses_a_bad_answers_import(tmp_path, why, imports, csv_change, field, message):
    write_answers(tmp_path / "answers.csv", change=csv_change)
    config = write_config(tmp_path, answers=imports)
    line = one_line_error(run_cli("check-config", config, cwd=tmp_path, check=False), message)
    assert line.startswith(f"error: {config}, field '{field}': "), line


def test_check_config_refuses_answers_to_items_the_ingest_does_not_make(tmp_path):
    """Rows past the 30 items the ingest makes (benchmark.limit) are named before anything runs."""
    golds = hellaswag_golds()
    path = tmp_path / "answers.csv"
    path.write_text("model,item,choice\n" + "".join(f"m,{i},{golds[i % N]}\n" for i in range(N + 5)))
    config = write_config(tmp_path, answers=[{"format": "table", "path": "answers.csv"}])
    one_line_error(run_cli("check-config", config, cwd=tmp_path, check=False),
                   f"field 'answers.imports[0].path': {path}, row {N}, field 'item': '{N}' is no item id of the "
                   f"workspace, nor a row of it (0-{N - 1})")


def test_the_audit_reads_the_answers_again_right_after_its_ingest(tmp_path):
    """Where the items are known only once ingested (a Hub dataset), the audit reads the imports
    right after its ingest and stops there, naming the key, before anything is spent."""
    from curate.audit.config import load_config
    from curate.audit.run import run_audit

    golds = hellaswag_golds()
    (tmp_path / "answers.csv").write_text("model,item,choice\n" + "".join(f"m,{i},{golds[i]}\n" for i in range(N))
                                          + f"m,{N + 3},0\n")
    write_rules(tmp_path / "rules.yaml", ["model/strong"])
    cfg = load_config(write_config(tmp_path, answers=[{"format": "table", "path": "answers.csv"}],
                                   filter_rules="rules.yaml"), cwd=tmp_path)
    lines = []
    outcomes = run_audit(cfg, echo=lines.append)  # what `curate audit` runs after its own check
    assert [(o.stage, o.status) for o in outcomes] == [("ingest", "ran"), ("answers", "stopped")], lines
    assert f"field 'answers.imports[0].path': {tmp_path / 'answers.csv'}, row {N}, field 'item'" in outcomes[-1].detail
    (tmp_path / "answers.csv").write_text("model,item,choice\n" + "".join(f"m,{i},{golds[i]}\n" for i in range(N)))
    outcomes = run_audit(cfg, echo=lines.append)
    assert [(o.stage, o.status) for o in outcomes] == [("ingest", "skipped"), ("answers", "stopped")], lines
    assert outcomes[-1].detail.endswith("field 'answers': stage 'suspect' of rules.yaml read the stored answers of "
                                        "'model/strong', which the workspace does not hold and no planned answers "
                                        "import provides (answers.imports[0] imports 'm'; the workspace holds none)")


def test_the_audit_imports_answers_after_the_ingest_and_a_rerun_does_nothing_new(tmp_path):
    """ingest -> answers -> analyze on a workspace with answers and no scores; the second run
    skips the import and the report; changed answers are imported and reported again."""
    answers = write_answers(tmp_path / "answers.csv")
    config = write_config(tmp_path, answers=[{"format": "table", "path": "answers.csv"}])
    first = run_cli("audit", config, cwd=tmp_path).stdout
    assert [line.split("] ")[1] for line in first.splitlines() if line.startswith("[")] == \
        ["ingest", "answers", "analyze"], first
    assert f"imported 90 answers of 3 models (1 unreadable) from {answers} (table)" in first, first
    assert "new work   ingest, answers, analyze" in first
    metrics = json.loads((tmp_path / "out" / "report" / "metrics.json").read_text())
    assert sorted(a["model"] for a in metrics["suspects"]["answer_models"]) == sorted(ANSWERERS)

    second = run_cli("audit", config, cwd=tmp_path).stdout
    assert f"skipped table answers from {answers} already imported" in second, second
    assert "new work   none (everything was up to date)" in second, second

    write_answers(answers, change={("model/strong", 5): 0 if hellaswag_golds()[5] else 1})
    third = run_cli("audit", config, cwd=tmp_path).stdout
    assert "new work   answers, analyze" in third, third


# --- 2. the plan: the answers a filter rule reads ---------------------------------------------

@pytest.fixture(scope="module")
def scored_ws(tmp_path_factory):
    """HellaSwag's first N items with the study's released full-prompt scores (read-only)."""
    return built_once(tmp_path_factory, "audit-answers-study", lambda folder: study_slice(folder, N)) / "ws"


STUDY_MODELS = ["EleutherAI/pythia-1b", "Qwen/Qwen2.5-1.5B", "meta-llama/Llama-3.2-1B"]


def write_rules(path: Path, answers: list[str]) -> Path:
    path.write_text("name: r\nstages:\n  - name: suspect\n    when: {label_error: {models: "
                    + json.dumps(STUDY_MODELS) + ", answers: " + json.dumps(answers)
                    + ", mode: full, normalization: seq_mean, top_share: 0.1}}\n")
    return path


def test_the_plan_takes_answers_a_planned_import_provides_and_names_those_nothing_provides(tmp_path, scored_ws):
    from curate.audit.config import load_config
    from curate.audit.plan import plan_problems

    ws = copy_ws(scored_ws, tmp_path / "ws")
    write_answers(tmp_path / "answers.csv")
    write_rules(tmp_path / "rules.yaml", ["model/strong", "model/weak"])
    imports = [{"format": "table", "path": "answers.csv"}]
    config = write_config(tmp_path, workspace=str(ws), answers=imports, filter_rules="rules.yaml", analyze=False)
    assert plan_problems(load_config(config, cwd=tmp_path)) == []
    assert "plan complete" in run_cli("check-config", config, cwd=tmp_path).stdout

    write_rules(tmp_path / "rules.yaml", ["model/strong", "model/absent"])
    line = one_line_error(run_cli("check-config", config, cwd=tmp_path, check=False))
    assert line == (f"error: {config}, field 'answers': stage 'suspect' of rules.yaml read the stored answers of "
                    "'model/absent', which the workspace does not hold and no planned answers import provides "
                    "(answers.imports[0] imports 'model/middling', 'model/strong', 'model/weak'; the workspace "
                    "holds none)"), line
    # the import's model option names its one model, whatever the table's column says
    renamed = write_config(tmp_path, workspace=str(ws), filter_rules="rules.yaml", analyze=False,
                           answers=imports + [{"format": "table", "path": "answers.csv", "model": "model/absent"}])
    assert plan_problems(load_config(renamed, cwd=tmp_path)) == []


def test_answers_the_workspace_holds_need_no_import(tmp_path, scored_ws):
    from curate.audit.config import load_config
    from curate.audit.plan import plan_problems

    ws = copy_ws(scored_ws, tmp_path / "ws")
    write_rules(tmp_path / "rules.yaml", ["model/strong"])
    config = write_config(tmp_path, workspace=str(ws), filter_rules="rules.yaml", analyze=False)
    [(key, message)] = plan_problems(load_config(config, cwd=tmp_path))
    assert key == "answers" and message.endswith("(nothing holds or imports answers)"), message
    run_cli("import-answers", ws, "--format", "table", write_answers(tmp_path / "answers.csv"))
    assert plan_problems(load_config(config, cwd=tmp_path)) == []


def test_before_the_ingest_of_a_hub_source_the_answers_models_are_not_known_and_accepted(tmp_path):
    """A Hub dataset not yet ingested: its items are unknown, so the files are read (and their
    models known) only right after the ingest; the plan accepts the answers they may hold."""
    from curate.audit.config import load_config
    from curate.audit.plan import plan_problems
    from curate.audit.stages.answers import read_imports as read_answer_imports

    write_answers(tmp_path / "answers.csv")
    write_rules(tmp_path / "rules.yaml", ["model/strong"])
    config = tmp_path / "audit.yaml"
    config.write_text(yaml.safe_dump({
        "workspace": "ws", "benchmark": {"adapter": "hellaswag", "hub": "Rowan/hellaswag", "limit": N},
        "answers": {"imports": [{"format": "table", "path": "answers.csv"}]},
        "filter": {"rules": "rules.yaml", "out": "dec"}}))
    cfg = load_config(config, cwd=tmp_path)
    [found] = read_answer_imports(cfg.runs_of("answers"), None)
    assert found.models is None and found.problem is None
    assert not [p for p in plan_problems(cfg) if p[0] == "answers"]


def test_the_audit_filters_on_the_answers_it_imported(tmp_path, scored_ws):
    """The audit resumes a workspace with the study's scores, imports the answers, and its filter
    reads them (the filter's summary names the answers it read)."""
    ws = copy_ws(scored_ws, tmp_path / "ws")
    write_answers(tmp_path / "answers.csv")
    write_rules(tmp_path / "rules.yaml", ["model/strong", "model/middling"])
    config = write_config(tmp_path, workspace=str(ws), answers=[{"format": "table", "path": "answers.csv"}],
                          filter_rules="rules.yaml", analyze=False)
    out = run_cli("audit", config, cwd=tmp_path).stdout
    assert "new work   answers, filter" in out, out
    summary = json.loads((tmp_path / "out" / "decisions" / "summary.json").read_text())
    assert [a["model"] for a in summary["inputs"]["answers"]] == ["model/middling", "model/strong"]
    assert summary["stages"][0]["matched"] == 3  # top_share 0.1 of 30 items


# --- 3. the report of a workspace holding answers and no scores --------------------------------

def test_analyze_reports_pooled_answers_without_scores(tmp_path):
    ws = tmp_path / "ws"
    run_cli("init", ws, "--benchmark", "hellaswag", "--data", HELLASWAG, "--limit", N)
    run_cli("import-answers", ws, "--format", "table", write_answers(tmp_path / "answers.csv"))
    out = run_cli("analyze", ws, "--out", tmp_path / "report", "--bootstrap", "200").stdout
    assert f"analyzed 3 models x 1 modes (answers only, no scores) on {N} items" in out, out
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_text())
    s = metrics["suspects"]
    assert s["present"] and not s["scored"] and s["n_items"] == N and s["unparsed_answers"] == 1, s
    assert sorted(s["models"]) == sorted(ANSWERERS)
    assert sorted((a["model"], a["source"]) for a in s["answer_models"]) == [(m, "table") for m in sorted(ANSWERERS)]
    assert s["top"] and all(p["page"].startswith("suspects/") for p in s["top"])
    assert metrics["settings"]["normalization"] is None and metrics["settings"]["models"] == sorted(ANSWERERS)
    report = (tmp_path / "report" / "report.md").read_text()
    assert "No scores are present in the workspace" in report
    assert "Item validity: the models against the key" in report
    assert (f"From the answers of the 3 models to each of {N} items in full mode (no scores are present: every "
            "model is read from its answers alone)") in report
    assert "3 of the models answered without probabilities" in report


def test_the_audits_rerun_imports_a_table_whose_rows_were_deleted(tmp_path):
    """Rows deleted from an imported table leave the workspace on the audit's next run: the
    store's fingerprint of the file changed, so the import runs again and replaces what the file
    gave before (issue 44: the rerun said "already imported" and kept the deleted answers)."""
    from scoring.answers import read_answers

    answers = write_answers(tmp_path / "answers.csv")
    config = write_config(tmp_path, answers=[{"format": "table", "path": "answers.csv"}], analyze=False)
    run_cli("audit", config, cwd=tmp_path)
    write_answers(answers, models={k: v for k, v in ANSWERERS.items() if k != "model/weak"})
    out = run_cli("audit", config, cwd=tmp_path).stdout
    assert "already imported" not in out and f"imported 60 answers of 2 models (0 unreadable) from {answers}" in out, out
    assert sorted(set(read_answers(tmp_path / "out" / "ws")["model"])) == ["model/middling", "model/strong"]
    again = run_cli("audit", config, cwd=tmp_path).stdout
    assert f"skipped table answers from {answers} already imported" in again, again
