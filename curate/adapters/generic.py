"""Any multiple-choice benchmark, by naming its columns (no code per benchmark).

Shapes covered: MMLU (question, choices list, answer index or letter), ARC (question,
choices.text / choices.label, answerKey letter or label), PIQA (goal, sol1, sol2, label index).
Column names may be dotted paths into nested records (``choices.text``).
"""
from __future__ import annotations

import re
import string
from dataclasses import dataclass, field

from curate.adapters import FieldError, is_index_text
from curate.items import make_item, prompts_from

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
    answer_format: str = "auto"  # auto | index | letter
    choice_labels: str | None = None
    zero: str | None = None
    source: str | None = None
    ids: tuple[str, ...] = field(default_factory=tuple)
    template: str = "{question}"
    name: str = "generic"

    def __post_init__(self):
        if isinstance(self.choices, str):
            object.__setattr__(self, "choices", tuple(c for c in self.choices.split(",") if c))
        if isinstance(self.ids, str):
            object.__setattr__(self, "ids", tuple(c for c in self.ids.split(",") if c))
        if not self.choices:
            raise ValueError("generic adapter: name the choices column(s)")
        if self.answer_format not in ("auto", "index", "letter"):
            raise ValueError(f"generic adapter: answer_format must be auto, index or letter, got {self.answer_format!r}")

    def _options(self, row: dict) -> list[str]:
        if len(self.choices) > 1:  # one column per option (PIQA: sol1, sol2)
            raw = [(c, lookup(row, c)) for c in self.choices]
        else:
            col = self.choices[0]
            value = lookup(row, col)
            if isinstance(value, dict) and "text" in value:  # ARC-style {"text": [...], "label": [...]}
                col, value = f"{col}.text", value["text"]
            if not isinstance(value, (list, tuple)):
                raise FieldError(col, f"expected a list of options, got {type(value).__name__}")
            raw = [(f"{col}[{j}]", v) for j, v in enumerate(value)]
        options = []
        for where, value in raw:
            if not isinstance(value, str):
                raise FieldError(where, f"expected str, got {type(value).__name__}")
            if not value.strip():
                raise FieldError(where, "option is empty")
            options.append(value.strip())
        if len(options) < 2:
            raise FieldError(self.choices[0], f"expected at least 2 options, got {len(options)}")
        return options

    def _gold(self, row: dict, n: int) -> int:
        value = lookup(row, self.answer)
        if self.choice_labels:
            labels = [str(x) for x in lookup(row, self.choice_labels)]
            if str(value).strip() not in labels:
                raise FieldError(self.answer, f"answer {value!r} is not one of the choice labels {labels}")
            return labels.index(str(value).strip())
        fmt = self.answer_format
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise FieldError(self.answer, f"expected an index or a letter, got {type(value).__name__}")
        text = str(value).strip()
        if fmt in ("auto", "index") and (isinstance(value, int) or is_index_text(text)):
            gold = int(text)
        elif fmt in ("auto", "letter") and len(text) == 1 and text.upper() in string.ascii_uppercase:
            gold = string.ascii_uppercase.index(text.upper())
        else:
            raise FieldError(self.answer, f"cannot read {value!r} as an answer ({fmt})")
        if not 0 <= gold < n:
            raise FieldError(self.answer, f"gold index {gold} out of range for {n} options")
        return gold

    def _render(self, row: dict, question: str) -> str:
        def fill(match):
            name = match.group(1)
            return question if name == "question" else str(lookup(row, name))
        return _PLACEHOLDER_FIELD.sub(fill, self.template).strip()

    def to_item(self, row: dict, row_index: int, split: str) -> dict:
        question = lookup(row, self.question)
        if not isinstance(question, str):
            raise FieldError(self.question, f"expected str, got {type(question).__name__}")
        options = self._options(row)
        gold = self._gold(row, len(options))
        zero = lookup(row, self.zero).strip() if self.zero else ""
        parts = {"question": question} | ({"zero": zero} if self.zero else {})
        source = lookup(row, self.source) if self.source else None
        return make_item(
            benchmark=self.name, split=split, row_index=row_index,
            native_ids={c: _scalar(lookup(row, c)) for c in self.ids},
            source=None if source is None else str(source),
            context_parts=parts, prompts=prompts_from(self._render(row, question.strip()), zero),
            options=options, gold=gold,
        )

    def native_key(self, item: dict):
        return tuple(item["native_ids"][c] for c in self.ids) if self.ids else None


def _scalar(value):
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else str(value)
