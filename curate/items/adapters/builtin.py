"""Eleven built-in benchmarks, each turned into the requests lm-evaluation-harness 0.4.13's task
of the same name builds (context, continuation, gold, target delimiter), zero-shot.

One function per benchmark maps a row (the Hub dataset's own columns) to an item. The
``prompts["full"]`` / ``options`` / ``gold`` of the default formulation are lm-eval's; the other
formulation is built to the same pattern, and the other prompt modes follow one rule for
question-answer benchmarks: ``zero`` keeps only the template's fixed text (the answer cue, MMLU's
subject line) and drops all of the item's own text, ``placeholder`` puts the study's filler text
before that, ``choice-only`` is empty (letters: the lettered options alone). Continuation-style
benchmarks (COPA, Winogrande) keep the words right before the option, as HellaSwag's zero prompt
does. tests/test_ingest_builtin.py compares every item with lm-eval's own task code.
"""
from __future__ import annotations

from dataclasses import dataclass

from curate.items.adapters.fields import FieldError, blank, is_index_text, option, require
from curate.items.fewshot import Settings
from curate.items.formulations import LABELS
from curate.items.canonical import PLACEHOLDER, letters_from, make_item, prompts_from


@dataclass(frozen=True)
class Spec:
    """Where a built-in benchmark comes from and how it is scored by default."""
    hub: str
    config: str | None
    split: str
    formulation: str  # lm-eval's: "letters" for MMLU and CommonsenseQA, else "cloze"
    license: str
    lm_eval_task: str


# --- shared pieces -------------------------------------------------------------------------

def _text(row: dict, field: str) -> str:
    return require(row, field, str)


def _question(row: dict, field: str) -> str:
    """The item's own text (question, goal, premise...): empty is refused as missing is, since an
    item with no question scores only its options. No built-in's data has one (SciQ's
    ``support`` is empty in 113 validation rows, and may be)."""
    text = require(row, field, str)
    if blank(text):
        raise FieldError(field, "is empty")
    return text


def _option(row: dict, field: str) -> str:
    """One option's text, as given; empty or blank is refused naming the source field."""
    return option(require(row, field, str), field)


def _choice_list(row: dict, field: str = "choices") -> tuple[list[str], list[str]]:
    """ARC-style ``{"text": [...], "label": [...]}``: the option texts and their labels."""
    value = require(row, field, dict)
    texts, labels = value.get("text"), value.get("label")
    if not isinstance(texts, list) or not isinstance(labels, list) or len(texts) != len(labels):
        raise FieldError(field, "expected {'text': [...], 'label': [...]} of equal length")
    for j, text in enumerate(texts):
        if not isinstance(text, str) or blank(text):
            raise FieldError(f"{field}.text[{j}]", "expected a non-empty string")
    return texts, [str(x) for x in labels]


def _label_index(labels: list[str], key, field: str) -> int:
    if not isinstance(key, str) or key.strip() not in labels:
        raise FieldError(field, f"answer {key!r} is not one of the choice labels {labels}")
    return labels.index(key.strip())


def _index(value, field: str, n: int, *, base: int = 0) -> int:
    """An option index given as an int or a digit string, counted from ``base``."""
    if isinstance(value, str) and is_index_text(value.strip()):
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise FieldError(field, f"expected an option number, got {value!r:.60}")
    if not base <= value < n + base:
        raise FieldError(field, f"answer {value} out of range for {n} options (counted from {base})")
    return value - base


def _qa_item(row_index, split, name, *, full, zero, options, gold, stem, zero_stem="", cue="Answer:",
             native_ids=None, source=None, parts=None) -> dict:
    """A question-answer item: cloze contexts ``full``/``zero``, letters stems ``stem``/``zero_stem``."""
    return make_item(benchmark=name, split=split, row_index=row_index, native_ids=native_ids or {}, source=source,
                     context_parts=parts or {}, prompts=prompts_from(full, zero), options=options, gold=gold,
                     kind="question", letters=letters_from(stem, zero_stem, cue))


# --- the benchmarks ------------------------------------------------------------------------

def arc(row, row_index, split, name):
    return _labelled_question(row, row_index, split, name, _question(row, "question"))


def _labelled_question(row, row_index, split, name, question):
    """ARC and CommonsenseQA: "Question: ...\nAnswer:", options and gold by label."""
    texts, labels = _choice_list(row)
    gold = _label_index(labels, row.get("answerKey"), "answerKey")
    return _qa_item(row_index, split, name, full=f"Question: {question}\nAnswer:", zero="Answer:", options=texts,
                    gold=gold, stem=f"Question: {question}\n", native_ids={"id": _text(row, "id")},
                    parts={"question": question})


def openbookqa(row, row_index, split, name):
    stem = _question(row, "question_stem")
    texts, labels = _choice_list(row)
    key = row.get("answerKey")
    gold = _label_index(labels, key.lstrip() if isinstance(key, str) else key, "answerKey")
    return _qa_item(row_index, split, name, full=stem, zero="", options=texts, gold=gold, stem=stem + "\n",
                    native_ids={"id": _text(row, "id")}, parts={"question_stem": stem})


def piqa(row, row_index, split, name):
    goal = _question(row, "goal")
    options = [_option(row, "sol1"), _option(row, "sol2")]
    return _qa_item(row_index, split, name, full=f"Question: {goal}\nAnswer:", zero="Answer:", options=options,
                    gold=_index(row.get("label"), "label", 2), stem=f"Question: {goal}\n", parts={"goal": goal})


def social_iqa(row, row_index, split, name):
    context, question = _question(row, "context"), _question(row, "question")
    options = [_option(row, f"answer{x}") for x in "ABC"]
    gold = _index(row.get("label"), "label", 3, base=1)
    return _qa_item(row_index, split, name, full=f"Q: {context} {question}\nA:", zero="A:", options=options,
                    gold=gold, stem=f"Q: {context} {question}\n", parts={"context": context, "question": question})


def commonsense_qa(row, row_index, split, name):
    return _labelled_question(row, row_index, split, name, _question(row, "question").strip())


def sciq(row, row_index, split, name):
    support, question = _text(row, "support").lstrip(), _question(row, "question")
    options = [_option(row, f) for f in ("distractor1", "distractor2", "distractor3", "correct_answer")]
    return _qa_item(row_index, split, name, full=f"{support}\nQuestion: {question}\nAnswer:", zero="Answer:",
                    options=options, gold=3, stem=f"{support}\nQuestion: {question}\n",
                    parts={"support": support, "question": question})


def boolq(row, row_index, split, name):
    passage, question = _question(row, "passage"), _question(row, "question")
    if "label" in row and row["label"] is not None:  # the aps/super_glue copy: 0 = False, 1 = True
        gold = _index(row["label"], "label", 2)
    else:  # the google/boolq copy: answer is a boolean
        gold = int(require(row, "answer", bool))
    return _qa_item(row_index, split, name, full=f"{passage}\nQuestion: {question}?\nAnswer:", zero="Answer:",
                    options=["no", "yes"], gold=gold, stem=f"{passage}\nQuestion: {question}?\n",
                    parts={"passage": passage, "question": question})


def mmlu_subject(subject: str) -> str:
    """The subject as lm-eval's task descriptions write it ("high_school_biology" -> "high school biology")."""
    return subject.replace("_", " ")


def mmlu_description(subject: str, formulation: str) -> str:
    """The subject line of lm-eval's MMLU task yamls: ``default`` (letters) or ``continuation`` (cloze)."""
    kind = "multiple choice questions" if formulation == "letters" else "questions"
    return f"The following are {kind} (with answers) about {mmlu_subject(subject)}.\n\n"


def mmlu(row, row_index, split, name):
    question, subject = _question(row, "question").strip(), _text(row, "subject")
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
    gold = _index(answer, "answer", len(options))
    letters_line, cloze_line = (mmlu_description(subject, f) for f in ("letters", "cloze"))
    return _qa_item(row_index, split, name, full=f"{cloze_line}Question: {question}\nAnswer:",
                    zero=f"{cloze_line}Answer:", options=options, gold=gold, stem=f"{letters_line}{question}\n",
                    zero_stem=letters_line, source=subject, parts={"question": question})


def copa(row, row_index, split, name):
    premise = _question(row, "premise")
    connector = {"cause": "because", "effect": "therefore"}.get(row.get("question"))
    if connector is None:
        raise FieldError("question", f"expected 'cause' or 'effect', got {row.get('question')!r:.60}")
    options = [" " + _lower_first(_option(row, f)) for f in ("choice1", "choice2")]
    return make_item(benchmark=name, split=split, row_index=row_index,
                     native_ids={"idx": require(row, "idx", int)} if "idx" in row else {}, source=None,
                     context_parts={"premise": premise, "question": row["question"]},
                     prompts=prompts_from(premise.strip()[:-1] + f" {connector}", connector), options=options,
                     gold=_index(row.get("label"), "label", 2), kind="continuation")


def _lower_first(text: str) -> str:
    return text[0].lower() + text[1:]


def winogrande(row, row_index, split, name):
    sentence = _question(row, "sentence")
    if "_" not in sentence:
        raise FieldError("sentence", "has no blank '_' to fill")
    gap = sentence.index("_")
    before, after = sentence[:gap], sentence[gap + 1:].strip()
    if not after:
        raise FieldError("sentence", "nothing follows the blank, so there is no continuation to score")
    options = [_option(row, "option1"), _option(row, "option2")]
    gold = _index(row.get("answer"), "answer", 2, base=1)
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


#: name -> (row function, where it comes from, lm-eval's choices).
BENCHMARKS = {
    "arc_easy": (arc, Spec("allenai/ai2_arc", "ARC-Easy", "validation", "cloze", "cc-by-sa-4.0", "arc_easy")),
    "arc_challenge": (arc, Spec("allenai/ai2_arc", "ARC-Challenge", "validation", "cloze", "cc-by-sa-4.0",
                                "arc_challenge")),
    "mmlu": (mmlu, Spec("cais/mmlu", "all", "test", "letters", "mit", "mmlu")),
    "openbookqa": (openbookqa, Spec("allenai/openbookqa", "main", "validation", "cloze", "apache-2.0", "openbookqa")),
    "piqa": (piqa, Spec("ybisk/piqa", None, "validation", "cloze", "afl-3.0", "piqa")),
    "social_iqa": (social_iqa, Spec("allenai/social_i_qa", None, "validation", "cloze", "cc-by-4.0", "social_iqa")),
    "winogrande": (winogrande, Spec("allenai/winogrande", "winogrande_xl", "validation", "cloze", "cc-by-4.0",
                                    "winogrande")),
    "copa": (copa, Spec("aps/super_glue", "copa", "validation", "cloze", "bsd-2-clause", "copa")),
    "commonsense_qa": (commonsense_qa, Spec("tau/commonsense_qa", None, "validation", "letters", "mit",
                                            "commonsense_qa")),
    "sciq": (sciq, Spec("allenai/sciq", None, "validation", "cloze", "cc-by-nc-3.0", "sciq")),
    "boolq": (boolq, Spec("google/boolq", None, "validation", "cloze", "cc-by-sa-3.0", "boolq")),
}


#: lm-eval's few-shot settings per task (curate.items.fewshot): its few-shot split and sampler, and
#: whether it hands the evaluated document to the sampler (its fewshot_split equals its
#: test_split, None == None included). MMLU: first_n from dev, one task per subject, the
#: subject line first. ARC, OpenBookQA and SciQ name a test split, so nothing is left out.
RANDOM_TRAIN = Settings()
FEWSHOT = {
    **{name: RANDOM_TRAIN for name in ("arc_easy", "arc_challenge", "openbookqa", "sciq")},
    **{name: Settings(passes_eval_doc=True) for name in ("piqa", "social_iqa", "winogrande", "copa",
                                                          "commonsense_qa", "boolq")},
    "mmlu": Settings(split="dev", sampler="first_n", group=lambda item: item["source"],
                     description=lambda item, formulation: mmlu_description(item["source"], formulation)),
}


@dataclass(frozen=True)
class Builtin:
    """The adapter of one built-in benchmark (``name`` a key of ``BENCHMARKS``)."""
    name: str

    def __post_init__(self):
        if self.name not in BENCHMARKS:
            raise ValueError(f"unknown built-in benchmark {self.name!r}; known: {', '.join(BENCHMARKS)}")

    @property
    def spec(self) -> Spec:
        return BENCHMARKS[self.name][1]

    @property
    def formulation(self) -> str:
        return self.spec.formulation

    @property
    def fewshot(self) -> Settings:
        return FEWSHOT[self.name]

    def to_item(self, row: dict, row_index: int, split: str) -> dict:
        return BENCHMARKS[self.name][0](row, row_index, split, self.name)

    def native_key(self, item: dict):
        return tuple(item["native_ids"].values()) or None
