"""COPA (aps/super_glue, copa): lm-eval's ``copa``, a continuation of the premise."""
from curate.items.adapters.fields import FieldError, require
from curate.items.builtins import Spec
from curate.items.builtins._lm_eval import function
from curate.items.builtins._rows import option_field, option_index, question_field
from curate.items.canonical import make_item, prompts_from
from curate.items.fewshot import Settings

SPEC = Spec("aps/super_glue", "copa", "validation", "cloze", "bsd-2-clause", "copa")
#: Shots at random from train; no test split named, so the evaluated document is left out.
FEWSHOT = Settings(passes_eval_doc=True)
LM_EVAL = {"doc_to_text": function("copa_text"), "doc_to_target": function("copa_target"),
           "doc_to_choice": function("copa_choice"), "metric_list": [{"metric": "acc"}], "metadata": {"version": 1.0}}


def to_item(row, row_index, split, name):
    premise = question_field(row, "premise")
    connector = {"cause": "because", "effect": "therefore"}.get(row.get("question"))
    if connector is None:
        raise FieldError("question", f"expected 'cause' or 'effect', got {row.get('question')!r:.60}")
    options = [" " + _lower_first(option_field(row, f)) for f in ("choice1", "choice2")]
    return make_item(benchmark=name, split=split, row_index=row_index,
                     native_ids={"idx": require(row, "idx", int)} if "idx" in row else {}, source=None,
                     context_parts={"premise": premise, "question": row["question"]},
                     prompts=prompts_from(premise.strip()[:-1] + f" {connector}", connector), options=options,
                     gold=option_index(row.get("label"), "label", 2), kind="continuation")


def _lower_first(text: str) -> str:
    return text[0].lower() + text[1:]
