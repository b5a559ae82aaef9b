"""HellaSwag (Rowan/hellaswag) rows -> canonical items, preprocessed exactly as lm-evaluation-harness does.

The harness's task builds ``query = preprocess(activity_label + ": " + ctx_a + " " +
ctx_b.capitalize())`` and ``choices = [preprocess(e) for e in endings]``; the reference study's
zero mode keeps only ``preprocess(ctx_b.capitalize())``.
"""
from __future__ import annotations

import re

from curate.items.adapters.fields import FieldError, is_index_text, require
from curate.items.builtins import Spec
from curate.items.builtins._lm_eval import ACC_NORM, function
from curate.items.canonical import make_item, prompts_from
from curate.items.fewshot import Settings

SPEC = Spec("Rowan/hellaswag", None, "validation", "cloze", "mit", "hellaswag", pretty_name="HellaSwag",
            citation="""@inproceedings{zellers2019hellaswag,
  title     = {HellaSwag: Can a Machine Really Finish Your Sentence?},
  author    = {Zellers, Rowan and Holtzman, Ari and Bisk, Yonatan and Farhadi, Ali and Choi, Yejin},
  booktitle = {Proceedings of the 57th Annual Meeting of the Association for Computational Linguistics},
  year      = {2019}
}""", study="""@article{chizhov2025hellaswag,
  title   = {What the HellaSwag? On the Validity of Common-Sense Reasoning Benchmarks},
  author  = {Chizhov, Pavel and others},
  journal = {arXiv preprint arXiv:2504.07825},
  year    = {2025}
}""")
#: lm-eval's task: shots drawn at random from train; it names no test split, so (None == None)
#: the evaluated document goes to the sampler, which draws k + 1 and drops it.
FEWSHOT = Settings(passes_eval_doc=True)
LM_EVAL = {"process_docs": function("hellaswag_docs"), "doc_to_text": "{{query}}", "doc_to_target": "{{label}}",
           "doc_to_choice": "choices", "metric_list": ACC_NORM, "metadata": {"version": 1.0}}

_BRACKET_TAG = re.compile(r"\[.*?\]")


def preprocess(text: str) -> str:
    """The harness's cleaning: WikiHow's [title]/[step] tags out, double spaces collapsed once."""
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = _BRACKET_TAG.sub("", text)
    return text.replace("  ", " ")


def source_of(source_id: str) -> str:
    """'activitynet' or 'wikihow', from the prefix of HellaSwag's source_id."""
    prefix = source_id.split("~", 1)[0].lower()
    if prefix not in ("activitynet", "wikihow"):
        raise FieldError("source_id", f"expected a prefix 'activitynet~' or 'wikihow~', got {source_id!r:.60}")
    return prefix


def gold_index(label) -> int:
    """HellaSwag's label is an int in some copies and a digit string in others."""
    if isinstance(label, str) and is_index_text(label.strip()):
        return int(label)
    if isinstance(label, int) and not isinstance(label, bool):
        return label
    raise FieldError("label", f"expected an option index (int or digit string), "
                              f"got {type(label).__name__} {label!r:.60}")


def to_item(row, row_index, split, name):
    activity_label = require(row, "activity_label", str)
    ctx_a = require(row, "ctx_a", str)
    ctx_b = require(row, "ctx_b", str)
    endings = require(row, "endings", list)
    for j, ending in enumerate(endings):
        if not isinstance(ending, str):
            raise FieldError(f"endings[{j}]", f"expected str, got {type(ending).__name__}")
    if "label" not in row or row["label"] is None:
        raise FieldError("label", "missing")
    gold = gold_index(row["label"])
    source_id = require(row, "source_id", str)
    options = [preprocess(e) for e in endings]
    for j, option in enumerate(options):
        if not option:
            raise FieldError(f"endings[{j}]", "option is empty after preprocessing")
    if len(options) < 2:
        raise FieldError("endings", f"expected at least 2 options, got {len(options)}")
    if not 0 <= gold < len(options):
        raise FieldError("label", f"gold index {gold} out of range for {len(options)} options")
    full = preprocess(activity_label + ": " + ctx_a + " " + ctx_b.capitalize())
    zero = preprocess(ctx_b.capitalize())
    return make_item(
        benchmark=name, split=split, row_index=row_index,
        native_ids={"ind": require(row, "ind", int), "source_id": source_id,
                    "split_type": require(row, "split_type", str)},
        source=source_of(source_id),
        context_parts={"activity_label": activity_label, "ctx_a": ctx_a, "ctx_b": ctx_b},
        prompts=prompts_from(full, zero), options=options, gold=gold,
    )


def native_key(item: dict):
    # `ind` alone repeats (433 values in validation); (ind, source_id) is unique.
    return (item["native_ids"]["ind"], item["native_ids"]["source_id"])
