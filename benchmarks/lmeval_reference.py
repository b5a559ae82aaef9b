"""lm-evaluation-harness's own requests and numbers for our benchmarks, as the parity reference.

Each benchmark's lm-eval 0.4.13 task is pointed at a local data file by a small task yaml that
includes the installed one and swaps the dataset (``local_tasks``); nothing else of the task
changes. ``lmeval_requests`` builds the requests lm-eval would send (no model needed);
``run_lmeval`` runs its hf backend on a local model folder and returns, per item, every option's
log-likelihood and greedy flag plus acc / acc_norm.

    python benchmarks/lmeval_reference.py --model-dir DIR --data FILE --limit 200 --out F.json
"""
from __future__ import annotations

import argparse
import gzip
import json
import tempfile
import time
from pathlib import Path

TASK = "hellaswag_local"

#: Our benchmark name -> (lm-eval task yaml under lm_eval/tasks, lm-eval's task name pattern).
#: MMLU is one task per subject; ``mmlu_cloze`` is lm-eval's MMLU "continuation" variant, which
#: is our MMLU's cloze formulation.
TASK_YAMLS = {
    "hellaswag": "hellaswag/hellaswag.yaml",
    "arc_easy": "arc/arc_easy.yaml",
    "arc_challenge": "arc/arc_challenge.yaml",
    "openbookqa": "openbookqa/openbookqa.yaml",
    "piqa": "piqa/piqa.yaml",
    "social_iqa": "siqa/siqa.yaml",
    "winogrande": "winogrande/default.yaml",
    "copa": "super_glue/copa/default.yaml",
    "commonsense_qa": "commonsense_qa/default.yaml",
    "sciq": "sciq/sciq.yaml",
    "boolq": "super_glue/boolq/default.yaml",
    "mmlu": "mmlu/default/mmlu_{subject}.yaml",
    "mmlu_cloze": "mmlu/continuation/mmlu_{subject}.yaml",
}

#: Our benchmark -> (its folder in ../shared/data/benchmarks, the split there).
SHARED_DATA = {
    "arc_easy": ("arc_easy", "validation"), "arc_challenge": ("arc_challenge", "validation"),
    "mmlu": ("mmlu", "test"), "openbookqa": ("openbookqa", "validation"), "piqa": ("piqa", "validation"),
    "social_iqa": ("social_i_qa", "validation"), "winogrande": ("winogrande", "validation"),
    "copa": ("copa", "validation"), "commonsense_qa": ("commonsense_qa", "validation"),
    "sciq": ("sciq", "validation"), "boolq": ("boolq", "validation"),
}


def shared_file(benchmark: str, root: Path) -> tuple[Path, str]:
    """(data file, split) of a built-in benchmark in the shared data folder ``root``."""
    folder, split = SHARED_DATA[benchmark]
    return root / folder / f"{split}.jsonl.gz", split


#: lm-eval's boolq reads the aps/super_glue copy (label 0/1); the google/boolq copy has the same
#: rows with answer false/true. This is the only change made to a task's documents.
BOOLQ_DOCS = "def process_docs(dataset):\n    return dataset.map(lambda d: {'label': int(d['answer'])})\n"


def _read_rows(data: Path) -> list[dict]:
    opener = gzip.open if data.name.endswith(".gz") else open
    with opener(data, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def local_tasks(folder: Path, benchmark: str, data: Path) -> dict[str, list[int]]:
    """Write task yamls into ``folder`` pointing ``benchmark``'s lm-eval task(s) at ``data``;
    return {task name: the rows of ``data`` that task's documents are, in order}."""
    return write_tasks(folder, benchmark, data, "local",
                       lambda builtin, name, part, subject: _yaml(builtin, name, part,
                                                                 split="test" if subject else "validation"))


def write_tasks(folder: Path, benchmark: str, data: Path, suffix: str, task_yaml) -> dict[str, list[int]]:
    """Task yamls in ``folder`` over ``data``: one per MMLU subject (over its subject's rows,
    written to a file of their own) or one for the benchmark; ``task_yaml(builtin, name, rows
    file, subject or None)`` gives each one's text. {task name: the rows of ``data`` it reads}."""
    import lm_eval

    tasks_dir = Path(lm_eval.__file__).parent / "tasks"
    rows = _read_rows(data)
    if benchmark.startswith("mmlu"):  # one task per subject, each over its subject's rows
        by_subject: dict[str, list[int]] = {}
        for i, row in enumerate(rows):
            by_subject.setdefault(row["subject"], []).append(i)
        out = {}
        for subject, indices in by_subject.items():
            part = folder / f"{benchmark}_{subject}.jsonl"
            part.write_text("".join(json.dumps(rows[i]) + "\n" for i in indices))
            name = f"{benchmark}_{subject}_{suffix}"
            builtin = tasks_dir / TASK_YAMLS[benchmark].format(subject=subject)
            (folder / f"{name}.yaml").write_text(task_yaml(builtin, name, part, subject))
            out[name] = indices
        return out
    name = f"{benchmark}_{suffix}"
    extra = ""
    if benchmark == "boolq":
        (folder / "boolq_local_docs.py").write_text(BOOLQ_DOCS)
        extra = "process_docs: !function boolq_local_docs.process_docs\n"
    (folder / f"{name}.yaml").write_text(task_yaml(tasks_dir / TASK_YAMLS[benchmark], name, data, None) + extra)
    return {name: list(range(len(rows)))}


def _yaml(builtin: Path, name: str, data: Path, split: str = "validation") -> str:
    other = [s for s in ("training_split", "validation_split", "test_split") if not s.startswith(split)]
    return (f"include: {builtin}\n"
            f"task: {name}\n"
            "dataset_path: json\n"
            "dataset_name: null\n"
            "dataset_kwargs:\n"
            f"  data_files:\n    {split}: {data.resolve()}\n"
            f"{split}_split: {split}\n"
            + "".join(f"{s}: null\n" for s in other)
            + "fewshot_split: null\n")


def lmeval_requests(benchmark: str, data: Path) -> list[dict]:
    """lm-eval's zero-shot requests for every row of ``data``, in row order:
    ``{"requests": [(context, continuation), ...], "gold": int, "choices": [...], "metrics": [...]}``."""
    import functools

    from lm_eval import utils
    from lm_eval.tasks import TaskManager

    # lm-eval compiles each jinja template again for every document; a cache of the compiled
    # templates gives the same text ten times faster.
    if not hasattr(utils.env.from_string, "cache_info"):
        utils.env.from_string = functools.lru_cache(maxsize=None)(utils.env.from_string)
    with tempfile.TemporaryDirectory() as tmp:
        rows_of = local_tasks(Path(tmp), benchmark, data)
        manager = TaskManager(include_path=tmp, include_defaults=False)
        tasks = manager.load(list(rows_of))["tasks"]
        out: dict[int, dict] = {}
        for name, task in tasks.items():
            task.build_all_requests(limit=None)
            docs = list(task.eval_docs)
            by_doc: dict[int, list] = {}
            for inst in task.instances:
                by_doc.setdefault(inst.doc_id, []).append(inst)
            metrics = list(task._metric_fn_list)  # what process_results reports
            for doc_id, instances in by_doc.items():
                doc = docs[doc_id]
                choices = task.doc_to_choice(doc)
                gold = task.doc_to_text(doc) if task.multiple_input else task.doc_to_target(doc)
                if isinstance(gold, str):
                    gold = choices.index(gold)
                out[rows_of[name][doc_id]] = {
                    "requests": [tuple(i.arguments) for i in sorted(instances, key=lambda i: i.idx)],
                    "gold": gold, "choices": choices, "metrics": metrics}
    return [out[i] for i in sorted(out)]


def task_yaml(data: Path) -> str:
    import lm_eval
    builtin = Path(lm_eval.__file__).parent / "tasks" / "hellaswag" / "hellaswag.yaml"
    return (f"include: {builtin}\n"
            f"task: {TASK}\n"
            "dataset_path: json\n"
            "dataset_name: null\n"
            "dataset_kwargs:\n"
            f"  data_files:\n    validation: {data.resolve()}\n"
            "training_split: null\n")


def run_lmeval(model_dir: str, data: Path, limit: int, *, batch_size: int = 32, dtype: str = "float32") -> dict:
    """{"seconds", "items": [{"doc_id", "lls", "greedy", "acc", "acc_norm"}], "acc", "acc_norm"}."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / f"{TASK}.yaml").write_text(task_yaml(data))
        manager = TaskManager(include_path=tmp)
        start, cpu_start = time.perf_counter(), time.process_time()
        out = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={model_dir},dtype={dtype}",
                                      tasks=[TASK], task_manager=manager, limit=limit, device="cpu",
                                      batch_size=batch_size, log_samples=True)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    items = []
    for s in sorted(out["samples"][TASK], key=lambda s: s["doc_id"]):
        lls = [float(r[0][0]) for r in s["resps"]]
        greedy = [bool(r[0][1]) for r in s["resps"]]
        items.append({"doc_id": s["doc_id"], "lls": lls, "greedy": greedy,
                      "acc": float(s["acc"]), "acc_norm": float(s["acc_norm"])})
    metrics = out["results"][TASK]
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "lm_eval_version": lm_eval.__version__, "limit": limit, "dtype": dtype,
            "batch_size": batch_size, "acc": metrics["acc,none"], "acc_norm": metrics["acc_norm,none"],
            "items": items}


def run_lmeval_benchmarks(model_dir: str, data: dict[str, Path], limit: int, *, batch_size: int = 32,
                          dtype: str = "float32") -> dict:
    """lm-eval's hf backend on the first ``limit`` rows of each benchmark's file (``data``: our
    benchmark name -> data file), all tasks in one run: {"seconds", "cpu_seconds", ..., "benchmarks":
    {name: {"items": [{"row", "lls", "greedy", "acc", "acc_norm"?}], "metrics": [...]}}}, items in
    row order. MMLU runs the subject tasks its first rows belong to."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    with tempfile.TemporaryDirectory() as tmp:
        rows_of, owner = {}, {}
        for benchmark, path in data.items():
            for task, rows in local_tasks(Path(tmp), benchmark, path).items():
                wanted = [r for r in rows if r < limit]
                if wanted:
                    assert wanted == rows[:len(wanted)], f"{task}: the first rows are not its first documents"
                    rows_of[task], owner[task] = rows, benchmark
        manager = TaskManager(include_path=tmp, include_defaults=False)
        start, cpu_start = time.perf_counter(), time.process_time()
        out = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={model_dir},dtype={dtype}",
                                      tasks=list(rows_of), task_manager=manager, limit=limit, device="cpu",
                                      batch_size=batch_size, log_samples=True)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    result = {name: {"items": [], "metrics": []} for name in data}
    for task, samples in out["samples"].items():
        bench = result[owner[task]]
        for s in samples:
            row = rows_of[task][s["doc_id"]]
            if row >= limit:
                continue
            item = {"row": row, "lls": [float(r[0][0]) for r in s["resps"]],
                    "greedy": [bool(r[0][1]) for r in s["resps"]], "acc": float(s["acc"])}
            if "acc_norm" in s:
                item["acc_norm"] = float(s["acc_norm"])
            bench["items"].append(item)
        bench["metrics"] = sorted({"acc", *(["acc_norm"] if "acc_norm" in samples[0] else [])})
    for bench in result.values():
        bench["items"].sort(key=lambda i: i["row"])
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "lm_eval_version": lm_eval.__version__, "limit": limit,
            "dtype": dtype, "batch_size": batch_size, "benchmarks": result}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    ref = run_lmeval(args.model_dir, args.data, args.limit, batch_size=args.batch_size)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(ref, indent=1) + "\n")
    print(f"lm-eval: {len(ref['items'])} items in {ref['seconds']:.1f} s, acc {ref['acc']:.4f}, "
          f"acc_norm {ref['acc_norm']:.4f} -> {args.out}")


if __name__ == "__main__":
    main()
