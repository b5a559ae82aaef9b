"""MMLU (cais/mmlu, all; one lm-eval task per subject, ``mmlu_<subject>``), scored in letters."""
from curate.items.adapters.fields import FieldError, blank, require
from curate.items.builtins import Spec
from curate.items.builtins._lm_eval import ACC
from curate.items.builtins._rows import option_index, qa_item, question_field, text_field
from curate.items.fewshot import Settings
from curate.items.formulations import LABELS

SPEC = Spec("cais/mmlu", "all", "test", "letters", "mit", "mmlu")


def mmlu_subject(subject: str) -> str:
    """The subject as lm-eval's task descriptions write it ("high_school_biology" -> "high school biology")."""
    return subject.replace("_", " ")


def mmlu_description(subject: str, formulation: str) -> str:
    """The subject line of lm-eval's MMLU task yamls: ``default`` (letters) or ``continuation`` (cloze)."""
    kind = "multiple choice questions" if formulation == "letters" else "questions"
    return f"The following are {kind} (with answers) about {mmlu_subject(subject)}.\n\n"


#: first_n shots from dev, one task per subject (the shots are the subject's), the subject line first.
FEWSHOT = Settings(split="dev", sampler="first_n", group=lambda item: item["source"],
                   description=lambda item, formulation: mmlu_description(item["source"], formulation))
#: One task covers every subject here, its description a template of the document's own subject,
#: which gives each document the text its subject's task would.
LM_EVAL = {"description": "The following are multiple choice questions (with answers) about "
                          "{{subject.replace('_', ' ')}}.\n\n",
           "doc_to_text": "{{question.strip()}}\n" + "".join(f"{x}. {{{{choices[{j}]}}}}\n" for j, x in enumerate("ABCD"))
                          + "Answer:",
           "doc_to_choice": ["A", "B", "C", "D"], "doc_to_target": "answer", "metric_list": ACC,
           "metadata": {"version": 1.0}}


def to_item(row, row_index, split, name):
    question, subject = question_field(row, "question").strip(), text_field(row, "subject")
    options = require(row, "choices", list)
    for j, option in enumerate(options):
        if not isinstance(option, str) or blank(option):
            raise FieldError(f"choices[{j}]", "expected a non-empty string")
    answer = row.get("answer")
    if isinstance(answer, str) and len(answer.strip()) == 1 and answer.strip().isalpha():
        letter, allowed = answer.strip().upper(), LABELS[:len(options)]
        if letter not in allowed:
            raise FieldError("answer", f"answer {answer!r} is not one of the letters {', '.join(allowed)}")
        answer = allowed.index(letter)
    gold = option_index(answer, "answer", len(options))
    letters_line, cloze_line = (mmlu_description(subject, f) for f in ("letters", "cloze"))
    return qa_item(row_index, split, name, full=f"{cloze_line}Question: {question}\nAnswer:",
                   zero=f"{cloze_line}Answer:", options=options, gold=gold, stem=f"{letters_line}{question}\n",
                   zero_stem=letters_line, source=subject, parts={"question": question})
