"""Every ablation as an lm-eval task, and back (issue 39): `curate export WS lm-eval-tasks` writes a
task per prompt mode x formulation x shot count (curate/release/lm_eval_ablations.py), lm-eval
0.4.13 (hf backend, CPU) runs the group, and `curate import-scores --format lm-eval-samples` stores
each sample under its task's mode, formulation and shot count (scoring/imports/lm_eval_samples.py).

The round trip runs two MMLU items in all four modes, cloze and letters, 0 and 5 shots (16 tasks,
one lm-eval run) and compares every option with `curate score` on the same items (<= 1e-4). Without
a model: Winogrande's per-option contexts and ARC's rotated letters build `curate score`'s requests
in lm-eval, and their samples land where they belong; bad metadata, a task of the same name from
another workspace, and a re-import.

The tests that run lm-eval with a model (the ``trip`` fixture: minutes on a 2-core CPU) are marked
``engines``: `make test-engines` runs them (with the vLLM backend's), and `.ci/run` calls it after
`make test`, which leaves them out to stay within its time.
"""
from __future__ import annotations

import gzip
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import SHARED, copy_ws, one_line_error, run_cli
from scoring.store import open_scores, read_runs, read_scores

MMLU = SHARED / "benchmarks" / "mmlu" / "test.jsonl.gz"  # the first rows are abstract_algebra
MODES = "full,zero,placeholder,choice-only"
DATE = "2026-01-02T03-04-05.000006"


def run_lm_eval(tasks: Path, group: str, out: Path) -> None:
    """lm-eval 0.4.13 on the group with SmolLM2-135M (hf, float32, CPU), its --log_samples files
    written as its CLI writes them (`lm_eval --include_path TASKS --tasks GROUP --log_samples
    --output_path OUT`), in-process: the test worker has torch loaded already."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    from scoring.models import resolve

    tracker = EvaluationTracker(output_path=str(out))
    results = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={resolve('smollm2-135m').path},dtype=float32",
                                      tasks=[group], task_manager=TaskManager(include_path=str(tasks),
                                                                              include_defaults=False),
                                      device="cpu", batch_size=16, log_samples=True, evaluation_tracker=tracker)
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for task in results["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])


@pytest.fixture(scope="module")
def trip(tmp_path_factory):
    """(workspace scored by `curate score`, task folder, lm-eval's output folder, seconds)."""
    base = tmp_path_factory.mktemp("lm-eval-round-trip")
    ws, tasks, out = base / "ws", base / "tasks", base / "out"
    started = time.perf_counter()
    run_cli("init", ws, "--benchmark", "mmlu", "--data", MMLU, "--limit", 2)
    said = run_cli("export", ws, "lm-eval-tasks", "--modes", MODES, "--formulations", "cloze,letters",
                   "--fewshot", "0,5", "--out", tasks).stdout
    assert "wrote 16 lm-eval tasks of group curate_mmlu" in said and f"--include_path {tasks.resolve()}" in said
    run_lm_eval(tasks, "curate_mmlu", out)
    run_cli("score", ws, "--model", "smollm2-135m", "--modes", MODES, "--formulations", "cloze,letters",
            "--fewshot", "0,5", "--seq-mean", "none", "--self-check", "0", "--quiet")
    return ws, tasks, out, time.perf_counter() - started


def stored(ws: Path):
    with open_scores(ws) as w:
        return read_scores(w), read_runs(w)


def import_args(ws: Path, *paths, label="lm-eval"):
    return ("import-scores", ws, "--format", "lm-eval-samples", *paths, "--label", label, "--quiet")


@pytest.mark.engines
def test_round_trip_equals_curate_score(trip, tmp_path):
    ws, tasks, out, seconds = trip
    ws = copy_ws(ws, tmp_path / "ws")
    said = run_cli(*import_args(ws, out)).stdout
    assert said.endswith("imported 16 parts: 4 (model, mode) pairs\n")
    scores, runs = stored(ws)
    key = ["mode", "formulation", "fewshot", "item_id", "option_index"]
    ours = scores[scores["model"] == "smollm2-135m"].set_index(key)["logprob_sum"].sort_index()
    theirs = scores[scores["model"] == "lm-eval"].set_index(key)["logprob_sum"].sort_index()
    assert len(ours) == 4 * 2 * 2 * 2 * 4  # modes x formulations x shot counts x items x options
    assert theirs.index.equals(ours.index)
    diff = float(np.abs(ours - theirs).max())
    print(f"\nround trip: {len(ours)} options, max |lm-eval - curate score| = {diff:.2e}, {seconds:.0f} s")
    assert diff <= 1e-4
    imported = runs[runs["model"] == "lm-eval"]
    info = [json.loads(i) for i in imported["info_json"]]
    assert sorted((i["mode"], i["task"]) for i in info) == sorted(
        (m, f"curate_mmlu_{m.replace('-', '_')}_{f}_{k}shot") for m in MODES.split(",")
        for f in ("cloze", "letters") for k in (0, 5))
    assert all(i["exported_task"] for i in info)


@pytest.mark.engines
def test_reimport_is_idempotent(trip, tmp_path):
    ws = copy_ws(trip[0], tmp_path / "ws")
    run_cli(*import_args(ws, trip[2]))
    first, runs = stored(ws)
    run_cli(*import_args(ws, trip[2]))
    again, runs_again = stored(ws)
    assert first.equals(again) and len(runs_again) == len(runs)
    assert (again[again["model"] == "lm-eval"].groupby(["mode", "formulation", "fewshot"]).size() == 8).all()  # items x options


def results_file(out: Path) -> Path:
    [path] = out.rglob("results_*.json")
    return path


@pytest.mark.engines
@pytest.mark.parametrize("field, value, said", [
    ("mode", "nonsense", "'nonsense' is not a prompt mode"),
    ("formulation", "letters+x", "'letters+x' is not a formulation"),
    ("fewshot", "5", "'5' is not a shot count"),
    ("task", "curate_mmlu_zero_cloze_0shot", "another task of that name ran"),
])
def test_bad_metadata_is_refused_naming_file_sample_and_field(trip, tmp_path, field, value, said):
    ws, _, out, _ = trip
    ws, out = copy_ws(ws, tmp_path / "ws"), Path(shutil.copytree(out, tmp_path / "out"))
    path = results_file(out)
    results = json.loads(path.read_text())
    task = "curate_mmlu_full_letters_5shot"
    results["configs"][task]["metadata"]["benchcurate"][field] = value
    path.write_text(json.dumps(results))
    [sample] = out.rglob(f"samples_{task}_*.jsonl")
    one_line_error(run_cli(*import_args(ws, out), check=False), str(path), sample.name,
                   f"field 'configs.{task}.metadata.benchcurate.{field}'", said, "nothing was imported")
    assert len(stored(ws)[0].query("model == 'lm-eval'")) == 0


@pytest.mark.engines
def test_shots_lm_eval_adds_to_an_exported_task_are_refused(trip, tmp_path):
    """`lm_eval --num_fewshot 5` on exported tasks would put shots before shots."""
    ws, out = copy_ws(trip[0], tmp_path / "ws"), Path(shutil.copytree(trip[2], tmp_path / "out"))
    path = results_file(out)
    results = json.loads(path.read_text())
    results["n-shot"]["curate_mmlu_zero_cloze_0shot"] = 5
    path.write_text(json.dumps(results))
    one_line_error(run_cli(*import_args(ws, out), check=False), "field 'n-shot.curate_mmlu_zero_cloze_0shot'",
                   "without --num_fewshot")


@pytest.mark.engines
def test_task_names_that_collide_are_refused(trip, tmp_path):
    """Two exports named alike: the second is refused in a folder holding the first (lm-eval would
    read both), and samples of one workspace's task are refused by another workspace whose items
    have the same ids but other content (lm-eval keeps one task per name across include paths)."""
    ws, tasks, out, _ = trip
    proc = run_cli("export", ws, "lm-eval-tasks", "--out", tasks, check=False)
    one_line_error(proc, str(tasks), "exists and is not an empty folder")
    rows = tmp_path / "test.jsonl"
    with gzip.open(MMLU, "rt", encoding="utf-8") as fh:
        rows.write_text("".join([next(fh) for _ in range(4)][2:]))  # rows 2-3 as rows 0-1: same ids, other items
    other = tmp_path / "other"
    run_cli("init", other, "--benchmark", "mmlu", "--data", rows)
    one_line_error(run_cli(*import_args(other, out), check=False), "doc_id 0, field 'doc.content_hash'",
                   "has changed since the task was exported")
    assert len(stored(other)[0]) == 0


# --- without a model: per-option contexts, rotations, the import of their samples ---------------

def lm_eval_tasks(folder: Path, group: str) -> dict:
    """The group's tasks as lm-eval builds them from the folder, requests built."""
    from lm_eval.tasks import TaskManager

    loaded = TaskManager(include_path=str(folder), include_defaults=False).load([group])["tasks"]
    for task in loaded.values():
        task.build_all_requests(limit=None)
    return loaded


def curate_requests(ws: Path, mode: str, formulation: str, k: int, pool: str) -> dict[str, list[tuple]]:
    """Per item id, the (context, continuation) pairs `curate score` builds (scoring.run.unit_spec)."""
    from curate.items.fewshot_pool import fewshot_plan
    from curate.items.store import Workspace
    from scoring.encode import per_option
    from scoring.run import unit_spec

    with Workspace.open(ws) as w:
        items = w.items()
        shots, settings, _ = fewshot_plan(w, items, [k], pool)
    out = {}
    for i, item in enumerate(items):
        if formulation.startswith("letters+r") and int(formulation[9:]) >= len(item["options"]):
            continue
        spec = unit_spec(i, item, mode, formulation, shots[k][i], settings)
        out[item["item_id"]] = list(zip(per_option(spec.context, len(spec.options)),
                                        [spec.delimiter + o for o in spec.options]))
    return out


@pytest.mark.parametrize("benchmark, path, formulations", [
    ("winogrande", SHARED / "benchmarks" / "winogrande" / "validation.jsonl.gz", "cloze"),
    ("arc_challenge", SHARED / "benchmarks" / "arc_challenge" / "validation.jsonl.gz", "letters+rotations"),
])
def test_tasks_build_curate_score_requests_and_their_samples_land_in_place(benchmark, path, formulations, tmp_path):
    ws, folder = tmp_path / "ws", tmp_path / "tasks"
    run_cli("init", ws, "--benchmark", benchmark, "--data", path, "--limit", 5)
    run_cli("export", ws, "lm-eval-tasks", "--modes", "full,zero,choice-only", "--formulations", formulations,
            "--fewshot", "0,2", "--fewshot-pool", "evaluated", "--out", folder, "--name", "t")
    run_dir = tmp_path / "out" / "fake"
    run_dir.mkdir(parents=True)
    configs, expected = {}, {}
    for name, task in lm_eval_tasks(folder, "t").items():
        meta = task.config.metadata["benchcurate"]
        mine = curate_requests(ws, meta["mode"], meta["formulation"], meta["fewshot"], "evaluated")
        by_doc: dict[int, list] = {}
        for inst in sorted(task.instances, key=lambda x: (x.doc_id, x.idx)):
            by_doc.setdefault(inst.doc_id, []).append(inst)
        built = {insts[0].doc["item_id"]: [tuple(x.arguments) for x in insts] for insts in by_doc.values()}
        assert built == mine, name
        samples = [{"doc_id": d, "doc": insts[0].doc, "target": str(insts[0].doc["gold"]),
                    "arguments": {f"gen_args_{j}": {"arg_0": x.arguments[0], "arg_1": x.arguments[1]}
                                  for j, x in enumerate(insts)},
                    "resps": [[[str(-1.0 - d - j / 10), "False"]] for j in range(len(insts))]}
                   for d, insts in by_doc.items()]
        (run_dir / f"samples_{name}_{DATE}.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
        configs[name] = task.dump_config()
        expected[(meta["mode"], meta["formulation"], meta["fewshot"])] = {
            (s["doc"]["item_id"], j): -1.0 - s["doc_id"] - j / 10 for s in samples for j in range(len(s["resps"]))}
    results = {"model_name": "fake", "config": {"model_args": "pretrained=fake"}, "n-shot": dict.fromkeys(configs, 0),
               "configs": configs}
    (run_dir / f"results_{DATE}.json").write_text(json.dumps(results, default=str))
    run_cli(*import_args(ws, run_dir))
    scores = stored(ws)[0]
    got = {key: {(r.item_id, r.option_index): r.logprob_sum for r in group.itertuples()}
           for key, group in scores.groupby(["mode", "formulation", "fewshot"])}
    assert got == expected
    assert len(expected) == 3 * 2 * (1 if formulations == "cloze" else 4)  # ARC: 4 rotations of 4 options


def test_the_commands_the_export_prints_run_in_batches_and_import_under_a_label(tmp_path):
    """The `lm_eval` line the export printed ran at batch 1 (401 s where the engine takes 38 s),
    and the import line stored the built-in model's scores under the name `curate score` uses,
    which then refused to score it (issue 44): the lines carry --batch_size and --label."""
    ws, folder = tmp_path / "ws", tmp_path / "tasks"
    run_cli("init", ws, "--benchmark", "arc_challenge", "--data",
            SHARED / "benchmarks" / "arc_challenge" / "validation.jsonl.gz", "--limit", 3)
    said = run_cli("export", ws, "lm-eval-tasks", "--out", folder).stdout.splitlines()
    [run] = [line for line in said if line.startswith("run: ")]
    [then] = [line for line in said if line.startswith("then: ")]
    assert " --batch_size 16 " in run and f"--include_path {folder.resolve()}" in run, run
    assert then == f"then: curate import-scores {ws} --format lm-eval-samples --label LABEL OUT", then
    assert any("LABEL: " in line and "curate score" in line for line in said), said
    assert "--batch_size 16" in (folder / "curate_arc_challenge.yaml").read_text().splitlines()[0]
