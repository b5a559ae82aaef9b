"""PIQA (ybisk/piqa): lm-eval's ``piqa``."""
from curate.items.builtins import Spec
from curate.items.builtins._lm_eval import ACC_NORM
from curate.items.builtins._rows import option_field, option_index, qa_item, question_field
from curate.items.fewshot import Settings

SPEC = Spec("ybisk/piqa", None, "validation", "cloze", "afl-3.0", "piqa")
#: Shots at random from train; no test split named, so the evaluated document is left out.
FEWSHOT = Settings(passes_eval_doc=True)
LM_EVAL = {"doc_to_text": "Question: {{goal}}\nAnswer:", "doc_to_target": "label",
           "doc_to_choice": "{{[sol1, sol2]}}", "metric_list": ACC_NORM, "metadata": {"version": 1.0}}


def to_item(row, row_index, split, name):
    goal = question_field(row, "goal")
    options = [option_field(row, "sol1"), option_field(row, "sol2")]
    return qa_item(row_index, split, name, full=f"Question: {goal}\nAnswer:", zero="Answer:", options=options,
                   gold=option_index(row.get("label"), "label", 2), stem=f"Question: {goal}\n", parts={"goal": goal})
