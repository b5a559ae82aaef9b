"""SciQ (allenai/sciq): lm-eval's ``sciq``."""
from curate.items.builtins import Spec
from curate.items.builtins._lm_eval import ACC_NORM
from curate.items.builtins._rows import option_field, qa_item, question_field, text_field
from curate.items.fewshot import Settings

SPEC = Spec("allenai/sciq", None, "validation", "cloze", "cc-by-nc-3.0", "sciq")
#: Shots at random from train; the task names a test split, so nothing is left out.
FEWSHOT = Settings()
LM_EVAL = {"doc_to_text": "{{support.lstrip()}}\nQuestion: {{question}}\nAnswer:", "doc_to_target": 3,
           "doc_to_choice": "{{[distractor1, distractor2, distractor3, correct_answer]}}", "metric_list": ACC_NORM,
           "metadata": {"version": 1.0}}


def to_item(row, row_index, split, name):
    support, question = text_field(row, "support").lstrip(), question_field(row, "question")
    options = [option_field(row, f) for f in ("distractor1", "distractor2", "distractor3", "correct_answer")]
    return qa_item(row_index, split, name, full=f"{support}\nQuestion: {question}\nAnswer:", zero="Answer:",
                   options=options, gold=3, stem=f"{support}\nQuestion: {question}\n",
                   parts={"support": support, "question": question})
