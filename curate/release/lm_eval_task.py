"""The lm-evaluation-harness 0.4.13 task every release carries (``lm_eval_task/``).

    lm_eval --model hf --model_args pretrained=MODEL --include_path RELEASE/lm_eval_task --tasks NAME

A built-in benchmark's task is lm-eval's own task config for it (``LM_EVAL_CONFIGS``: the keys
of tasks/<benchmark>/*.yaml that shape a request, includes resolved), zero-shot, with the dataset
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

from curate.items.adapters import from_record
from curate.items.adapters.generic import Generic
from curate.core.atomic import write_text
from curate.core.errors import CurateError
from curate.items.formulations import scored

TASK_DIR = "lm_eval_task"
LM_EVAL_VERSION = "0.4.13"
DOCS = "docs.jsonl"
UTILS = Path(__file__).with_name("lm_eval_utils.py")


class Function(str):
    """A yaml value written ``!function utils.NAME``: lm-eval imports NAME from the task's utils.py."""


def _function(name: str) -> Function:
    return Function(f"utils.{name}")


ACC = [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}]
ACC_NORM = ACC + [{"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True}]
ARC = {"doc_to_text": "Question: {{question}}\nAnswer:", "doc_to_target": "{{choices.label.index(answerKey)}}",
       "doc_to_choice": "{{choices.text}}", "metric_list": ACC_NORM, "metadata": {"version": 1.0}}
COMMONSENSE_QA_TEXT = ("Question: {{ question.strip() }}\n"
                       + "".join(f"{x}. {{{{choices['text'][{j}]}}}}\n" for j, x in enumerate("ABCDE")) + "Answer:")
MMLU_TEXT = "{{question.strip()}}\n" + "".join(f"{x}. {{{{choices[{j}]}}}}\n" for j, x in enumerate("ABCD")) + "Answer:"

#: Our benchmark -> lm-eval 0.4.13's task config for it (tasks/<path>), without its dataset keys.
#: MMLU is one lm-eval task per subject, whose description names the subject; here one task
#: covers every subject, its description a template of the document's own subject, which gives
#: each document the text its subject's task would.
LM_EVAL_CONFIGS = {
    "hellaswag": {"process_docs": _function("hellaswag_docs"), "doc_to_text": "{{query}}",
                  "doc_to_target": "{{label}}", "doc_to_choice": "choices", "metric_list": ACC_NORM,
                  "metadata": {"version": 1.0}},
    "arc_easy": ARC,
    "arc_challenge": ARC,
    "openbookqa": {"doc_to_text": "question_stem", "doc_to_target": "{{choices.label.index(answerKey.lstrip())}}",
                   "doc_to_choice": "{{choices.text}}", "metric_list": ACC_NORM, "metadata": {"version": 1.0}},
    "piqa": {"doc_to_text": "Question: {{goal}}\nAnswer:", "doc_to_target": "label",
             "doc_to_choice": "{{[sol1, sol2]}}", "metric_list": ACC_NORM, "metadata": {"version": 1.0}},
    "social_iqa": {"doc_to_text": "Q: {{context}} {{question}}\nA:", "target_delimiter": " ",
                   "doc_to_choice": "{{[answerA, answerB, answerC]}}", "doc_to_target": "{{ (label|int) - 1 }}",
                   "metric_list": ACC, "metadata": {"version": 0.0}},
    "winogrande": {"doc_to_text": _function("winogrande_text"), "doc_to_target": _function("winogrande_target"),
                   "doc_to_choice": _function("winogrande_choice"), "metric_list": ACC, "metadata": {"version": 1.0}},
    "copa": {"doc_to_text": _function("copa_text"), "doc_to_target": _function("copa_target"),
             "doc_to_choice": _function("copa_choice"), "metric_list": [{"metric": "acc"}],
             "metadata": {"version": 1.0}},
    "commonsense_qa": {"doc_to_text": COMMONSENSE_QA_TEXT, "doc_to_target": "answerKey",
                       "doc_to_choice": ["A", "B", "C", "D", "E"], "metric_list": ACC},
    "sciq": {"doc_to_text": "{{support.lstrip()}}\nQuestion: {{question}}\nAnswer:", "doc_to_target": 3,
             "doc_to_choice": "{{[distractor1, distractor2, distractor3, correct_answer]}}", "metric_list": ACC_NORM,
             "metadata": {"version": 1.0}},
    "boolq": {"process_docs": _function("boolq_docs"), "doc_to_text": "{{passage}}\nQuestion: {{question}}?\nAnswer:",
              "doc_to_target": "label", "doc_to_choice": ["no", "yes"], "metric_list": ACC,
              "metadata": {"version": 2.0}},
    "mmlu": {"description": "The following are multiple choice questions (with answers) about "
                            "{{subject.replace('_', ' ')}}.\n\n",
             "doc_to_text": MMLU_TEXT, "doc_to_choice": ["A", "B", "C", "D"], "doc_to_target": "answer",
             "metric_list": ACC, "metadata": {"version": 1.0}},
}

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
    return adapter.name if adapter.name in LM_EVAL_CONFIGS else None


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
        config, data = LM_EVAL_CONFIGS[benchmark], f"../{data_path}"
        origin = f"lm-eval {LM_EVAL_VERSION}'s own task config for {benchmark}, zero-shot, reading {data}"
    write_text(task_dir / f"{name}.yaml", _task_yaml(name, version, split, data, config, origin))
    write_text(task_dir / "utils.py", UTILS.read_text(encoding="utf-8"))
    return {"task": name, "yaml": f"{TASK_DIR}/{name}.yaml", "lm_eval_version": LM_EVAL_VERSION,
            "config": benchmark or f"generic ({formulation})"}


def _task_yaml(name: str, version: str, split: str, data: str, config: dict, origin: str) -> str:
    """The task yaml: the released ``data`` file (relative to the task) as the only split, zero-shot,
    then ``config``; a comment says what it follows and how to run it."""
    eval_split = "test_split" if split == "test" else "validation_split"
    head = {"task": name, "dataset_path": "json" if data.endswith(".jsonl") else "parquet",
            "dataset_kwargs": {"data_files": {split: data}}, "custom_dataset": _function("load_release"),
            "output_type": "multiple_choice", "training_split": None, "validation_split": None, "test_split": None,
            eval_split: split, "fewshot_split": None}
    body = yaml.dump({**head, **{k: v for k, v in config.items() if k != "metadata"},
                      "metadata": {**config.get("metadata", {}), "release": f"{name} {version}"}},
                     Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)
    return (f"# lm-evaluation-harness {LM_EVAL_VERSION} task of release {name} {version}: {origin}.\n"
            f"# lm_eval --model hf --model_args pretrained=MODEL --include_path {TASK_DIR} --tasks {name}\n" + body)


def _generic_doc(item: dict, formulation: str) -> dict:
    """One item as lm-eval's multiple_choice reads it: one context, the options' continuations."""
    s = scored(item, "full", formulation)
    if len(set(s.contexts)) != 1 or s.delimiter != " ":
        raise CurateError(f"{item['item_id']}: an item with per-option contexts or its own delimiter has no "
                          f"lm-eval multiple_choice form")
    return {"item_id": item["item_id"], "query": s.contexts[0], "choices": s.continuations, "gold": item["gold"]}
