"""The canonical multiple-choice item: what every stage after ingest reads.

An item is a plain dict validated by ``schemas/item.schema.json``. Adapters build them with
``make_item``, which fills in the id and the content hash so those are defined in one place.

``prompts``, ``options`` and ``gold`` are the cloze view every stage reads: option j is scored as
``delimiter + options[j]`` after ``prompts[mode]``. Optional fields say what else is scored
(``curate.items.formulations`` turns an item into requests): ``delimiter`` when it is not " ",
``partial`` for per-option contexts (Winogrande), ``letters`` for the lettered-list formulation.
``kind`` picks the annotation wording ("question" or "continuation", the default).
"""
from __future__ import annotations

import hashlib
import json

import schemas

#: Prompt modes, in the order reports list them. Each names a context text in ``item["prompts"]``.
MODES = ("full", "zero", "placeholder", "choice-only")

#: The study's placeholder prefix: meaningless text of roughly a context's length.
PLACEHOLDER = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit. Morbi vel venenatis dui. "
               "Pellentesque sed cursus massa. ")


def canonical_json(value) -> str:
    """Deterministic JSON (sorted keys, no whitespace, UTF-8 kept) for hashing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_text(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


#: What an item is scored as when it does not say: the cloze continuation follows one space.
DEFAULT_DELIMITER = " "


def content_hash(prompts: dict, options: list[str], gold: int, extras: dict | None = None) -> str:
    """Hash of exactly what is scored and annotated. Two items with equal hashes are
    interchangeable for every cached score or annotation. ``extras`` (the optional fields that
    change what is scored: ``delimiter``, ``partial``, ``letters``) enter only when present, so an
    item without them keeps the hash it always had."""
    fields = {"prompts": prompts, "options": options, "gold": gold, **(extras or {})}
    return sha256_text(canonical_json(fields))


def item_id(benchmark: str, split: str, row_index: int) -> str:
    return f"{benchmark}/{split}/{row_index}"


#: A canonical item's fields besides where it comes from and what it asks, and their defaults
#: (``None``: left out of the item when not given).
ITEM_FIELDS = {"native_ids": {}, "source": None, "context_parts": {}, "kind": None, "delimiter": None,
               "partial": None, "letters": None}


def make_item(*, benchmark: str, split: str, row_index: int, prompts: dict, options: list[str], gold: int,
              **fields) -> dict:
    """A canonical item; ``fields``: the ``ITEM_FIELDS`` it has (the optional ones are left out
    when not given, or, for the delimiter, when it is the default one)."""
    unknown = set(fields) - set(ITEM_FIELDS)
    if unknown:
        raise TypeError(f"make_item: no field {', '.join(sorted(unknown))}")
    fields = {**ITEM_FIELDS, **fields}
    native_ids, source, context_parts, kind = (fields[k] for k in ("native_ids", "source", "context_parts", "kind"))
    delimiter, partial, letters = fields["delimiter"], fields["partial"], fields["letters"]
    extras = {k: v for k, v in (("delimiter", delimiter), ("partial", partial), ("letters", letters))
              if v is not None and not (k == "delimiter" and v == DEFAULT_DELIMITER)}
    return {
        "item_id": item_id(benchmark, split, row_index),
        "benchmark": benchmark,
        "split": split,
        "row_index": row_index,
        "native_ids": native_ids,
        "source": source,
        "context_parts": context_parts,
        "prompts": prompts,
        "options": options,
        "gold": gold,
        **({"kind": kind} if kind else {}),
        **extras,
        "content_hash": content_hash(prompts, options, gold, extras),
    }


def prompts_from(full: str, zero: str) -> dict:
    """The four prompt-mode texts from a full context and its zero-mode remainder."""
    return {"full": full, "zero": zero, "placeholder": PLACEHOLDER + zero, "choice-only": ""}


def letters_from(full: str, zero: str, cue: str = "Answer:") -> dict:
    """The ``letters`` field: per mode the text before the lettered list (each stem ends the way
    the list should follow it, usually with a newline) and the answer cue after the list. Modes
    follow ``prompts_from``; choice-only shows the list alone."""
    return {"stems": prompts_from(full, zero), "cue": cue}


def validation_errors(item: dict) -> list[str]:
    """Schema problems plus the cross-field rules a schema cannot say (gold within options)."""
    problems = schemas.errors("item", item)
    if problems:
        return problems
    n = len(item["options"])
    if not item["gold"] < n:
        problems.append(f"gold: index {item['gold']} out of range for {n} options")
    for mode, contexts in item.get("partial", {}).get("contexts", {}).items():
        if len(contexts) != n:
            problems.append(f"partial/contexts/{mode}: {len(contexts)} contexts for {n} options")
    return problems
