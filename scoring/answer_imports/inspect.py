"""``--format inspect``: the answers in Inspect AI eval logs of a multiple-choice task.

Logs (``.eval`` or ``.json``, or folders of them) are read through Inspect's own reader
(``inspect_ai.log.read_eval_log``). Each sample is one answer of the log's model (``--model``
renames it) to one item:

- the item: the sample's id when it is a workspace item id or one item's native id (the
  benchmark's own id column), else the item whose options are the sample's choices and whose
  question appears in the sample's input;
- the sample's choices, in the order the model saw them (Inspect shuffles them in the log when
  the dataset was read with ``shuffle_choices``), must be the item's options in some order; the
  sample's target must then be the item's gold;
- the answer: the letter the ``choice`` scorer read (the only scorer, when it is named otherwise),
  mapped from the shown position back to the item's original option; a reply the scorer could
  not read (no letter) is stored as an unreadable answer. A sample that ended in an error has
  no answer and is counted, not stored;
- its run: ``task=TASK,eval=EVAL_ID,epoch=N``, so each log and each epoch keeps its own answers.
"""
from __future__ import annotations

from pathlib import Path

from curate.core.errors import CurateError
from curate.items.sources import root_cause
from scoring.answer_imports._match import (LETTERS, Answers, Items, fail, file_record, files_under, norm, option_of,
                                           short)

DESCRIPTION = "Inspect AI eval logs (.eval or .json, or folders of them) of a multiple-choice task"
SOURCE = "inspect"
#: The scorer whose reading of the reply is the answer (Inspect's multiple-choice scorer).
SCORER = "choice"


#: The import settings this format reads besides ``model`` (none: a log's answer is its scorer's reading).
SETTINGS: tuple[str, ...] = ()
PATTERNS = ("*.eval", "*.json")


def inputs(paths) -> list[Path]:
    """The files ``read`` reads."""
    return files_under(paths, PATTERNS, "Inspect eval logs")


def read(paths, items: Items, *, model: str | None = None):
    answers, logs, errored = Answers(), [], 0
    for path in inputs(paths):
        log = _read_log(path)
        file = answers.read_file(path)
        label = model or log.eval.model
        run_of = f"task={log.eval.task},eval={log.eval.eval_id}"
        for sample in log.samples:
            where = f"{path}, sample {sample.id!r} (epoch {sample.epoch})"
            if sample.error is not None:
                errored += 1
                continue
            item, shown_to_original = _match(sample, items, where)
            answers.add(model=label, item=item, choice=_choice(sample, shown_to_original, where),
                        run=f"{run_of},epoch={sample.epoch}", where=where, field="id", file=file)
        logs.append({**file_record(path), "task": log.eval.task, "eval_id": log.eval.eval_id,
                     "model": log.eval.model, "status": log.status, "samples": len(log.samples)})
    return answers.frame(), {"logs": logs, "samples_with_errors": errored}


def _read_log(path: Path):
    from inspect_ai.log import read_eval_log  # here: a second to import, and only this format needs it

    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # Inspect's reader raises what its format and zip layers raise
        raise CurateError(f"{path}: not an Inspect AI eval log Inspect can read ({root_cause(exc)}); "
                          f"nothing was imported") from None
    if not log.samples:
        raise CurateError(f"{path}: the log holds no samples (status {log.status}); nothing was imported")
    return log


def _input_text(sample) -> str:
    if isinstance(sample.input, str):
        return sample.input
    return "\n".join(m.text for m in sample.input if m.role == "user")


def _match(sample, items: Items, where: str) -> tuple[dict, list[int]]:
    """The sample's item, and each shown choice's original option index."""
    if not sample.choices:
        fail(where, "choices", "the sample has no choices: not a multiple-choice sample")
    found = ([items.by_id[str(sample.id)]] if str(sample.id) in items.by_id else items.by_native_id(sample.id))
    if not found:
        text = norm(_input_text(sample))
        found = [it for it in items.by_options.get(tuple(sorted(norm(c) for c in sample.choices)), ())
                 if all(norm(v) in text for k, v in it["context_parts"].items() if isinstance(v, str))]
        if not found:
            fail(where, "input", f"matches no workspace item: no item has these choices and this question "
                                 f"({short(_input_text(sample))}), and the sample id is no item's id")
    if len(found) > 1:
        fail(where, "id", f"matches {len(found)} workspace items alike "
                          f"({', '.join(it['item_id'] for it in found[:3])})")
    item = found[0]
    original, taken = [], set()
    for position, text in enumerate(sample.choices):
        free = [j for j in option_of(item, text) if j not in taken]  # a text shown twice: in order
        if not free:
            fail(where, f"choices.{position}", f"{short(text)} is not an option of item {item['item_id']} "
                                               f"(its options: {short(item['options'], 120)})")
        original.append(free[0])
        taken.add(free[0])
    if len(original) != len(item["options"]):
        fail(where, "choices", f"shows {len(original)} choices but item {item['item_id']} has "
                               f"{len(item['options'])} options")
    target = sample.target if isinstance(sample.target, str) else ",".join(sample.target)
    shown = _letter(target)
    if shown is None or shown >= len(original) or original[shown] != item["gold"]:
        fail(where, "target", f"{target!r} is not the shown letter of item {item['item_id']}'s gold option "
                              f"{item['gold']} ({short(item['options'][item['gold']])})")
    return item, original


def _letter(text: str) -> int | None:
    """A shown position from Inspect's letter (A is the first choice shown)."""
    text = text.strip().upper()
    return LETTERS.index(text) if len(text) == 1 and text in LETTERS else None


def _choice(sample, shown_to_original: list[int], where: str) -> int | None:
    """The original option the scorer read from the reply; None when it read no letter."""
    scores = sample.scores or {}
    name = SCORER if SCORER in scores else (next(iter(scores)) if len(scores) == 1 else None)
    if name is None:
        fail(where, "scores", f"no {SCORER!r} scorer's reading of the reply (scores: {', '.join(scores) or 'none'})")
    answer = scores[name].answer
    if answer is None or not str(answer).strip():
        return None  # the scorer read no letter in the reply: an unreadable answer, kept as such
    shown = _letter(str(answer))
    if shown is None or shown >= len(shown_to_original):
        fail(where, f"scores.{name}.answer", f"{short(answer)} is not one letter of the "
                                             f"{len(shown_to_original)} choices (one answer per question)")
    return shown_to_original[shown]
