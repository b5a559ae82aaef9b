"""Injecting known errors into items: pure functions of the items, the rate and the seed.

Each kind takes ``round(rate * items)`` items (at least one), drawn without overlap, so an item
carries at most one planted error and every kind's count does not depend on which other kinds
are planted alongside. The donors (another item's option or question) come from the original
items, never from a planted one.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from curate.items.duplicates.plant import respelled
from curate.core.errors import CurateError
from curate.items.canonical import content_hash
from curate.plant import KINDS

#: Fields of an item that are its question (swapped together by ``swapped_question``).
QUESTION_FIELDS = ("prompts", "context_parts", "letters", "kind")
#: Optional item fields that enter the content hash (see ``curate.items.canonical.make_item``).
HASHED_EXTRAS = ("delimiter", "partial", "letters")


@dataclass(frozen=True)
class Planted:
    """One planted error: what was done to which item, in words and in fields."""
    item_id: str
    row_index: int
    kind: str
    note: str
    gold: int                    # the item's gold label before planting
    new_gold: int                # the gold label after (differs only for gold_move)
    changed_options: tuple[int, ...]  # options whose scored text changed (every option for swapped_question)
    donor: str | None = None     # the item an option or the question came from


def check_kinds(kinds) -> list[str]:
    """The kinds in table order; a CurateError naming an unknown one."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise CurateError(f"unknown plant kind(s) {', '.join(unknown) or '(none)'}; known: {', '.join(KINDS)}")
    return [k for k in KINDS if k in kinds]


def rehash(item: dict) -> dict:
    """``item`` with its content hash recomputed from what it now holds."""
    extras = {k: item[k] for k in HASHED_EXTRAS if k in item}
    return {**item, "content_hash": content_hash(item["prompts"], item["options"], item["gold"], extras)}


def plant_items(items: list[dict], kinds, rate: float, seed: int) -> tuple[list[dict], list[Planted]]:
    """The items with errors of each kind planted in ``rate`` of them, and what was planted
    (in row order). The same items, kinds, rate and seed give the same plants."""
    kinds = check_kinds(kinds)
    if not 0 < rate < 1:
        raise CurateError(f"rate {rate}: give a share of the items above 0 and below 1")
    _refuse_unplantable(items, kinds)
    count = max(1, round(rate * len(items)))
    if count * len(kinds) > len(items) - 1:  # evaluate's negatives: the items left unplanted
        raise CurateError(f"rate {rate} x {len(kinds)} kinds needs {count * len(kinds)} of the {len(items)} items, "
                          f"one item each, and at least one must stay unplanted for evaluate to compare against; "
                          f"lower --rate or plant fewer kinds")
    rng = random.Random(seed)
    chosen = rng.sample(range(len(items)), count * len(kinds))
    out, planted = list(items), []
    for n, index in enumerate(chosen):
        kind = kinds[n // count]
        out[index], record = PLANTERS[kind](items, index, rng)
        out[index] = rehash(out[index])
        planted.append(record)
    return out, sorted(planted, key=lambda p: p.row_index)


def _refuse_unplantable(items: list[dict], kinds: list[str]) -> None:
    """Options scored inside per-option contexts (Winogrande's ``partial``) cannot be swapped
    alone; a one-option item has nowhere to move its gold."""
    for it in items:
        if "partial" in it and kinds != ["gold_move"]:
            raise CurateError(f"item {it['item_id']}: its options are scored inside per-option contexts (partial "
                              f"scoring), which only --kinds gold_move leaves intact")
        if len(it["options"]) < 2:
            raise CurateError(f"item {it['item_id']}: has {len(it['options'])} option; planting needs at least 2")


def _other(items: list[dict], index: int, rng: random.Random) -> dict:
    donor = rng.randrange(len(items) - 1)
    return items[donor + (donor >= index)]


def _record(item: dict, kind: str, note: str, changed=(), *, new_gold=None, donor=None) -> Planted:
    return Planted(item["item_id"], item["row_index"], kind, note, item["gold"],
                   item["gold"] if new_gold is None else new_gold, tuple(changed), donor)


def gold_move(items, index, rng):
    item = items[index]
    new = rng.choice([j for j in range(len(item["options"])) if j != item["gold"]])
    return {**item, "gold": new}, _record(item, "gold_move", f"gold moved from option {item['gold']} to {new}",
                                          new_gold=new)


def several_correct(items, index, rng):
    item = items[index]
    gold_text = item["options"][item["gold"]]
    j = rng.choice([j for j in range(len(item["options"])) if j != item["gold"]])
    text = gold_text if rng.random() < 0.5 else respelled(gold_text, rng)
    options = [text if k == j else o for k, o in enumerate(item["options"])]
    how = "a copy" if text == gold_text else "a light paraphrase"
    return {**item, "options": options}, _record(item, "several_correct",
                                                 f"option {j} replaced by {how} of the gold option {item['gold']}", [j])


def no_right_answer(items, index, rng):
    item = items[index]
    for _ in range(1000):  # an option none of this item's options already is
        donor = _other(items, index, rng)
        text = rng.choice(donor["options"])
        if text not in item["options"]:
            break
    else:
        raise CurateError(f"item {item['item_id']}: no other item has an option it does not already have")
    options = [text if k == item["gold"] else o for k, o in enumerate(item["options"])]
    return {**item, "options": options}, _record(
        item, "no_right_answer", f"gold option {item['gold']} replaced by an option of {donor['item_id']}",
        [item["gold"]], donor=donor["item_id"])


def swapped_question(items, index, rng):
    item = items[index]
    donor = _other(items, index, rng)
    new = {k: v for k, v in item.items() if k not in QUESTION_FIELDS}
    new.update({k: donor[k] for k in QUESTION_FIELDS if k in donor})
    return new, _record(item, "swapped_question", f"question taken from {donor['item_id']}",
                        range(len(item["options"])), donor=donor["item_id"])


PLANTERS = {"gold_move": gold_move, "several_correct": several_correct, "no_right_answer": no_right_answer,
            "swapped_question": swapped_question}
