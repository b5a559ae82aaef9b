"""What an annotator is asked, and how its answer is read back.

The wording lives in versioned text files under ``annotate/prompts/`` so that changing a word
changes ``prompt_version`` (a hash of the files) and with it every request key: old answers are
never mistaken for answers to the new question. The wording fits the item's ``kind``:
"continuation" items (HellaSwag: a text continued by one of several endings; ``round1.v1.txt``)
and "question" items (MMLU, ARC: a question and its answers; ``round1.question.v1.txt``), with one
taxonomy of labels for both. Round 1 shows the prompt and the options; round 2 shows each option
as the full text (context + ending; for question items the answer alone, except where each option
has its own context, Winogrande, whose candidates are whole sentences). The option the benchmark
labels correct is marked in both.

Answers come back as tool calls whose input schema mirrors the annotation schema, with options
named by letters; ``read_answer`` turns them into the 0-based ``result`` the store keeps, or
explains why it cannot.
"""
from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import schemas
from annotate.store import LABELS
from curate.items.formulations import display_texts

PROMPT_DIR = Path(__file__).parent / "prompts"
VERSION = "v1"
MARK = " (marked correct)"
SUBMIT = {1: "submit_labels", 2: "submit_judgement"}
DECLINE = "decline_item"
KINDS = ("continuation", "question")


def kind_of(item: dict) -> str:
    """The item's kind (what its annotation wording must fit); continuation when it does not say."""
    return item.get("kind", "continuation")


def prompt_files(round: int, kind: str, version: str = VERSION, stem: str = "round") -> str:
    """The file name of a round's instructions (``stem`` "round") or item template ("item.round")."""
    return f"{stem}{round}.{version}.txt" if kind == "continuation" else f"{stem}{round}.{kind}.{version}.txt"


@dataclass(frozen=True)
class Prompt:
    """One round's instructions (shared by every item, so cacheable) and item template."""
    round: int
    instructions: str
    item_template: str
    version: str  # sha256 over the files' names and bytes


@cache
def load_prompt(round: int, version: str = VERSION, kind: str = "continuation") -> Prompt:
    if kind not in KINDS:
        raise ValueError(f"unknown item kind {kind!r}; known: {', '.join(KINDS)}")
    files = [PROMPT_DIR / prompt_files(round, kind, version), PROMPT_DIR / prompt_files(round, kind, version, "item.round")]
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return Prompt(round, files[0].read_text(encoding="utf-8").strip(),
                  files[1].read_text(encoding="utf-8").strip(), "sha256:" + digest.hexdigest())


def letters(n: int) -> list[str]:
    return list(string.ascii_uppercase[:n])


def option_texts(item: dict, round: int) -> list[str]:
    """What is shown for each option: the option (round 1) or the full text, context and option
    (round 2; for question items the answer alone unless the options have their own contexts)."""
    if round == 1 or (kind_of(item) == "question" and "partial" not in item):
        return [opt.strip() for opt in item["options"]]
    return display_texts(item, "full")


def prompt_text(item: dict) -> str:
    """The prompt as shown: the full-mode context; for per-option contexts (Winogrande) the
    sentence with a blank where the options go."""
    if "partial" in item:
        return " ".join(p for p in (item["prompts"]["full"], "_", item["partial"]["continuation"]) if p)
    return item["prompts"]["full"]


def render_item(item: dict, round: int) -> str:
    """The per-item user message. An item whose own text holds the marker ("... (marked
    correct)" as part of an option) also gets a line naming the gold letter outright, so the
    marker cannot be forged by the benchmark's text."""
    prompt, texts, names = prompt_text(item), option_texts(item, round), letters(len(item["options"]))
    lines = [f"{letter}. {text}{MARK if i == item['gold'] else ''}" for i, (letter, text) in enumerate(zip(names, texts))]
    if MARK.strip().lower() in " ".join([prompt, *texts]).lower():
        lines.append(f'(The benchmark labels {names[item["gold"]]} correct; "{MARK.strip()}" anywhere else is part '
                     f"of the item's own text.)")
    template = load_prompt(round, kind=kind_of(item)).item_template
    return template.format(prompt=prompt, options="\n".join(lines))


def tools(round: int, n_options: int) -> list[dict]:
    """Tool definitions: the round's answer form first, then a way to decline the item."""
    opts = letters(n_options)
    if round == 1:
        submit = {"name": SUBMIT[1], "description": "Record the quality labels that apply to this item.",
                  "input_schema": {"type": "object", "additionalProperties": False, "required": ["labels"],
                                   "properties": {"labels": {"type": "array", "minItems": 1, "uniqueItems": True,
                                                             "items": {"type": "string", "enum": list(LABELS)}}}}}
    else:
        submit = {"name": SUBMIT[2], "description": "Record the answers to the four questions about this item.",
                  "input_schema": {"type": "object", "additionalProperties": False,
                                   "required": ["best", "equally_good", "all_implausible", "worst"],
                                   "properties": {
                                       "best": {"type": "string", "enum": opts},
                                       "equally_good": {"type": "array", "uniqueItems": True,
                                                        "items": {"type": "string", "enum": opts}},
                                       "all_implausible": {"type": "boolean"},
                                       "worst": {"type": "string", "enum": opts}}}}
    decline = {"name": DECLINE, "description": "Decline to annotate this item, with the reason.",
               "input_schema": {"type": "object", "required": ["reason"],
                                "properties": {"reason": {"type": "string"}}}}
    return [submit, decline]


def result_problems(result: dict, round: int, item: dict) -> list[str]:
    """Schema problems plus the rules that need the item (indices in range, gold not 'other')."""
    problems = schemas.errors("annotation", {
        "annotator": "check", "round": round, "item_id": item["item_id"], "status": "valid",
        "result": result, "raw": None, "prompt_version": None, "model_snapshot": None,
        "request_key": "check", "content_hash": item["content_hash"]})
    if problems or round == 1:
        return problems
    n = len(item["options"])
    for field in ("best", "worst"):
        if result[field] >= n:
            problems.append(f"{field}: option {result[field]} out of range for {n} options")
    if any(i >= n for i in result["equally_good"]):
        problems.append(f"equally_good: an option out of range for {n} options")
    if item["gold"] in result["equally_good"]:
        problems.append("equally_good: lists the option marked correct itself; it asks for the other options")
    return problems


@dataclass(frozen=True)
class Answer:
    """A reply read back: status 'valid' with a result, 'refused', or 'unusable' with the reason."""
    status: str
    result: dict | None = None
    problem: str | None = None
    tool_use_id: str | None = None


def read_answer(content: list[dict], stop_reason: str | None, round: int, item: dict) -> Answer:
    """Interpret a reply's content blocks (dicts as in the Messages API)."""
    if stop_reason == "refusal":
        return Answer("refused")
    calls = [b for b in content if b.get("type") == "tool_use"]
    if not calls:
        return Answer("unusable", problem=f"no tool call in the reply (stop_reason {stop_reason})")
    call = calls[0]
    if call.get("name") == DECLINE:
        return Answer("refused", tool_use_id=call.get("id"))
    if call.get("name") != SUBMIT[round]:
        return Answer("unusable", problem=f"called unknown tool {call.get('name')!r}", tool_use_id=call.get("id"))
    args = call.get("input")
    try:
        result = from_letters(args, round, len(item["options"]))
    except (TypeError, KeyError, ValueError) as exc:
        return Answer("unusable", problem=f"tool input not understood: {exc}", tool_use_id=call.get("id"))
    problems = result_problems(result, round, item)
    if problems:
        return Answer("unusable", problem="; ".join(problems), tool_use_id=call.get("id"))
    return Answer("valid", result=result, tool_use_id=call.get("id"))


def from_letters(args: dict, round: int, n_options: int) -> dict:
    """Tool input -> stored result (letters become 0-based indices)."""
    if not isinstance(args, dict):
        raise TypeError("input is not an object")
    if round == 1:
        extra = set(args) - {"labels"}
        if extra:
            raise ValueError(f"unexpected fields {sorted(extra)}")
        return {"labels": args["labels"]}
    opts = letters(n_options)

    def index(letter):
        if letter not in opts:
            raise ValueError(f"{letter!r} is not one of {opts}")
        return opts.index(letter)

    extra = set(args) - {"best", "equally_good", "all_implausible", "worst"}
    if extra:
        raise ValueError(f"unexpected fields {sorted(extra)}")
    if not isinstance(args["equally_good"], list):
        raise TypeError("equally_good is not a list")
    return {"best": index(args["best"]), "equally_good": [index(x) for x in args["equally_good"]],
            "all_implausible": args["all_implausible"], "worst": index(args["worst"])}
