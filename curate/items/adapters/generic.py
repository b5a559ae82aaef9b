"""Any multiple-choice benchmark, by naming its columns (no code per benchmark).

Shapes covered: MMLU (question, choices list, answer index or letter), ARC (question,
choices.text / choices.label, answerKey letter or label), PIQA (goal, sol1, sol2, label index).
Column names may be dotted paths into nested records (``choices.text``). Cells may be written as
real-world files write them (``curate.items.adapters.cells``): a list of options as a JSON or Python
list literal, answers as a 0- or 1-based number, a letter, a label in any case, or the answer's
text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from curate.items.adapters.fields import FieldError, blank
from curate.items.adapters.cells import ANSWER_FORMATS, answer_index, match_label, option_text, parse_list
from curate.items.fewshot import LM_EVAL_SEED, Settings
from curate.items.formulations import FORMULATIONS
from curate.items.canonical import letters_from, make_item, prompts_from

_MISSING = object()
_PLACEHOLDER_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")


def lookup(row: dict, path: str):
    """``row['a']['b']`` for path 'a.b'; a FieldError naming the path when absent."""
    value = row
    for part in path.split("."):
        value = value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
        if value is _MISSING or value is None:
            raise FieldError(path, "missing")
    return value


@dataclass(frozen=True)
class Generic:
    question: str
    choices: tuple[str, ...]
    answer: str
    answer_format: str = "auto"  # one of cells.ANSWER_FORMATS
    choice_labels: str | None = None
    zero: str | None = None
    source: str | None = None
    ids: tuple[str, ...] = field(default_factory=tuple)
    template: str = "{question}"
    name: str = "generic"
    kind: str = "question"  # question | continuation: the annotation wording
    formulation: str = "cloze"  # how `curate score` scores the items by default
    letters_template: str | None = None  # the letters formulation's text before the list; None: the cloze context
    fewshot_split: str | None = None  # k-shot examples: a split name (read from the source) or a file
    fewshot_seed: int = LM_EVAL_SEED  # the few-shot sampler's seed (lm-eval's default)

    def __post_init__(self):
        if isinstance(self.choices, str):
            object.__setattr__(self, "choices", tuple(c for c in self.choices.split(",") if c))
        if isinstance(self.ids, str):
            object.__setattr__(self, "ids", tuple(c for c in self.ids.split(",") if c))
        if not self.choices:
            raise ValueError("generic adapter: name the choices column(s)")
        if self.answer_format not in ANSWER_FORMATS:
            raise ValueError(f"generic adapter: answer_format must be one of {', '.join(ANSWER_FORMATS)}, "
                             f"got {self.answer_format!r}")
        if self.kind not in ("question", "continuation"):
            raise ValueError(f"generic adapter: kind must be question or continuation, got {self.kind!r}")
        if self.formulation not in FORMULATIONS:
            raise ValueError(f"generic adapter: formulation must be one of {', '.join(FORMULATIONS)}, "
                             f"got {self.formulation!r}")

    @property
    def fewshot(self) -> Settings:
        """lm-eval's random sampler from the few-shot split (default train), seeded with ``fewshot_seed``."""
        return Settings(split=self.fewshot_split or "train", seed=self.fewshot_seed)

    def _options(self, row: dict) -> list[str]:
        if len(self.choices) > 1:  # one column per option (PIQA: sol1, sol2)
            raw = [(c, lookup(row, c)) for c in self.choices]
        else:
            col = self.choices[0]
            value = lookup(row, col)
            if isinstance(value, dict) and "text" in value:  # ARC-style {"text": [...], "label": [...]}
                col, value = f"{col}.text", value["text"]
            raw = [(f"{col}[{j}]", v) for j, v in enumerate(parse_list(value, col))]
        options = [option_text(value, where) for where, value in raw]
        if len(options) < 2:
            raise FieldError(self.choices[0], f"expected at least 2 options, got {len(options)}")
        return options

    def _gold(self, row: dict, options: list[str]) -> int:
        value = lookup(row, self.answer)
        if self.choice_labels:
            labels = [str(x).strip() for x in parse_list(lookup(row, self.choice_labels), self.choice_labels)]
            if len(labels) != len(options):  # the gold would be read against other options than its own
                raise FieldError(self.choice_labels, f"{len(labels)} labels for {len(options)} options")
            twice = next((label for j, label in enumerate(labels) if label in labels[:j]), None)
            if twice is not None:
                raise FieldError(self.choice_labels, f"label {twice!r} appears twice")
            return match_label(value, labels, self.answer)
        return answer_index(value, options, self.answer_format, self.answer)

    def to_item(self, row: dict, row_index: int, split: str) -> dict:
        question = lookup(row, self.question)
        if not isinstance(question, str):
            raise FieldError(self.question, f"expected str, got {type(question).__name__}")
        if blank(question):  # as for a missing question: the item would be its options alone
            raise FieldError(self.question, "is empty")
        options = self._options(row)
        gold = self._gold(row, options)
        zero = lookup(row, self.zero) if self.zero else ""
        if not isinstance(zero, str):
            raise FieldError(self.zero, f"expected str, got {type(zero).__name__}")
        zero = zero.strip()
        parts = {"question": question} | ({"zero": zero} if self.zero else {})
        source = lookup(row, self.source) if self.source else None
        letters = None
        if self.letters_template is not None:
            stem = _render(self.letters_template, row, question.strip())
            letters = letters_from(stem + "\n" if stem else "", zero + "\n" if zero else "")
        return make_item(
            benchmark=self.name, split=split, row_index=row_index,
            native_ids={c: _scalar(lookup(row, c)) for c in self.ids},
            source=None if source is None else str(source),
            context_parts=parts, prompts=prompts_from(_render(self.template, row, question.strip()), zero),
            options=options, gold=gold, kind=self.kind, letters=letters,
        )

    def native_key(self, item: dict):
        return tuple(item["native_ids"][c] for c in self.ids) if self.ids else None


def _render(template: str, row: dict, question: str) -> str:
    """``template`` with {question} and {column} filled in from ``row``."""
    def fill(match):
        name = match.group(1)
        return question if name == "question" else str(lookup(row, name))
    return _PLACEHOLDER_FIELD.sub(fill, template).strip()


def _scalar(value):
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else str(value)
