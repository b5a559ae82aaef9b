"""ARC-Easy (allenai/ai2_arc, ARC-Easy): lm-eval's ``arc_easy``."""
from curate.items.builtins import Spec
from curate.items.builtins._lm_eval import ARC
from curate.items.builtins._rows import labelled_question, question_field
from curate.items.fewshot import Settings

SPEC = Spec("allenai/ai2_arc", "ARC-Easy", "validation", "cloze", "cc-by-sa-4.0", "arc_easy")
#: Shots at random from train; the task names a test split, so nothing is left out.
FEWSHOT = Settings()
LM_EVAL = ARC


def to_item(row, row_index, split, name):
    return labelled_question(row, row_index, split, name, question_field(row, "question"))
