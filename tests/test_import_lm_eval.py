"""`curate import-scores --format lm-eval-samples`: lm-eval 0.4.13's own --log_samples output
(tests/fixtures/lm_eval_samples/, written by benchmarks/lm_eval_samples_fixtures.py: SmolLM2-135M
on 50 items each of HellaSwag, ARC-Challenge and MMLU abstract_algebra) imported, against
`curate score` on the same items, and every refusal naming file, doc_id and field."""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import SHARED, built_once, copy_ws, one_line_error, run_cli
from scoring.store import open_scores, read_runs, read_scores

FIXTURES = Path(__file__).parent / "fixtures" / "lm_eval_samples" / "SmolLM2-135M"
DATA = {"hellaswag": SHARED / "hellaswag" / "validation.jsonl.gz",
        "arc_challenge": SHARED / "benchmarks" / "arc_challenge" / "validation.jsonl.gz",
        "mmlu": SHARED / "benchmarks" / "mmlu" / "test.jsonl.gz"}  # the first 100 rows are abstract_algebra


def samples_file(name: str) -> Path:
    prefix = {"mmlu": "samples_mmlu_abstract_algebra"}.get(name, f"samples_{name}")
    [path] = FIXTURES.glob(f"{prefix}_local_*.jsonl.gz")
    return path


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory):
    """The first 50 items of each benchmark, one workspace each (read-only; tests copy them)."""
    def build(folder):
        for name, data in DATA.items():
            run_cli("init", folder / name, "--benchmark", name, "--data", data, "--limit", "50")
    return built_once(tmp_path_factory, "lm-eval-import-ws", build)


def ws_copy(workspaces, name, tmp_path) -> Path:
    return copy_ws(workspaces / name, tmp_path / name)


def read_lines(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def run_folder(tmp_path: Path, name: str, samples: list[dict], *, results: dict | None = None) -> Path:
    """A copy of the fixture run with ``samples`` as the benchmark's sample file (and ``results``)."""
    folder = tmp_path / "run" / "SmolLM2-135M"
    folder.mkdir(parents=True)
    [res] = FIXTURES.glob("results_*.json")
    (folder / res.name).write_text(json.dumps(results) if results else res.read_text())
    path = folder / samples_file(name).name.removesuffix(".gz")
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    return path


def stored(ws: Path, **kw):
    with open_scores(ws) as w:
        return read_scores(w, **kw), read_runs(w)


def assert_nothing_stored(ws: Path):
    scores, runs = stored(ws)
    assert len(scores) == 0 and len(runs) == 0


# --- parity with `curate score` -----------------------------------------------------------------

def check_parity(workspaces, tmp_path, name: str, n: int):
    ws = ws_copy(workspaces, name, tmp_path)
    run_cli("import-scores", ws, "--format", "lm-eval-samples", samples_file(name), "--quiet")
    run_cli("score", ws, "--model", "smollm2-135m", "--modes", "full", "--no-seq-mean", "--limit", n,
            "--label", "ours", "--quiet", "--self-check", "0")
    scores, runs = stored(ws)
    theirs = scores[scores["model"] == "SmolLM2-135M"]
    ours = scores[scores["model"] == "ours"]
    assert len(theirs) == len(ws_items(ws)) * 4 - (1 if name == "arc_challenge" else 0)  # every item imported
    assert ours["formulation"].unique().tolist() == theirs["formulation"].unique().tolist()
    merged = ours.merge(theirs, on=["item_id", "option_index", "formulation", "fewshot"], suffixes=("_ours", "_lm"))
    assert merged["item_id"].nunique() == n
    worst = np.abs(merged["logprob_sum_ours"] - merged["logprob_sum_lm"]).max()
    print(f"{name}: {n} items, max |imported - curate score| = {worst:.1e}")  # shown with pytest -s
    assert worst <= 1e-3
    assert (merged["is_greedy_ours"] == merged["is_greedy_lm"]).all()
    assert (merged["n_chars_ours"] == merged["n_chars_lm"]).all()
    for _, item in merged.groupby("item_id"):
        assert item["logprob_sum_ours"].to_numpy().argmax() == item["logprob_sum_lm"].to_numpy().argmax()
        chars = item["n_chars_ours"].to_numpy()
        assert (item["logprob_sum_ours"] / chars).to_numpy().argmax() == (item["logprob_sum_lm"] / chars).to_numpy().argmax()
    run = runs[runs["model"] == "SmolLM2-135M"].iloc[0]
    info = json.loads(run["info_json"])
    assert run["origin"] == "imported:lm-eval-samples" and run["dtype"] == "float32"
    assert info["lm_eval_version"] == "0.4.13" and info["fewshot"] == 0 and info["revision"] == "main"


def ws_items(ws):
    with open_scores(ws) as w:
        return w.items()


@pytest.mark.parametrize("name", sorted(DATA))
def test_import_equals_curate_score_first_items(workspaces, tmp_path, name):
    """All 50 samples imported; the first 4 items also scored here (`curate score` costs about
    20 s of CPU per call, most of it fixed): within 1e-3, same argmax."""
    check_parity(workspaces, tmp_path, name, 4)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DATA))
def test_import_equals_curate_score_all_items(workspaces, tmp_path, name):
    """The acceptance: all 50 items of each, scored here too."""
    check_parity(workspaces, tmp_path, name, 50)


# --- refusals: nothing stored ---------------------------------------------------------------------

def refused(workspaces, tmp_path, name: str, edit, *expected) -> None:
    """The fixture's samples of ``name`` changed by ``edit``, imported: one error line naming the
    file and each ``expected`` text, and nothing stored."""
    ws = ws_copy(workspaces, name, tmp_path)
    samples = read_lines(samples_file(name))
    edit(samples)
    path = run_folder(tmp_path, name, samples)
    proc = run_cli("import-scores", ws, "--format", "lm-eval-samples", path, "--quiet", check=False)
    one_line_error(proc, str(path), *expected, "nothing was imported")
    assert_nothing_stored(ws)


def test_sample_pointing_at_another_doc_is_refused(workspaces, tmp_path):
    """doc_id 3's requests with doc_id 7's doc: its doc names another item than its requests."""
    def edit(samples):
        samples[3] = {**samples[3], "doc_id": 7, "doc": samples[7]["doc"]}
    refused(workspaces, tmp_path, "hellaswag", edit, "doc_id 7", "field 'doc.ind'", "hellaswag/validation/3")


def test_sample_copied_onto_another_doc_is_refused(workspaces, tmp_path):
    """doc_id 3 replaced by doc_id 7's whole sample: two samples for one item."""
    def edit(samples):
        samples[3] = {**samples[7], "doc_id": 3}
    refused(workspaces, tmp_path, "arc_challenge", edit, "doc_id 7", "field 'doc_id'", "arc_challenge/validation/7",
            "doc_id 3")


def test_options_that_differ_are_refused(workspaces, tmp_path):
    def edit(samples):
        samples[5]["arguments"]["gen_args_2"]["arg_1"] = " an ending of another item."
    refused(workspaces, tmp_path, "hellaswag", edit, "doc_id 5", "field 'arguments.gen_args_2.arg_1'",
            "hellaswag/validation/5", "options differ")


def test_sample_of_no_item_is_refused(workspaces, tmp_path):
    """ARC-Challenge samples into a HellaSwag workspace: the first one is named."""
    ws = ws_copy(workspaces, "hellaswag", tmp_path)
    proc = run_cli("import-scores", ws, "--format", "lm-eval-samples", samples_file("hellaswag"),
                   samples_file("arc_challenge"), "--quiet", check=False)
    one_line_error(proc, samples_file("arc_challenge").name, "doc_id 0", "field 'arguments.gen_args_0.arg_0'",
                   "matches no workspace item")
    assert_nothing_stored(ws)


def test_wrong_gold_and_bad_values_are_refused(workspaces, tmp_path):
    ws = ws_copy(workspaces, "mmlu", tmp_path)
    samples = read_lines(samples_file("mmlu"))
    samples[2]["target"] = str((int(samples[2]["target"]) + 1) % 4)
    proc = run_cli("import-scores", ws, "--format", "lm-eval-samples", run_folder(tmp_path / "a", "mmlu", samples),
                   "--quiet", check=False)
    one_line_error(proc, "doc_id 2", "field 'target'", "mmlu/test/2")
    samples = read_lines(samples_file("mmlu"))
    samples[4]["resps"][1] = [["0.5", "False"]]
    proc = run_cli("import-scores", ws, "--format", "lm-eval-samples", run_folder(tmp_path / "b", "mmlu", samples),
                   "--quiet", check=False)
    one_line_error(proc, "doc_id 4", "field 'resps.1'", "not a log-likelihood")
    samples = read_lines(samples_file("mmlu"))
    samples[3]["resps"][2] = [["-0.5", "Maybe"]]  # was stored as False
    proc = run_cli("import-scores", ws, "--format", "lm-eval-samples", run_folder(tmp_path / "c", "mmlu", samples),
                   "--quiet", check=False)
    one_line_error(proc, "doc_id 3", "field 'resps.2'", "is_greedy 'Maybe' is neither True nor False")
    assert_nothing_stored(ws)


def test_samples_without_results_file_are_refused(workspaces, tmp_path):
    ws = ws_copy(workspaces, "hellaswag", tmp_path)
    shutil.copy(samples_file("hellaswag"), tmp_path / samples_file("hellaswag").name)
    proc = run_cli("import-scores", ws, "--format", "lm-eval-samples", tmp_path / samples_file("hellaswag").name,
                   "--quiet", check=False)
    one_line_error(proc, "no results file", "beside it")
    assert_nothing_stored(ws)


# --- labels, idempotence, --replace, trees, parquet, k-shot ------------------------------------

def test_reimport_is_idempotent_and_another_file_needs_replace(workspaces, tmp_path):
    ws = ws_copy(workspaces, "hellaswag", tmp_path)
    args = ("import-scores", ws, "--format", "lm-eval-samples", "--quiet")
    out = run_cli(*args, samples_file("hellaswag")).stdout
    assert "SmolLM2-135M" in out and "cloze, 0-shot, 50 items" in out
    first, runs = stored(ws)
    run_cli(*args, samples_file("hellaswag"))
    again, runs_again = stored(ws)
    assert first.equals(again) and len(runs_again) == len(runs) == 1
    samples = read_lines(samples_file("hellaswag"))
    samples[0]["resps"][0] = [["-1.0", "False"]]
    changed = run_folder(tmp_path, "hellaswag", samples)
    one_line_error(run_cli(*args, changed, check=False), "already holds scores of these items", "--replace")
    assert stored(ws)[0].equals(first)
    run_cli(*args, changed, "--replace")
    scores, runs = stored(ws)
    assert scores.loc[(scores["item_id"] == "hellaswag/validation/0") & (scores["option_index"] == 0),
                      "logprob_sum"].item() == -1.0
    assert len(scores) == len(first) and set(scores["run_id"]) != set(first["run_id"])
    assert runs["run_id"].tolist() == scores["run_id"].unique().tolist()  # the replaced run is gone, not left empty


def test_each_results_file_is_read_once_per_import(workspaces, tmp_path, monkeypatch):
    """A run's results file gives its model label and each task's shot count: one read each run."""
    from scoring.imports import lm_eval_samples as lm

    ws = ws_copy(workspaces, "hellaswag", tmp_path)
    reads = []
    real = lm._read_results
    monkeypatch.setattr(lm, "_read_results", lambda path: reads.append(path) or real(path))
    [part] = lm.import_scores(ws, [samples_file("hellaswag")], progress=False)
    assert part["model"] == "SmolLM2-135M" and part["items"] == 50
    assert reads == [next(FIXTURES.glob("results_*.json"))]


def test_label_and_a_tree_of_models(workspaces, tmp_path):
    """An --output_path tree of two models imports at once, each under its results' model name;
    --label names the single model of a file."""
    ws = ws_copy(workspaces, "hellaswag", tmp_path)
    [res] = FIXTURES.glob("results_*.json")
    for model in ("org/model-a", "org/model-b"):
        folder = tmp_path / "out" / model.replace("/", "__")
        folder.mkdir(parents=True)
        (folder / res.name).write_text(json.dumps({**json.loads(res.read_text()), "model_name": model}))
        shutil.copy(samples_file("hellaswag"), folder)
    out = run_cli("import-scores", ws, "--format", "lm-eval-samples", tmp_path / "out", "--quiet").stdout
    assert "org/model-a" in out and "org/model-b" in out
    one = run_cli("import-scores", ws, "--format", "lm-eval-samples", samples_file("hellaswag"), "--label", "mine",
                  "--quiet").stdout
    assert one.endswith("imported 1 part: 1 (model, mode) pair\n") and "imported 2 parts: 2 (model, mode) pairs" in out
    scores, _ = stored(ws)
    assert sorted(scores["model"].unique()) == ["mine", "org/model-a", "org/model-b"]
    assert (scores.groupby("model")["item_id"].nunique() == 50).all()


HUB_SNAPSHOT = "/home/u/.cache/huggingface/hub/models--HuggingFaceTB--SmolLM2-135M/snapshots/" + "0123abcd" * 5


@pytest.mark.parametrize("model_name, label", [
    ("/root/.cache/benchcurate/models/smollm2-135m-b179c9523d0e6a0f", "smollm2-135m"),  # the built-in, converted
    ("/data/bc/models/SmolLM2-135M-Instruct.Q4_1-b179c9523d0e6a0f/", "SmolLM2-135M-Instruct.Q4_1"),  # a GGUF file's
    (HUB_SNAPSHOT, "HuggingFaceTB/SmolLM2-135M"),
    ("/tmp/tmp8pedh1p5/SmolLM2-135M", "SmolLM2-135M"),
    ("./runs/step-0123456789abcdef", "step-0123456789abcdef"),  # a hash-like name outside a models/ folder stays
    ("HuggingFaceTB/SmolLM2-135M", "HuggingFaceTB/SmolLM2-135M"),
])
def test_a_model_is_labelled_by_a_human_name(model_name, label):
    from scoring.imports.lm_eval_samples import model_label
    assert model_label({"model_name": model_name, "config": {}}, Path("results.json")) == label
    assert model_label({"config": {"model_args": f"pretrained={model_name},dtype=float32"}}, Path("r.json")) == label


def test_the_converted_builtin_is_imported_as_smollm2_135m(workspaces, tmp_path):
    """lm_eval run on the folder `curate score --model smollm2-135m` loads (its hashed cache
    folder) stores the scores as smollm2-135m; beside curate score's own smollm2-135m scores the
    import is refused with what to do, and --label keeps both."""
    from scoring.models import resolve

    ws = ws_copy(workspaces, "hellaswag", tmp_path)
    [res] = FIXTURES.glob("results_*.json")
    folder = tmp_path / "out" / "run"
    folder.mkdir(parents=True)
    results = json.loads(res.read_text())
    path = resolve("smollm2-135m").path
    results["model_name"], results["config"]["model_args"]["pretrained"] = path, path
    (folder / res.name).write_text(json.dumps(results))
    shutil.copy(samples_file("hellaswag"), folder)
    out = run_cli("import-scores", ws, "--format", "lm-eval-samples", folder, "--quiet").stdout
    assert "smollm2-135m " in out and "b179c9523d0e6a0f" not in out
    assert stored(ws)[0]["model"].unique().tolist() == ["smollm2-135m"]

    scored = ws_copy(workspaces, "hellaswag", tmp_path / "scored")
    run_cli("score", scored, "--model", "smollm2-135m", "--modes", "full", "--limit", 2, "--quiet", "--self-check", "0")
    proc = run_cli("import-scores", scored, "--format", "lm-eval-samples", folder, "--quiet", check=False)
    one_line_error(proc, "label 'smollm2-135m' already holds", "Use another --label to keep both")
    run_cli("import-scores", scored, "--format", "lm-eval-samples", folder, "--label", "smollm2-135m-lm-eval",
            "--quiet")
    assert sorted(stored(scored)[0]["model"].unique()) == ["smollm2-135m", "smollm2-135m-lm-eval"]


def test_parquet_equals_jsonl(workspaces, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    a, b = ws_copy(workspaces, "mmlu", tmp_path / "a"), ws_copy(workspaces, "mmlu", tmp_path / "b")
    path = run_folder(tmp_path, "mmlu", read_lines(samples_file("mmlu")))
    pq.write_table(pa.Table.from_pylist(read_lines(samples_file("mmlu"))), path.with_suffix(".parquet"))
    path.unlink()
    run_cli("import-scores", a, "--format", "lm-eval-samples", samples_file("mmlu"), "--quiet")
    run_cli("import-scores", b, "--format", "lm-eval-samples", path.with_suffix(".parquet"), "--quiet")
    cols = ["model", "formulation", "fewshot", "item_id", "option_index", "logprob_sum", "is_greedy", "n_chars"]
    assert stored(a)[0][cols].equals(stored(b)[0][cols])
    assert stored(a)[0]["formulation"].unique().tolist() == ["letters"]


def test_k_shot_samples_go_to_their_shot_count(workspaces, tmp_path):
    """A 1-shot run (the shot between MMLU's description and the item, as lm-eval builds it) is
    stored under fewshot 1; its contexts without the shot are refused."""
    ws = ws_copy(workspaces, "mmlu", tmp_path)
    results = json.loads(next(FIXTURES.glob("results_*.json")).read_text())
    results["n-shot"]["mmlu_abstract_algebra_local"] = 1
    samples = read_lines(samples_file("mmlu"))
    head = "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
    for s in samples:
        for arg in s["arguments"].values():
            assert arg["arg_0"].startswith(head)
            arg["arg_0"] = head + "What is 1 + 1?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer: B\n\n" + arg["arg_0"][len(head):]
    run_cli("import-scores", ws, "--format", "lm-eval-samples", run_folder(tmp_path / "k", "mmlu", samples, results=results),
            "--quiet")
    scores, runs = stored(ws)
    assert scores["fewshot"].unique().tolist() == [1] and scores["item_id"].nunique() == 50
    assert json.loads(runs["info_json"].iloc[0])["fewshot"] == 1
    proc = run_cli("import-scores", ws_copy(workspaces, "mmlu", tmp_path / "zero"), "--format", "lm-eval-samples",
                   run_folder(tmp_path / "z", "mmlu", read_lines(samples_file("mmlu")), results=results), "--quiet",
                   check=False)
    one_line_error(proc, "doc_id 0", "matches no workspace item")


def test_formats_come_from_one_registry():
    from scoring.imports import names
    from schemas import SCHEMA_DIR
    assert names() == ["lm-eval-samples", "study-csv"]
    schema = json.loads((SCHEMA_DIR / "audit.schema.json").read_text())
    assert schema["$defs"]["score_import"]["properties"]["format"]["enum"] == names()
    assert "lm-eval-samples|study-csv" in run_cli("import-scores", "--help").stdout


def test_audit_imports_lm_eval_samples_once_and_plans_them(workspaces, tmp_path):
    """`scoring.imports` in an audit config takes the format too: imported once, skipped when the
    files are stored already; the plan knows the model before anything is imported."""
    import yaml

    from curate.audit.config import load_config
    from curate.audit.plan import Plan

    ws = ws_copy(workspaces, "hellaswag", tmp_path)
    folder = run_folder(tmp_path, "hellaswag", read_lines(samples_file("hellaswag"))).parent
    (tmp_path / "audit.yaml").write_text(yaml.safe_dump({
        "workspace": str(ws), "benchmark": {"adapter": "hellaswag", "path": str(DATA["hellaswag"])},
        "scoring": {"imports": [{"format": "lm-eval-samples", "dir": str(folder)}]}}))
    cfg = load_config(tmp_path / "audit.yaml", cwd=tmp_path)
    assert set(Plan(cfg).supply.scores) >= {("SmolLM2-135M", "full", "cloze", 0)}

    def score_stage(cfg):
        return [o for run in cfg.runs_of("score") for o in run.stage.run(run, cfg)]
    assert [o.status for o in score_stage(cfg)] == ["ran"]
    assert [o.status for o in score_stage(cfg)] == ["skipped"]
    assert stored(ws)[0]["item_id"].nunique() == 50


def test_an_empty_samples_file_is_refused_not_skipped(workspaces, tmp_path):
    """A samples file with no sample was skipped silently (issue 44): the import stored the other
    files and said nothing. It is refused, naming the file, and nothing is stored."""
    ws = ws_copy(workspaces, "hellaswag", tmp_path)
    [res] = FIXTURES.glob("results_*.json")
    results = json.loads(res.read_text())
    results["n-shot"]["hellaswag_other_local"] = 0  # a second task of the run, which lm-eval logged nothing of
    path = run_folder(tmp_path, "hellaswag", read_lines(samples_file("hellaswag")), results=results)
    empty = path.with_name(path.name.replace("samples_hellaswag", "samples_hellaswag_other"))
    empty.write_text("\n")
    one_line_error(run_cli("import-scores", ws, "--format", "lm-eval-samples", path.parent, "--quiet", check=False),
                   f"{empty}: holds no samples", "nothing was imported")
    assert_nothing_stored(ws)


def test_a_results_files_model_name_is_checked_as_every_model_name(workspaces, tmp_path):
    ws = ws_copy(workspaces, "hellaswag", tmp_path)
    [res] = FIXTURES.glob("results_*.json")
    results = json.loads(res.read_text())
    results["model_name"] = "org/model\nnext line"
    path = run_folder(tmp_path, "hellaswag", read_lines(samples_file("hellaswag")), results=results)
    one_line_error(run_cli("import-scores", ws, "--format", "lm-eval-samples", path.parent, "--quiet", check=False),
                   "field 'model_name'", "control character", "give --label")
    assert_nothing_stored(ws)
