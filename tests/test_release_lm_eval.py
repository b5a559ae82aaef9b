"""Every release carries an lm-evaluation-harness 0.4.13 task (curate/release/lm_eval_task.py).

The round trip: HellaSwag and MMLU items (two subjects) are released, lm-eval runs the exported
tasks from the release folders with SmolLM2-135M, and every option's log-likelihood equals the
one `curate score` stored for the same item (<= 1e-3). Without a model: each built-in's exported
task builds exactly the requests lm-eval's own task for that benchmark builds on the same rows,
and a generic benchmark's task the requests `curate score` makes.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.lmeval_reference import SHARED_DATA, lmeval_requests, shared_file
from conftest import HELLASWAG, SHARED, run_cli

DROP_SECOND = """
name: drop-second
stages:
  - name: second-row
    description: the second row, so the release is a subset
    when: {ids: {row_index: [1]}}
"""


def rows_of(path: Path, wanted) -> list[dict]:
    """The rows of a jsonl(.gz) file at the indices ``wanted`` (a predicate on index and row)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [row for i, row in enumerate(rows) if wanted(i, row)]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def mmlu_two_subjects(path: Path) -> Path:
    """Two rows of each of MMLU's first two subjects: one task must give each its subject's text."""
    seen: dict[str, int] = {}

    def wanted(_, row):
        seen[row["subject"]] = seen.get(row["subject"], 0) + 1
        return len(seen) <= 2 and seen[row["subject"]] <= 2
    return write_jsonl(path, rows_of(shared_file("mmlu", SHARED / "benchmarks")[0], wanted))


def release(base: Path, benchmark: str, data: Path, split: str, name: str, **columns) -> tuple[Path, Path]:
    """(workspace, release folder) of ``data``, the second row filtered out (``columns``: the
    generic adapter's mapping)."""
    from curate.items.adapters import get_adapter
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from curate.release import Release
    from curate.release.options import ReleaseOptions

    ws, rules = base / f"ws-{name}", base / "rules.yaml"
    rules.write_text(DROP_SECOND)
    Ingest(ws, IngestOptions(data=str(data), split=split), get_adapter(benchmark, **columns)).run()
    Filter(ws, FilterOptions(rules=rules, out=base / f"dec-{name}")).run()
    Release(ws, ReleaseOptions(decisions=base / f"dec-{name}", name=name, version="0.1.0", to=str(base / "out"),
                               license="mit")).run()
    return ws, base / "out" / name / "0.1.0"


def exported_requests(folder: Path, task: str) -> list[list[tuple[str, str]]]:
    """The requests lm-eval builds from the release's task, per document in order."""
    from lm_eval.tasks import TaskManager
    manager = TaskManager(include_path=str(folder / "lm_eval_task"), include_defaults=False)
    built = manager.load([task])["tasks"][task]
    built.build_all_requests(limit=None)
    by_doc: dict[int, list] = {}
    for inst in sorted(built.instances, key=lambda i: (i.doc_id, i.idx)):
        by_doc.setdefault(inst.doc_id, []).append(tuple(inst.arguments))
    return [by_doc[d] for d in sorted(by_doc)]


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    base = tmp_path_factory.mktemp("lm-eval-task")
    hs = write_jsonl(base / "hellaswag.jsonl", rows_of(HELLASWAG, lambda i, _: i < 4))
    mmlu = mmlu_two_subjects(base / "mmlu.jsonl")
    return {"hs": release(base, "hellaswag", hs, "validation", "hs-small"),
            "mmlu": release(base, "mmlu", mmlu, "test", "mmlu-small")}


def test_release_folder_holds_the_task_and_the_manifest_lists_it(released):
    from curate.release import verify_release
    ws, folder = released["hs"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert {"lm_eval_task/hs-small.yaml", "lm_eval_task/utils.py"} <= set(manifest["files"])
    assert manifest["formats"]["lm_eval_task"] == {"task": "hs-small", "yaml": "lm_eval_task/hs-small.yaml",
                                                   "lm_eval_version": "0.4.13", "config": "hellaswag"}
    text = (folder / "lm_eval_task" / "hs-small.yaml").read_text()
    assert "../data/validation-00000-of-00001.parquet" in text and "/tmp" not in text
    assert verify_release(str(folder)) == []


def test_lm_eval_log_likelihoods_equal_curate_score(released):
    """lm-eval 0.4.13 on the exported tasks, from the release folders, against `curate score`."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from curate.items.store import Workspace
    from scoring.models import resolve
    from scoring.store import read_scores

    folders = {"hs-small": released["hs"], "mmlu-small": released["mmlu"]}
    manager = TaskManager(include_path=[str(f / "lm_eval_task") for _, f in folders.values()],
                          include_defaults=False)
    out = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={resolve('smollm2-135m').path},dtype=float32",
                                  tasks=list(folders), task_manager=manager, device="cpu", batch_size=16,
                                  log_samples=True)
    for task, (ws, folder) in folders.items():
        run_cli("score", ws, "--model", "smollm2-135m", "--modes", "full", "--quiet")
        with Workspace.open(ws) as w:
            scores = read_scores(w, models=["smollm2-135m"], modes=["full"])
        kept = json.loads((folder / "manifest.json").read_text())["kept"]
        samples = sorted(out["samples"][task], key=lambda s: s["doc_id"])
        assert len(samples) == len(kept) == 3
        for item_id, sample in zip(kept, samples):
            theirs = np.array([float(r[0][0]) for r in sample["resps"]])
            ours = scores[scores["item_id"] == item_id].sort_values("option_index")["logprob_sum"].to_numpy()
            assert len(ours) == len(theirs) and np.abs(ours - theirs).max() <= 1e-3, (task, item_id, ours, theirs)


def test_release_command_says_how_to_run_the_task(released, tmp_path):
    ws, _ = released["hs"]
    decisions = ws.parent / "dec-hs-small"
    out = run_cli("release", ws, "--decisions", decisions, "--name", "hs-cli", "--version", "0.1.0", "--to", tmp_path)
    folder = (tmp_path / "hs-cli" / "0.1.0").resolve()
    assert f"--include_path {folder}/lm_eval_task --tasks hs-cli" in out.stdout


@pytest.mark.parametrize("benchmark", ["hellaswag", *sorted(SHARED_DATA)])
def test_builtin_task_builds_lm_evals_own_requests(benchmark, tmp_path):
    """The exported task against lm-eval's installed task config for the benchmark, same rows."""
    if benchmark == "hellaswag":
        data, split = write_jsonl(tmp_path / "rows.jsonl", rows_of(HELLASWAG, lambda i, _: i < 4)), "validation"
    elif benchmark == "mmlu":
        data, split = mmlu_two_subjects(tmp_path / "rows.jsonl"), "test"
    else:
        path, split = shared_file(benchmark, SHARED / "benchmarks")
        data = write_jsonl(tmp_path / "rows.jsonl", rows_of(path, lambda i, _: i < 4))
    theirs = [[tuple(r) for r in doc["requests"]] for doc in lmeval_requests(benchmark, data)]
    _, folder = release(tmp_path, benchmark, data, split, "bench")
    kept = [doc for i, doc in enumerate(theirs) if i != 1]
    assert exported_requests(folder, "bench") == kept


def test_generic_task_builds_the_requests_curate_score_makes(tmp_path):
    """A generic benchmark (letters formulation) has no lm-eval config: its task reads docs.jsonl."""
    from curate.items.formulations import scored
    from curate.items.store import Workspace

    rows = [{"q": f"What is {i} + 1?", "opts": [str(i + 1), str(i + 2), str(i)], "ans": "A"} for i in range(4)]
    data = write_jsonl(tmp_path / "rows.jsonl", rows)
    ws, folder = release(tmp_path, "generic", data, "test", "sums", question="q", choices="opts", answer="ans",
                         formulation="letters")
    with Workspace.open(ws) as w:
        items = [it for it in w.items() if it["row_index"] != 1]
    expected = []
    for item in items:
        s = scored(item, "full", "letters")
        expected.append([(c, " " + t) for c, t in zip(s.contexts, s.continuations)])
    assert exported_requests(folder, "sums") == expected
