"""Cells as real-world files write them: option lists as JSON or Python list literals, options as
text, answers as a 0- or 1-based number, a letter, a label or the answer's own text.

Everything here is parsing, never evaluation: list literals go through ``ast.parse`` and only
string and number constants are accepted. A number inside a literal keeps the text it was
written as ("2.50" stays "2.50"); a number that a file stored as a float has lost that text, so
it is refused rather than guessed.
"""
from __future__ import annotations

import ast
import json
import string

from curate.items.adapters.fields import FieldError, is_index_text, option

ANSWER_FORMATS = ("auto", "index", "index1", "letter", "text")
LETTERS = string.ascii_uppercase


def parse_list(value, where: str) -> list:
    """A list from a list/tuple value or from a cell holding a JSON or Python list literal."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if not isinstance(value, str) or not value.strip().startswith(("[", "(")):
        raise FieldError(where, f"expected a list of options, got {type(value).__name__} {value!r:.60}")
    text = value.strip()
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        node = None
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(element, text, f"{where}[{j}]") for j, element in enumerate(node.elts)]
    try:  # JSON that is not Python (true/false/null)
        parsed = json.loads(text)
    except json.JSONDecodeError:
        raise FieldError(where, f"not a JSON or Python list literal: {text!r:.60}") from None
    if not isinstance(parsed, list):
        raise FieldError(where, f"expected a list literal, got {type(parsed).__name__}")
    return parsed


def _literal(node, text: str, where: str):
    """A string constant's value, or a number constant's text as written."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    number = node.operand if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) else node
    if isinstance(number, ast.Constant) and type(number.value) in (int, float):
        return ast.get_source_segment(text, node)
    raise FieldError(where, f"only text and numbers may appear in a list of options, got {ast.dump(node):.60}")


def option_text(value, where: str) -> str:
    """An option as text: strings stripped, integers written out; a float is refused because
    its written form (2.5 or 2.50) is gone."""
    if isinstance(value, str):
        text = value.strip()
    elif isinstance(value, int) and not isinstance(value, bool):
        text = str(value)
    elif isinstance(value, float):
        raise FieldError(where, f"the option is the number {value!r}, not text: the file stores it as a number, so "
                                "how it was written (2.5 or 2.50) is lost; store the options as text")
    else:
        raise FieldError(where, f"expected text, got {type(value).__name__} {value!r:.60}")
    return option(text, where)


def match_label(value, labels: list[str], where: str) -> int:
    """The index of ``value`` among ``labels``; spellings differing only in case match when
    that leaves one label."""
    text = str(value).strip()
    if text in labels:
        return labels.index(text)
    folded = [j for j, label in enumerate(labels) if label.casefold() == text.casefold()]
    if len(folded) == 1:
        return folded[0]
    raise FieldError(where, f"answer {value!r} is not one of the choice labels {labels}")


def answer_index(value, options: list[str], fmt: str, where: str) -> int:
    """The 0-based gold index from an answer cell read as ``fmt`` (see ANSWER_FORMATS; ``auto``:
    a whole number counts from 0, a single letter from A, anything else must be one option's
    text)."""
    n = len(options)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise FieldError(where, f"expected an option number, a letter or an option's text, got "
                                f"{type(value).__name__}")
    if isinstance(value, float):
        if not value.is_integer():
            raise FieldError(where, f"answer {value!r} is not a whole option number")
        value = int(value)
    text = str(value).strip()
    number = int(text) if is_index_text(text) else None
    if fmt in ("index", "index1") or (fmt == "auto" and number is not None):
        if number is None:
            raise FieldError(where, f"cannot read {value!r} as an option number ({fmt})")
        gold = number - (fmt == "index1")
        if not 0 <= gold < n:
            hint = "; if the answers count from 1, use --answer-format index1" if fmt == "auto" and number == n else ""
            raise FieldError(where, f"gold index {gold} out of range for {n} options{hint}")
        return gold
    if fmt in ("letter", "auto") and len(text) == 1 and text.upper() in LETTERS:
        gold = LETTERS.index(text.upper())
        if gold >= n:
            raise FieldError(where, f"letter {text!r} is out of range for {n} options")
        return gold
    if fmt in ("text", "auto"):
        exact = [j for j, o in enumerate(options) if o == text]
        folded = exact or [j for j, o in enumerate(options) if o.casefold() == text.casefold()]
        if len(folded) == 1:
            return folded[0]
        if len(folded) > 1:
            raise FieldError(where, f"answer {value!r:.60} matches {len(folded)} options")
    wanted = {"letter": "a letter", "text": "the text of one option",
              "auto": "an option number (from 0), a letter, or the text of one option"}[fmt]
    raise FieldError(where, f"cannot read {value!r:.60} as an answer: expected {wanted}")
