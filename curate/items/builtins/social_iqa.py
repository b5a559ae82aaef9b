"""Social IQa (allenai/social_i_qa): lm-eval's ``social_iqa``."""
from curate.items.builtins import Spec
from curate.items.builtins._lm_eval import ACC
from curate.items.builtins._rows import option_field, option_index, qa_item, question_field
from curate.items.fewshot import Settings

SPEC = Spec("allenai/social_i_qa", None, "validation", "cloze", "cc-by-4.0", "social_iqa")
#: Shots at random from train; no test split named, so the evaluated document is left out.
FEWSHOT = Settings(passes_eval_doc=True)
LM_EVAL = {"doc_to_text": "Q: {{context}} {{question}}\nA:", "target_delimiter": " ",
           "doc_to_choice": "{{[answerA, answerB, answerC]}}", "doc_to_target": "{{ (label|int) - 1 }}",
           "metric_list": ACC, "metadata": {"version": 0.0}}


def to_item(row, row_index, split, name):
    context, question = question_field(row, "context"), question_field(row, "question")
    options = [option_field(row, f"answer{x}") for x in "ABC"]
    gold = option_index(row.get("label"), "label", 3, base=1)
    return qa_item(row_index, split, name, full=f"Q: {context} {question}\nA:", zero="A:", options=options,
                   gold=gold, stem=f"Q: {context} {question}\n", parts={"context": context, "question": question})
