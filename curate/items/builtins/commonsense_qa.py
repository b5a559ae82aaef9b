"""CommonsenseQA (tau/commonsense_qa): lm-eval's ``commonsense_qa``, scored in letters."""
from curate.items.builtins import Spec
from curate.items.builtins._lm_eval import ACC
from curate.items.builtins._rows import labelled_question, question_field
from curate.items.fewshot import Settings

SPEC = Spec("tau/commonsense_qa", None, "validation", "letters", "mit", "commonsense_qa")
#: Shots at random from train; no test split named, so the evaluated document is left out.
FEWSHOT = Settings(passes_eval_doc=True)
LM_EVAL = {"doc_to_text": "Question: {{ question.strip() }}\n"
                          + "".join(f"{x}. {{{{choices['text'][{j}]}}}}\n" for j, x in enumerate("ABCDE")) + "Answer:",
           "doc_to_target": "answerKey", "doc_to_choice": ["A", "B", "C", "D", "E"], "metric_list": ACC}


def to_item(row, row_index, split, name):
    return labelled_question(row, row_index, split, name, question_field(row, "question").strip())
