"""BoolQ (google/boolq; the aps/super_glue copy too): lm-eval's ``boolq``."""
from curate.items.adapters.fields import require
from curate.items.builtins import Spec
from curate.items.builtins._lm_eval import ACC, function
from curate.items.builtins._rows import option_index, qa_item, question_field
from curate.items.fewshot import Settings

SPEC = Spec("google/boolq", None, "validation", "cloze", "cc-by-sa-3.0", "boolq")
#: Shots at random from train; no test split named, so the evaluated document is left out.
FEWSHOT = Settings(passes_eval_doc=True)
LM_EVAL = {"process_docs": function("boolq_docs"), "doc_to_text": "{{passage}}\nQuestion: {{question}}?\nAnswer:",
           "doc_to_target": "label", "doc_to_choice": ["no", "yes"], "metric_list": ACC,
           "metadata": {"version": 2.0}}


def to_item(row, row_index, split, name):
    passage, question = question_field(row, "passage"), question_field(row, "question")
    if "label" in row and row["label"] is not None:  # the aps/super_glue copy: 0 = False, 1 = True
        gold = option_index(row["label"], "label", 2)
    else:  # the google/boolq copy: answer is a boolean
        gold = int(require(row, "answer", bool))
    return qa_item(row_index, split, name, full=f"{passage}\nQuestion: {question}?\nAnswer:", zero="Answer:",
                   options=["no", "yes"], gold=gold, stem=f"{passage}\nQuestion: {question}?\n",
                   parts={"passage": passage, "question": question})
