"""`curate export WORKSPACE lm-eval-tasks`: every ablation `curate score` measures as an
lm-evaluation-harness 0.4.13 task, so any of lm-eval's backends (hf, vllm, sglang,
local-completions) can score it and `curate import-scores --format lm-eval-samples` can bring its
``--log_samples`` output back.

One task per prompt mode x formulation x shot count, named ``NAME_MODE_FORMULATION_Kshot``, and a
group NAME over them. Each task reads its own ``docs/TASK.jsonl``: per workspace item the very
context(s) and continuations `curate score` scores for it (``curate.items.formulations``; the k
shots built as lm-eval builds them, ``curate.items.fewshot``, from the pool `curate score` reads,
``curate.items.fewshot_pool``), with its item id and content hash. lm-eval's own few-shot sampler
cannot give MMLU its per-subject shots in one task, so the shots are part of each context and every
task runs at lm-eval's ``num_fewshot`` 0; its ``metadata.benchcurate`` block says which mode,
formulation and shot count it holds (``scoring.imports.lm_eval_samples`` reads it back). The yaml
is the release's (``curate.release.lm_eval_task``), with its utils.py.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import yaml

import curate
from curate.core.atomic import check_writable, temp_folder, unwritable, write_text
from curate.core.errors import CurateError
from curate.items import formulations as forms
from curate.items.canonical import MODES
from curate.items.fewshot import with_shots
from curate.items.fewshot_pool import fewshot_plan
from curate.items.store import Workspace
from curate.release.lm_eval_task import GENERIC_CONFIG, LM_EVAL_VERSION, task_yaml, write_utils
from scoring.imports.lm_eval_samples import EXPORT_KEY

#: A group name lm-eval's task index and sample file names take as is.
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
#: How lm-eval reads a task whose options each have their own context (Winogrande's partial
#: scoring): ``doc_to_text`` gives the gold index, the options are the contexts, the shared
#: continuation is the target (lm-eval's "multiple input" tasks).
MULTIPLE_INPUT = {"doc_to_text": "gold", "doc_to_choice": "contexts", "doc_to_target": "continuation",
                  "metric_list": GENERIC_CONFIG["metric_list"]}


def task_name(group: str, mode: str, formulation: str, fewshot: int) -> str:
    """``GROUP_MODE_FORMULATION_Kshot`` with lm-eval-friendly spelling (choice_only, letters_r1)."""
    return f"{group}_{mode.replace('-', '_')}_{formulation.replace('+', '_')}_{fewshot}shot"


def export_tasks(workspace, out, *, modes=MODES, formulations=None, fewshot=(0,), fewshot_pool=None,
                 name=None) -> dict:
    """Write the task folder ``out`` (new, or an empty folder) for ``workspace``; returns the group,
    its tasks and how many items each holds."""
    out = Path(out)
    if name is not None and not NAME.match(name):
        raise CurateError(f"--name {name!r}: a task group name is a letter, then letters, digits or _")
    check_writable(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CurateError(f"{out}: exists and is not an empty folder; lm-eval would also read any task already there "
                          f"(one name, two tasks): give a new --out")
    with Workspace.open(workspace) as ws:
        items = ws.items()
        if not items:
            raise CurateError(f"{workspace}: holds no items to export")
        benchmark = ws.meta("benchmark") or Path(workspace).name
        wanted = _formulations(list(formulations or [ws.meta("formulation", "cloze")]), items)
        shots, settings, pool_info = fewshot_plan(ws, items, sorted(set(fewshot)), fewshot_pool)
    group = name or _default_name(benchmark)
    tasks = [(mode, f, k) for k in sorted(set(fewshot)) for mode in modes for f in wanted]
    home = Path(os.path.abspath(out)).parent
    try:
        home.mkdir(parents=True, exist_ok=True)
        tmp = temp_folder(home, f".{out.name}.", ".partial")
    except OSError as exc:  # /proc passes every check and takes no folder
        raise unwritable(exc, out) from None
    try:
        written = []
        for mode, f, k in tasks:
            chosen = [i for i, it in enumerate(items) if forms.parse(f)[1] < len(it["options"])]
            docs = [_doc(items[i], forms.scored(items[i], mode, f), shots[k][i], f, settings) for i in chosen]
            written.append(_write_task(tmp, group, benchmark, mode, f, k, docs, pool_info))
        write_utils(tmp)
        tasks_of_group = [t["task"] for t in written]
        write_text(tmp / f"{group}.yaml", f"# {_run_line('THIS_FOLDER', group)}\n" + yaml.safe_dump(
            {"group": group, "task": tasks_of_group, "metadata": {"version": 1.0}}, sort_keys=False))
        try:
            if out.exists():
                out.rmdir()
            os.rename(tmp, out)
        except OSError as exc:
            raise unwritable(exc, out) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"group": group, "folder": str(out), "tasks": written, "run": _run_line(out.resolve(), group)}


def _formulations(wanted: list[str], items: list[dict]) -> list[str]:
    """The formulations named, ``letters+rotations`` as each rotation some item has; each must
    apply to some item (a rotation letters+rK to items with more than K options)."""
    most = max((len(it["options"]) for it in items), default=0)
    out: list[str] = []
    for name in wanted:
        for f in forms.rotations(most) if name == forms.ALL_ROTATIONS else [forms.check(name)]:
            if forms.parse(f)[1] >= most:
                raise CurateError(f"formulation {f!r} applies to no item: a rotation letters+rK needs more than K "
                                  f"options")
            if f not in out:
                out.append(f)
    return out


def _default_name(benchmark: str) -> str:
    """``curate_BENCHMARK``: apart from lm-eval's own task names (``mmlu``, ``hellaswag``)."""
    return "curate_" + re.sub(r"[^A-Za-z0-9_]", "_", benchmark)


def _run_line(out, group: str) -> str:
    """The lm_eval command that runs the group: batches of 16 requests (lm-eval's default of one
    at a time took ten times as long on a CPU; raise it on a GPU)."""
    return (f"lm_eval --model hf --model_args pretrained=MODEL --include_path {out} --tasks {group} "
            f"--batch_size 16 --log_samples --output_path OUT")


def _doc(item: dict, scored: forms.Scored, shots, formulation: str, settings) -> dict:
    """One item as its task's document: its k-shot context(s) and continuations."""
    if shots:
        scored = with_shots(scored, item, list(shots), formulation, settings)
    return {"item_id": item["item_id"], "content_hash": item["content_hash"], "gold": item["gold"],
            "contexts": scored.contexts, "continuations": scored.continuations, "delimiter": scored.delimiter}


def _write_task(folder: Path, group: str, benchmark: str, mode: str, formulation: str, fewshot: int,
                docs: list[dict], pool_info: dict) -> dict:
    """``TASK.yaml`` and ``docs/TASK.jsonl`` of one mode, formulation and shot count."""
    name = task_name(group, mode, formulation, fewshot)
    delimiters = {d.pop("delimiter") for d in docs}
    if len(delimiters) > 1:
        raise CurateError(f"{docs[0]['item_id']}: items of one task put {len(delimiters)} different texts between "
                          f"context and option; an lm-eval task has one target_delimiter")
    shared = all(len(set(d["contexts"])) == 1 for d in docs)
    if not shared and not all(len(set(d["continuations"])) == 1 for d in docs):
        odd = next(d for d in docs if len(set(d["contexts"])) > 1 and len(set(d["continuations"])) > 1)
        raise CurateError(f"{odd['item_id']}: its options differ in both context and continuation ({mode}, "
                          f"{formulation}), which no lm-eval multiple_choice task can ask")
    for d in docs:
        contexts, continuations = d.pop("contexts"), d.pop("continuations")
        d.update({"query": contexts[0], "choices": continuations} if shared else
                 {"contexts": contexts, "continuation": continuations[0]})
    data = f"docs/{name}.jsonl"
    write_text(folder / data, "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs))
    what = {"mode": mode, "formulation": formulation, "fewshot": fewshot, "task": name, "benchmark": benchmark,
            "items": len(docs), "fewshot_key": pool_info.get("fewshot_key") if fewshot else None,
            "exported_by": f"benchcurate {curate.__version__}"}
    config = {**(GENERIC_CONFIG if shared else MULTIPLE_INPUT), "target_delimiter": delimiters.pop() if docs else " ",
              "num_fewshot": 0, "metadata": {"version": 1.0}}
    shots_said = f", its {fewshot} shots in each context (lm-eval's num_fewshot stays 0)" if fewshot else ""
    write_text(folder / f"{name}.yaml", task_yaml(name, "test", data, config, {EXPORT_KEY: what}, [
        f"lm-evaluation-harness {LM_EVAL_VERSION} task: {benchmark}, mode {mode}, formulation {formulation}, "
        f"{fewshot}-shot{shots_said}: the requests `curate score` makes, from {data}."]))
    return {"task": name, "mode": mode, "formulation": formulation, "fewshot": fewshot, "items": len(docs)}
