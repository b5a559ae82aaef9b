"""Winogrande (allenai/winogrande, winogrande_xl): lm-eval's ``winogrande``, scored by partial
evaluation (each option fills the blank in its own context; the rest of the sentence is scored)."""
from curate.items.adapters.fields import FieldError
from curate.items.builtins import Spec
from curate.items.builtins._lm_eval import ACC, function
from curate.items.builtins._rows import option_field, option_index, question_field
from curate.items.canonical import PLACEHOLDER, letters_from, make_item, prompts_from
from curate.items.fewshot import Settings

SPEC = Spec("allenai/winogrande", "winogrande_xl", "validation", "cloze", "cc-by-4.0", "winogrande")
#: Shots at random from train; no test split named, so the evaluated document is left out.
FEWSHOT = Settings(passes_eval_doc=True)
LM_EVAL = {"doc_to_text": function("winogrande_text"), "doc_to_target": function("winogrande_target"),
           "doc_to_choice": function("winogrande_choice"), "metric_list": ACC, "metadata": {"version": 1.0}}


def to_item(row, row_index, split, name):
    sentence = question_field(row, "sentence")
    if "_" not in sentence:
        raise FieldError("sentence", "has no blank '_' to fill")
    gap = sentence.index("_")
    before, after = sentence[:gap], sentence[gap + 1:].strip()
    if not after:
        raise FieldError("sentence", "nothing follows the blank, so there is no continuation to score")
    options = [option_field(row, "option1"), option_field(row, "option2")]
    gold = option_index(row.get("answer"), "answer", 2, base=1)
    # lm-eval's partial scoring: each option fills the blank in its own context and the rest of the
    # sentence is the continuation. Zero drops the words before the blank; choice-only scores the
    # option alone (cloze, empty context).
    contexts = {"full": [before + o for o in options], "zero": list(options),
                "placeholder": [PLACEHOLDER + o for o in options]}
    return make_item(benchmark=name, split=split, row_index=row_index, native_ids={}, source=None,
                     context_parts={"sentence": sentence}, prompts=prompts_from(before.rstrip(), ""),
                     options=options, gold=gold, kind="question",
                     partial={"contexts": contexts, "continuation": after},
                     letters=letters_from(f"{sentence}\n", ""))
