"""The lm-evaluation-harness 0.4.13 task every release carries (``lm_eval_task/``).

    lm_eval --model hf --model_args pretrained=MODEL --include_path RELEASE/lm_eval_task --tasks NAME

A built-in benchmark's task is lm-eval's own task config for it (its module's ``LM_EVAL`` in
``curate/items/builtins/``: the keys of tasks/<benchmark>/*.yaml that shape a request, includes
resolved), zero-shot, with the dataset
swapped for the released data file; the functions its yaml names are copied beside it
(``lm_eval_utils.py`` -> ``utils.py``). A benchmark read by the generic adapter has no lm-eval
config: its task reads ``docs.jsonl``, each kept item's context, options and gold in the
formulation the workspace was scored in, written by the same code ``curate score`` uses.
tests/test_release_lm_eval.py checks both against lm-eval: the requests it builds, and its
log-likelihoods against ``curate score``'s.
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from curate.core.atomic import write_text
from curate.core.errors import CurateError
from curate.items.adapters import from_record
from curate.items.adapters.generic import Generic
from curate.items.builtins import BENCHMARKS
from curate.items.builtins._lm_eval import ACC_NORM, Function, function
from curate.items.formulations import scored

TASK_DIR = "lm_eval_task"
LM_EVAL_VERSION = "0.4.13"
DOCS = "docs.jsonl"
UTILS = Path(__file__).with_name("lm_eval_utils.py")


#: How a generic benchmark's docs.jsonl is read: the request as `curate score` makes it.
GENERIC_CONFIG = {"doc_to_text": "query", "doc_to_choice": "choices", "doc_to_target": "gold",
                  "metric_list": ACC_NORM}


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(Function, lambda dumper, f: dumper.represent_scalar("!function", str(f)))


def builtin_of(record: dict) -> str | None:
    """The built-in benchmark a workspace's adapter record names (None: the generic adapter, whose
    name may be a built-in's, or no record)."""
    adapter = from_record(record) if record else None
    if adapter is None or isinstance(adapter, Generic):
        return None
    return adapter.name if adapter.name in BENCHMARKS.modules else None


def write_task(folder: Path, *, name: str, version: str, adapter: dict, split: str, data_path: str,
               items: list[dict], formulation: str) -> dict:
    """Write ``folder/lm_eval_task/`` for the release: the task yaml and utils.py, and for a
    generic benchmark docs.jsonl from the kept ``items``. Returns what the manifest says of it
    (the task is named as the release)."""
    task_dir = folder / TASK_DIR
    task_dir.mkdir()
    benchmark = builtin_of(adapter)
    if benchmark is None:
        docs = [_generic_doc(item, formulation) for item in items]
        write_text(task_dir / DOCS, "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs))
        config, data, origin = GENERIC_CONFIG, DOCS, (f"the requests `curate score` makes in the {formulation} "
                                                      f"formulation (generic adapter), from {DOCS}")
    else:
        config, data = BENCHMARKS.get(benchmark).LM_EVAL, f"../{data_path}"
        origin = f"lm-eval {LM_EVAL_VERSION}'s own task config for {benchmark}, zero-shot, reading {data}"
    write_text(task_dir / f"{name}.yaml", _task_yaml(name, version, split, data, config, origin))
    write_utils(task_dir)
    return {"task": name, "yaml": f"{TASK_DIR}/{name}.yaml", "lm_eval_version": LM_EVAL_VERSION,
            "config": benchmark or f"generic ({formulation})"}


def _task_yaml(name: str, version: str, split: str, data: str, config: dict, origin: str) -> str:
    """The release's task yaml: the released ``data`` file as its only split, zero-shot, then ``config``."""
    return task_yaml(name, split, data, config, {"release": f"{name} {version}"},
                     [f"lm-evaluation-harness {LM_EVAL_VERSION} task of release {name} {version}: {origin}.",
                      f"lm_eval --model hf --model_args pretrained=MODEL --include_path {TASK_DIR} --tasks {name}"])


def task_yaml(name: str, split: str, data: str, config: dict, metadata: dict, comment: list[str]) -> str:
    """A task yaml reading ``data`` (a path relative to the task folder, read by utils.py's
    ``load_release`` so the folder runs from anywhere) as its only split, zero-shot in lm-eval's
    sense (no few-shot split), then ``config``; ``metadata`` joins the config's own, and the
    ``comment`` lines head the file."""
    eval_split = "test_split" if split == "test" else "validation_split"
    head = {"task": name, "dataset_path": "json" if data.endswith(".jsonl") else "parquet",
            "dataset_kwargs": {"data_files": {split: data}}, "custom_dataset": function("load_release"),
            "output_type": "multiple_choice", "training_split": None, "validation_split": None, "test_split": None,
            eval_split: split, "fewshot_split": None}
    body = yaml.dump({**head, **{k: v for k, v in config.items() if k != "metadata"},
                      "metadata": {**config.get("metadata", {}), **metadata}},
                     Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)
    return "".join(f"# {line}\n" for line in comment) + body


def write_utils(task_dir: Path) -> None:
    """The functions the task yamls name (``!function utils.NAME``), beside them."""
    write_text(task_dir / "utils.py", UTILS.read_text(encoding="utf-8"))


def _generic_doc(item: dict, formulation: str) -> dict:
    """One item as lm-eval's multiple_choice reads it: one context, the options' continuations."""
    s = scored(item, "full", formulation)
    if len(set(s.contexts)) != 1 or s.delimiter != " ":
        raise CurateError(f"{item['item_id']}: an item with per-option contexts or its own delimiter has no "
                          f"lm-eval multiple_choice form")
    return {"item_id": item["item_id"], "query": s.contexts[0], "choices": s.continuations, "gold": item["gold"]}
