"""What is scored for an item: one (context, continuation) pair per option, per prompt mode and
formulation. Scoring, annotation and the analyses all read an item's texts through here, so the
rules live in one place.

Formulations (the ``formulation`` column of the scores):

- ``cloze``: option j's text is the continuation after the mode's context
  (``prompts[mode]``), or, for modes an item's ``partial`` field covers, the item's shared
  continuation after option j's own context (lm-eval's partial scoring, Winogrande).
- ``letters``: the options are listed with letters in the context ("A. ...\\n") between the
  mode's stem and the answer cue, and the letter is the continuation (lm-eval's MMLU and
  CommonsenseQA; OLMES's "MCF"). An item without a ``letters`` field takes the cloze context as
  its stem (followed by a newline) and "Answer:" as its cue.
- ``letters+rK`` (K = 1 .. options - 1): the same list rotated K places, option j shown at
  position (j + K) mod n. Scores still name the option by its own index, so every analysis
  reads a rotated formulation like any other; only the letter shown for each option moves.
  ``letters+rotations`` asks for every rotation of each item (``letters`` is rotation 0).

The continuation is always ``delimiter + text`` (the item's ``delimiter``, default " "), as
lm-eval's ``target_delimiter``.
"""
from __future__ import annotations

import re
import string
from dataclasses import dataclass

from curate.core.errors import CurateError
from curate.items.canonical import DEFAULT_DELIMITER

FORMULATIONS = ("cloze", "letters")
#: What ``curate score --formulations`` takes for every rotation of each item's lettered list.
ALL_ROTATIONS = "letters+rotations"
LABELS = string.ascii_uppercase
DEFAULT_CUE = "Answer:"
_ROTATED = re.compile(r"^letters\+r([1-9][0-9]*)$")


@dataclass(frozen=True)
class Scored:
    """The requests of one item in one mode and formulation: option j is scored as
    ``delimiter + continuations[j]`` after ``contexts[j]``."""
    contexts: list[str]
    continuations: list[str]
    delimiter: str = DEFAULT_DELIMITER

    def texts(self) -> list[str]:
        """Each option's whole scored text (the continuation alone after an empty context)."""
        return [c + self.delimiter + t if c else t for c, t in zip(self.contexts, self.continuations)]


def parse(formulation: str) -> tuple[str, int]:
    """('cloze' | 'letters', rotation) of a formulation name; a CurateError for anything else."""
    if formulation in FORMULATIONS:
        return formulation, 0
    match = _ROTATED.match(formulation)
    if match:
        return "letters", int(match.group(1))
    raise CurateError(f"unknown formulation {formulation!r}; known: cloze, letters, letters+rK (a rotation), "
                      f"{ALL_ROTATIONS}")


def check(name: str) -> str:
    """``name`` if it is a formulation ``curate score`` accepts (ALL_ROTATIONS included)."""
    if name != ALL_ROTATIONS:
        parse(name)
    return name


def rotated(rotation: int) -> str:
    return "letters" if rotation == 0 else f"letters+r{rotation}"


def rotations(n_options: int) -> list[str]:
    """Every cyclic rotation of the lettered list of an item with ``n_options`` options."""
    return [rotated(k) for k in range(n_options)]


def delimiter(item: dict) -> str:
    return item.get("delimiter", DEFAULT_DELIMITER)


def scored(item: dict, mode: str, formulation: str = "cloze") -> Scored:
    """The (context, continuation) of every option of ``item`` in ``mode`` and ``formulation``."""
    base, rotation = parse(formulation)
    n = len(item["options"])
    if rotation >= n:
        raise CurateError(f"{item['item_id']}: {formulation} needs more than {n} options")
    if base == "letters":
        context = letters_context(item, mode, rotation)
        return Scored([context] * n, [LABELS[(j + rotation) % n] for j in range(n)], delimiter(item))
    partial = item.get("partial")
    if partial and mode in partial["contexts"]:
        return Scored(list(partial["contexts"][mode]), [partial["continuation"]] * n, delimiter(item))
    return Scored([item["prompts"][mode]] * n, list(item["options"]), delimiter(item))


def letters_context(item: dict, mode: str, rotation: int = 0) -> str:
    """The lettered-list context: stem, one "L. option" line per option in shown order, cue."""
    letters = item.get("letters")
    if letters is None:
        context = item["prompts"][mode]
        stem, cue = (context + "\n" if context else ""), DEFAULT_CUE
    else:
        stem, cue = letters["stems"][mode], letters["cue"]
    options, n = item["options"], len(item["options"])
    shown = [options[(p - rotation) % n] for p in range(n)]
    return stem + "".join(f"{LABELS[p]}. {text}\n" for p, text in enumerate(shown)) + cue


def display_texts(item: dict, mode: str = "full") -> list[str]:
    """Each option as a reader sees it in the cloze formulation: its context and continuation
    joined by one space (Winogrande: the whole sentence with the option filled in)."""
    s = scored(item, mode, "cloze")
    return [" ".join(p for p in (c.rstrip(), t.lstrip()) if p) for c, t in zip(s.contexts, s.continuations)]
