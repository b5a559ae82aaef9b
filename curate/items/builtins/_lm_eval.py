"""What the built-in benchmarks' lm-eval task configs share (not a benchmark: its name starts with
``_``): the metric lists, and ``Function``, a config value lm-eval's yaml writes as ``!function
utils.NAME`` (the functions are lm-eval's own, copied into every release as its task's utils.py:
``curate/release/lm_eval_utils.py``)."""
from __future__ import annotations


class Function(str):
    """A yaml value written ``!function utils.NAME``: lm-eval imports NAME from the task's utils.py."""


def function(name: str) -> Function:
    return Function(f"utils.{name}")


ACC = [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}]
ACC_NORM = ACC + [{"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True}]
#: ARC-Easy and ARC-Challenge (tasks/arc/arc_easy.yaml, which arc_challenge includes).
ARC = {"doc_to_text": "Question: {{question}}\nAnswer:", "doc_to_target": "{{choices.label.index(answerKey)}}",
       "doc_to_choice": "{{choices.text}}", "metric_list": ACC_NORM, "metadata": {"version": 1.0}}
