"""What the built-in benchmarks' row functions share: reading fields with the checks every
adapter makes, and the question-answer item (not a benchmark: its name starts with ``_``).

The ``prompts["full"]`` / ``options`` / ``gold`` of a benchmark's default formulation are
lm-eval's; the other formulation is built to the same pattern, and the other prompt modes follow
one rule for question-answer benchmarks: ``zero`` keeps only the template's fixed text (the answer
cue, MMLU's subject line) and drops all of the item's own text, ``placeholder`` puts the study's
filler text before that, ``choice-only`` is empty (letters: the lettered options alone).
Continuation-style benchmarks (COPA, Winogrande) keep the words right before the option, as
HellaSwag's zero prompt does.
"""
from __future__ import annotations

from curate.items.adapters.fields import FieldError, blank, is_index_text, option, require
from curate.items.canonical import letters_from, make_item, prompts_from


def text_field(row: dict, field: str) -> str:
    return require(row, field, str)


def question_field(row: dict, field: str) -> str:
    """The item's own text (question, goal, premise...): empty is refused as missing is, since an
    item with no question scores only its options. No built-in's data has one (SciQ's
    ``support`` is empty in 113 validation rows, and may be)."""
    value = require(row, field, str)
    if blank(value):
        raise FieldError(field, "is empty")
    return value


def option_field(row: dict, field: str) -> str:
    """One option's text, as given; empty or blank is refused naming the source field."""
    return option(require(row, field, str), field)


def choice_list(row: dict, field: str = "choices") -> tuple[list[str], list[str]]:
    """ARC-style ``{"text": [...], "label": [...]}``: the option texts and their labels."""
    value = require(row, field, dict)
    texts, labels = value.get("text"), value.get("label")
    if not isinstance(texts, list) or not isinstance(labels, list) or len(texts) != len(labels):
        raise FieldError(field, "expected {'text': [...], 'label': [...]} of equal length")
    for j, text in enumerate(texts):
        if not isinstance(text, str) or blank(text):
            raise FieldError(f"{field}.text[{j}]", "expected a non-empty string")
    return texts, [str(x) for x in labels]


def label_index(labels: list[str], key, field: str) -> int:
    if not isinstance(key, str) or key.strip() not in labels:
        raise FieldError(field, f"answer {key!r} is not one of the choice labels {labels}")
    return labels.index(key.strip())


def option_index(value, field: str, n: int, *, base: int = 0) -> int:
    """An option index given as an int or a digit string, counted from ``base``."""
    if isinstance(value, str) and is_index_text(value.strip()):
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise FieldError(field, f"expected an option number, got {value!r:.60}")
    if not base <= value < n + base:
        raise FieldError(field, f"answer {value} out of range for {n} options (counted from {base})")
    return value - base


def qa_item(row_index, split, name, *, full, zero, stem, zero_stem="", **fields) -> dict:
    """A question-answer item: cloze contexts ``full``/``zero``, letters stems ``stem``/``zero_stem``;
    ``fields``: ``options`` and ``gold``, and those of ``make_item`` it has (``parts``: its context_parts)."""
    parts = fields.pop("parts", None)
    return make_item(benchmark=name, split=split, row_index=row_index, prompts=prompts_from(full, zero),
                     context_parts=parts or {}, kind="question", letters=letters_from(stem, zero_stem, "Answer:"),
                     **{k: v for k, v in fields.items() if k != "native_ids"}, native_ids=fields.get("native_ids") or {})


def labelled_question(row, row_index, split, name, question):
    """ARC and CommonsenseQA: "Question: ...\\nAnswer:", options and gold by label."""
    texts, labels = choice_list(row)
    gold = label_index(labels, row.get("answerKey"), "answerKey")
    return qa_item(row_index, split, name, full=f"Question: {question}\nAnswer:", zero="Answer:", options=texts,
                   gold=gold, stem=f"Question: {question}\n", native_ids={"id": text_field(row, "id")},
                   parts={"question": question})
