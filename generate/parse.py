"""Reading a generated reply back as one of the displayed options, and saying how.

Every reply gets exactly one status:

- ``strict``: the reply, without surrounding white space, is one allowed number (1..K);
- ``lenient``: the answer was found inside a longer reply, either as the one allowed number it
  mentions (method ``number-in-text``: "The answer is 3.", "(3)", "3. He walks away") or, with
  no number, as the one option whose text it quotes (method ``option-text``: rapidfuzz
  ``partial_ratio`` >= ``TEXT_MATCH`` and ahead of every other option by ``TEXT_MARGIN``);
- ``unparsed``: no answer can be read (no allowed number and no quoted option, several different
  numbers, several options matching equally well, or a number that contradicts the quoted
  text). ``detail`` says which. Unparsed replies are stored and counted, never scored.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from rapidfuzz import fuzz, process, utils

STRICT = re.compile(r"\s*(\d+)\s*")
#: A whole number standing alone: not part of a word, a decimal ("3.5") or a longer number.
NUMBER = re.compile(r"(?<![\w.,])(\d+)(?![\w]|[.,]\d)")
TEXT_MATCH = 90.0
TEXT_MARGIN = 10.0
#: Shorter replies are too little text to name an option by its words.
MIN_TEXT_CHARS = 10


@dataclass(frozen=True)
class Parsed:
    status: str              # strict | lenient | unparsed
    shown: int | None        # the chosen displayed position, 1-based
    method: str | None       # number | number-in-text | option-text (None when unparsed)
    detail: str | None       # the match score, or why nothing could be read


def parse_reply(reply: str, options: list[str]) -> Parsed:
    """The displayed option (1-based) that ``reply`` names, among ``options`` in displayed order."""
    k = len(options)
    whole = STRICT.fullmatch(reply or "")
    if whole:
        n = int(whole.group(1))
        if 1 <= n <= k:
            return Parsed("strict", n, "number", None)
        return Parsed("unparsed", None, None, f"number {n} is not between 1 and {k}")
    numbers = sorted({int(n) for n in NUMBER.findall(reply or "") if 1 <= int(n) <= k})
    text = quoted_option(reply or "", options)
    if len(numbers) > 1:
        return Parsed("unparsed", None, None, f"several allowed numbers: {', '.join(map(str, numbers))}")
    if numbers:
        n = numbers[0]
        if isinstance(text, tuple) and text[0] != n and _beyond_number(reply):
            return Parsed("unparsed", None, None, f"number {n} but the text of option {text[0]}")
        return Parsed("lenient", n, "number-in-text", None)
    if isinstance(text, tuple):
        return Parsed("lenient", text[0], "option-text", f"partial_ratio {text[1]:.0f}")
    return Parsed("unparsed", None, None, text or f"no number from 1 to {k} and no option text")


def quoted_option(reply: str, options: list[str]) -> tuple[int, float] | str | None:
    """(displayed position, score) of the one option whose text the reply quotes; else a reason
    (several match equally well) or None (too short, or nothing close)."""
    cleaned = utils.default_process(reply)
    if len(cleaned) < MIN_TEXT_CHARS:
        return None
    scores = process.extract(cleaned, options, scorer=fuzz.partial_ratio, processor=utils.default_process,
                             limit=None)
    ranked = sorted(((s, i) for _, s, i in scores), reverse=True)
    best, position = ranked[0]
    if best < TEXT_MATCH:
        return None
    runner_up = ranked[1][0] if len(ranked) > 1 else 0.0
    if best - runner_up < TEXT_MARGIN:
        close = sorted(i + 1 for s, i in ranked if best - s < TEXT_MARGIN)
        return f"the text matches options {', '.join(map(str, close))} about equally"
    return position + 1, best


def _beyond_number(reply: str) -> bool:
    """Whether the reply has enough text besides the number for its words to count."""
    return len(utils.default_process(NUMBER.sub(" ", reply))) >= MIN_TEXT_CHARS
