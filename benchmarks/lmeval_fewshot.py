"""lm-evaluation-harness 0.4.13's own k-shot requests, built without a model, as the reference
for ``curate.items.fewshot`` (tests/test_fewshot_contexts.py).

Each task yaml is the installed one with its data pointed at local files, as
``benchmarks/lmeval_reference.py`` does. The evaluated file is the task's test split; the
few-shot split is a given file (MMLU's dev) or, where the task's own few-shot split is not in
../shared/data, the evaluated split itself: lm-eval then hands each evaluated document to its
sampler, which leaves it out. With ``own_splits`` the task keeps its own split settings and
reads the given file as its train split too (its default few-shot source), so whether lm-eval
hands the evaluated document to the sampler is the task's own choice. lm-eval's default
``fewshot_random_seed`` (1234) seeds each task.
"""
from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

from benchmarks.lmeval_reference import _read_rows, write_tasks


def _yaml(builtin: Path, name: str, test: Path, fewshot: Path | None, k: int, own_splits: bool = False) -> str:
    if own_splits:  # the task's own splits: train (its few-shot source), validation and test all read the file
        return (f"include: {builtin}\ntask: {name}\ndataset_path: json\ndataset_name: null\n"
                "dataset_kwargs:\n  data_files:\n"
                + "".join(f"    {s}: {test.resolve()}\n" for s in ("train", "validation", "test"))
                + f"num_fewshot: {k}\n")
    files = f"    test: {test.resolve()}\n" + (f"    dev: {fewshot.resolve()}\n" if fewshot else "")
    return (f"include: {builtin}\n"
            f"task: {name}\n"
            "dataset_path: json\n"
            "dataset_name: null\n"
            f"dataset_kwargs:\n  data_files:\n{files}"
            "training_split: null\nvalidation_split: null\ntest_split: test\n"
            f"fewshot_split: {'dev' if fewshot else 'test'}\n"
            f"num_fewshot: {k}\n")


def _tasks(folder: Path, benchmark: str, data: Path, fewshot: Path | None, k: int,
           own_splits: bool = False) -> dict[str, list[int]]:
    """Task yamls in ``folder``; {task name: the rows of ``data`` its documents are}. An MMLU
    subject's task reads its subject's rows of ``fewshot`` (dev) as its few-shot split."""
    shots = _read_rows(fewshot) if benchmark.startswith("mmlu") else []

    def task_yaml(builtin: Path, name: str, part: Path, subject: str | None) -> str:
        dev = None
        if subject:
            dev = folder / f"{subject}.dev.jsonl"
            dev.write_text("".join(json.dumps(r) + "\n" for r in shots if r["subject"] == subject))
        return _yaml(builtin, name, part, dev, k, own_splits and subject is None)
    return write_tasks(folder, benchmark, data, "fs", task_yaml)


def lmeval_fewshot_contexts(benchmark: str, data: Path, k: int, *, fewshot: Path | None = None,
                            limit: int | None = None, seed: int = 1234, own_splits: bool = False
                            ) -> dict[int, list[str]]:
    """{row of ``data``: the contexts of lm-eval's k-shot requests for it (one per request)},
    for the first ``limit`` documents of each task."""
    from lm_eval import utils
    from lm_eval.tasks import TaskManager

    if not hasattr(utils.env.from_string, "cache_info"):  # same text, compiled templates cached
        utils.env.from_string = functools.lru_cache(maxsize=None)(utils.env.from_string)
    with tempfile.TemporaryDirectory() as tmp:
        rows_of = _tasks(Path(tmp), benchmark, data, fewshot, k, own_splits)
        tasks = TaskManager(include_path=tmp, include_defaults=False).load(list(rows_of))["tasks"]
        out: dict[int, list[str]] = {}
        for name, task in tasks.items():
            task.set_fewshot_seed(seed)  # as lm-eval's evaluator does before building requests
            task.build_all_requests(limit=limit)
            by_doc: dict[int, list] = {}
            for inst in task.instances:
                by_doc.setdefault(inst.doc_id, []).append(inst)
            for doc_id, instances in by_doc.items():
                out[rows_of[name][doc_id]] = [i.arguments[0] for i in sorted(instances, key=lambda i: i.idx)]
    return out
