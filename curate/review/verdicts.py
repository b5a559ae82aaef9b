"""A reviewer's verdicts as annotation records of annotator ``human:NAME``.

A verdict uses the LLM annotators' answer shapes (round 1: quality labels; round 2: best,
equally good, all implausible, worst), checked by the same rules (``annotate.prompts.
result_problems``), plus a free note. It is stored in the annotation store like any other
record, one per (item, round, reviewer), so `curate agreement` and filter rules read it as they
read an LLM's; every edit is kept as a new version in ``annotation_history``.

``raw`` holds what the reviewer submitted (the answer, the note, and where it came from: the
review app or an imported file), as it holds an LLM's reply.
"""
from __future__ import annotations

import json
import re

from annotate.prompts import result_problems
from annotate.store import read_annotations, write_human_annotation
from curate.core.errors import CurateError
from curate.items.canonical import canonical_json, sha256_text
from curate.items.store import Workspace

PREFIX = "human:"
#: The round-1 labels (annotate.store.LABELS) in words, in the order the app numbers them 1-8.
LABEL_TEXT = {
    "ungrammatical_prompt": "prompt ungrammatical", "ungrammatical_correct": "correct answer ungrammatical",
    "ungrammatical_incorrect": "incorrect answer(s) ungrammatical", "nonsense_prompt": "prompt nonsense",
    "nonsense_correct": "correct answer nonsense", "nonsense_incorrect": "incorrect answer(s) nonsense",
    "multiple_plausible": "multiple plausible answers", "high_quality": "high quality (no issue)",
}
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


def annotator_name(reviewer: str) -> str:
    """``alice`` -> ``human:alice`` (a name already prefixed is kept); refuses names that could
    be confused with other annotators or break a URL."""
    name = reviewer[len(PREFIX):] if reviewer.startswith(PREFIX) else reviewer
    if not NAME.match(name):
        raise CurateError(f"reviewer name {reviewer!r}: use 1-40 letters, digits, '.', '_' or '-'")
    return PREFIX + name


def is_human(annotator: str) -> bool:
    return annotator.startswith(PREFIX)


class VerdictError(CurateError):
    """A verdict that does not fit its round; ``field`` is the answer at fault (``best``,
    ``equally_good``...), or None."""

    def __init__(self, message: str, field: str | None):
        super().__init__(message)
        self.field = field


def _answer_field(problem: str) -> str | None:
    """The answer a problem names: ``result/equally_good: ...`` or ``worst: option 5 ...``."""
    head = problem.split(":", 1)[0].removeprefix("result/").split("/")[0]
    return head if head in ("labels", "best", "worst", "equally_good", "all_implausible") else None


def verdict_record(item: dict, round: int, reviewer: str, result: dict, *, note: str = "",
                   origin: str = "curate review") -> dict:
    """The annotation record of one verdict; raises CurateError naming the problem when the
    answer does not fit the round (unknown label, option out of range, gold among 'equally good')."""
    annotator = annotator_name(reviewer)
    if round not in (1, 2):
        raise CurateError(f"round must be 1 or 2, not {round!r}")
    problems = result_problems(result, round, item)
    if problems:
        raise VerdictError(f"{item['item_id']} round {round}: {problems[0]}", _answer_field(problems[0]))
    if not isinstance(note, str) or len(note) > 10_000:
        raise CurateError(f"{item['item_id']}: the note must be text of at most 10000 characters")
    raw = json.dumps({"result": result, "note": note, "origin": origin}, ensure_ascii=False, sort_keys=True)
    key = sha256_text(canonical_json({"annotator": annotator, "round": round, "item_id": item["item_id"],
                                      "content_hash": item["content_hash"]}))
    return {"annotator": annotator, "round": round, "item_id": item["item_id"], "status": "valid",
            "result": result, "raw": raw, "prompt_version": None, "model_snapshot": None,
            "request_key": key, "content_hash": item["content_hash"]}


def save_verdict(ws: Workspace, item: dict, round: int, reviewer: str, result: dict, *, note: str = "",
                 expected_version: int | None = None, origin: str = "curate review") -> int:
    """Check and store one verdict; returns its version (1 for the first, +1 per edit)."""
    record = verdict_record(item, round, reviewer, result, note=note, origin=origin)
    return write_human_annotation(ws, record, expected_version=expected_version)


def note_of(raw) -> str:
    """The reviewer's note from a human record's ``raw`` ('' when there is none)."""
    try:
        return str(json.loads(raw).get("note") or "")
    except (TypeError, ValueError, AttributeError):
        return ""


def reviewer_verdicts(ws: Workspace, reviewer: str) -> dict[str, dict[int, dict]]:
    """item_id -> round -> {result, note, version} of one reviewer's current records."""
    annotator = annotator_name(reviewer)
    versions = {(r[0], r[1]): r[2] for r in ws.conn.execute(
        "SELECT item_id, round, max(version) FROM annotation_history WHERE annotator = ? GROUP BY item_id, round",
        (annotator,))}
    out: dict[str, dict[int, dict]] = {}
    for r in read_annotations(ws, annotator=annotator).itertuples():
        out.setdefault(r.item_id, {})[int(r.round)] = {
            "result": r.result, "note": note_of(r.raw), "version": versions.get((r.item_id, int(r.round)), 0)}
    return out
