"""OpenBookQA (allenai/openbookqa, main): lm-eval's ``openbookqa``."""
from curate.items.builtins import Spec
from curate.items.builtins._lm_eval import ACC_NORM
from curate.items.builtins._rows import choice_list, label_index, qa_item, question_field, text_field
from curate.items.fewshot import Settings

SPEC = Spec("allenai/openbookqa", "main", "validation", "cloze", "apache-2.0", "openbookqa")
#: Shots at random from train; the task names a test split, so nothing is left out.
FEWSHOT = Settings()
LM_EVAL = {"doc_to_text": "question_stem", "doc_to_target": "{{choices.label.index(answerKey.lstrip())}}",
           "doc_to_choice": "{{choices.text}}", "metric_list": ACC_NORM, "metadata": {"version": 1.0}}


def to_item(row, row_index, split, name):
    stem = question_field(row, "question_stem")
    texts, labels = choice_list(row)
    key = row.get("answerKey")
    gold = label_index(labels, key.lstrip() if isinstance(key, str) else key, "answerKey")
    return qa_item(row_index, split, name, full=stem, zero="", options=texts, gold=gold, stem=stem + "\n",
                   native_ids={"id": text_field(row, "id")}, parts={"question_stem": stem})
