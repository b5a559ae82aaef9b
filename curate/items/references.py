"""Which workspace item, and which of its options, a cell of someone else's table names. Every
command that reads a table naming items (``curate import-answers --format table``, verdict
imports) reads its columns here, so each reads a reference the same way and says the same thing
about one that names nothing.

An item is named by the workspace's item id (``mmlu/test/12``), one of the benchmark's own ids
(the columns an ingest keeps as native ids, such as the generic adapter's ``ids: [id]``:
``abstract_algebra/12``) or its row (0-based, in the order ``curate init`` read the rows); an
option by its 0-based index, its letter (A the first, in the item's own order) or its text.

The column functions ``items_of(refs, table, how)`` and ``options_of(items, cells, how)`` are the
way in: one list in, one list out, a ``CellError`` naming the first cell (by its position) that
names nothing. A cell may name two things two ways (HellaSwag's own id ``ind`` is a number, so
``24`` is the row of one item and the ``ind`` of another; MMLU's option ``'2'`` of
``['8', '2', '24', '120']`` is index 2 and the text of option 1). Read ``auto``, such a cell is
read the way most cells of its column read (``usual_kind``: a column of option texts reads it as
the text), and refused where no way reads more cells than every other, its ``readings`` telling
the caller which ways to offer. Numbers are ASCII digits only: ``²`` and ``١`` are digits to
``str.isdigit`` but no row and no index.
"""
from __future__ import annotations

import re
from collections import defaultdict

#: How a reference may be read: "id" the workspace's item id, "own" one of the benchmark's own
#: ids, "row" the item's row. ``"auto"`` (``find``'s default) tries each.
KINDS = ("id", "own", "row")
HOW = ("auto", *KINDS)
_ROW = re.compile(r"[0-9]+")
#: What each kind is called in messages.
WORDS = {"id": "item id of the workspace", "own": "benchmark's own id", "row": "row"}


class CellError(ValueError):
    """A cell that names nothing, or names different things in different ways (``readings``: kind
    -> what it names that way, for the caller's advice on declaring how its column is read).
    ``index``: the cell's position in its column, set by the column functions (else None)."""

    def __init__(self, message: str, readings: dict | None = None, index: int | None = None):
        super().__init__(message)
        self.readings, self.index = readings or {}, index


class ItemRefError(CellError):
    """A cell naming no item, or different items in different ways."""


def _norm(value) -> str:
    return " ".join(str(value).split())


def _short(value, most: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= most else text[:most - 4] + "...'"


class ItemRefs:
    """The workspace's ``items`` (dicts as ``Workspace.items()`` gives them) by every kind of
    reference. Build it once per table: lookups are dictionary reads."""

    def __init__(self, items: list[dict]):
        self.items = items
        self.by_id = {it["item_id"]: it for it in items}
        self.by_row = {it["row_index"]: it for it in items}
        self.by_own: dict[str, list[tuple[str, dict]]] = defaultdict(list)
        for it in items:
            for key, value in it["native_ids"].items():
                if value is not None and not isinstance(value, (list, dict)):
                    self.by_own[_norm(value)].append((key, it))
        self.own_keys = sorted({k for it in items for k, v in it["native_ids"].items() if v is not None})
        self._closest: list[str] | None = None

    def kinds(self, ref) -> dict[str, dict]:
        """kind -> the item ``ref`` names read that way, for each kind it reads as (none: it
        names nothing). A benchmark's own id that several items share reads as none of them."""
        out = {}
        text = _text(ref)
        if text is None:
            return out
        if text in self.by_id:
            out["id"] = self.by_id[text]
        owners = {it["item_id"]: it for _, it in self.by_own.get(_norm(text), ())}
        if len(owners) == 1:
            out["own"] = next(iter(owners.values()))
        if _ROW.fullmatch(text) and int(text) in self.by_row:
            out["row"] = self.by_row[int(text)]
        return out

    def find(self, ref, how: str = "auto", prefer: str | None = None) -> dict:
        """The item ``ref`` names, read as ``how`` (one of ``HOW``): an int or integral float, or a
        text. ``auto`` reads it every way; when two ways name different items, the ``prefer``red
        kind decides (its column's usual kind, ``usual_kind``), else it is refused. An
        ``ItemRefError`` says why none fits (with the closest id when it is no id at all), or that
        it names different items in different ways."""
        found = self.kinds(ref)
        if how != "auto":
            if how not in KINDS:
                raise ValueError(f"how {how!r}: read a reference as one of {', '.join(HOW)}")
            if how in found:
                return found[how]
            raise ItemRefError(self._no_item(ref, [how]))
        if not found:
            raise ItemRefError(self._no_item(ref, list(KINDS)))
        if prefer in found:
            return found[prefer]
        if len({it["item_id"] for it in found.values()}) > 1:
            raise ItemRefError(self.ambiguous(ref, found), found)
        return next(iter(found.values()))

    def ambiguous(self, ref, found: dict[str, dict]) -> str:
        """What a reference reading as different items is, kind by kind."""
        text = _text(ref)
        parts = [f"the {self._word(k, it, text)} of item {it['item_id']}" for k, it in found.items()]
        return f"{_short(text if text is not None else ref)} is {' and '.join(parts)}"

    @staticmethod
    def _word(kind: str, item: dict, text: str | None) -> str:
        if kind == "own":
            keys = [k for k, v in item["native_ids"].items() if v is not None and _norm(v) == _norm(text)]
            return f"benchmark's own id ({', '.join(keys)})"
        return WORDS[kind]

    def _no_item(self, ref, kinds: list[str]) -> str:
        """Why ``ref`` names no item read as ``kinds``, with the closest id when it reads as an id."""
        text = _text(ref)
        shown = _short(text if text is not None else ref)
        owners = [it["item_id"] for _, it in self.by_own.get(_norm(text), ())] if text is not None else []
        if "own" in kinds and len(owners) > 1:
            return (f"{shown} is the benchmark's own id of {len(owners)} items ({', '.join(owners[:3])}"
                    f"{', ...' if len(owners) > 3 else ''}): name one by its item id or row")
        phrases = {"id": "an item id of the workspace", "row": f"a row of {'it' if 'id' in kinds else 'the workspace'} "
                   f"(0-{len(self.items) - 1})",
                   "own": (f"one of the benchmark's own ids ({', '.join(self.own_keys)})" if self.own_keys
                           else "one of the benchmark's own ids (the workspace keeps none)")}
        told = [phrases[k] for k in ("id", "row", "own") if k in kinds and (k != "own" or self.own_keys or kinds == ["own"])]
        message = f"{shown} is {'no' if 'id' in kinds else 'not'} {told[0].removeprefix('an ')}" + "".join(
            f", nor {t}" for t in told[1:])
        near = self.closest(ref) if ("id" in kinds or "own" in kinds) else None
        return f"{message}; the closest is {near!r}" if near else message

    def closest(self, ref) -> str | None:
        """The item id or own id nearest ``ref`` (rapidfuzz's Levenshtein distance), or None."""
        from rapidfuzz import process
        from rapidfuzz.distance import Levenshtein

        text = _text(ref)
        if text is None or not text.strip():
            return None
        if self._closest is None:
            self._closest = sorted({*self.by_id, *self.by_own})
        # a typo's wrong character (O for 0) costs less than a missing or extra one
        hit = process.extractOne(text, self._closest, scorer=Levenshtein.distance, scorer_kwargs={"weights": (2, 2, 1)})
        return hit[0] if hit else None


def _text(ref) -> str | None:
    """A reference as text (an integral number as its digits), or None for what names no item
    (empty, a bool, a fraction, a list)."""
    if isinstance(ref, bool) or ref is None:
        return None
    if isinstance(ref, float):
        return str(int(ref)) if ref == ref and ref not in (float("inf"), float("-inf")) and ref.is_integer() else None
    if isinstance(ref, int):
        return str(ref)
    if isinstance(ref, str):
        return ref.strip() or None
    return None


def items_of(refs, table: ItemRefs, how: str = "auto") -> list[dict]:
    """The item each cell of the column ``refs`` names (a list of cells: text, int or integral
    float), read as ``how`` (one of ``HOW``; ``auto``: each cell as it reads, one reading two ways
    as most cells of the column read). An ``ItemRefError`` for the first cell that names none, or
    two items where the column cannot say which, its ``index`` the cell's position. Each distinct
    cell is read once (a million rows name a few thousand items)."""
    distinct = _distinct(refs)
    prefer = usual_kind(((table.kinds(ref), n) for ref, n in distinct.values()), KINDS, counted=True) \
        if how == "auto" else None
    found: dict = {}
    out = []
    for k, ref in enumerate(refs):
        key = _key(ref)
        if key not in found:
            try:
                found[key] = table.find(ref, how, prefer)
            except ItemRefError as exc:
                exc.index = k
                raise
        out.append(found[key])
    return out


def options_of(items: list[dict], cells, how: str = "auto", reader: "OptionRefs | None" = None) -> list[int | None]:
    """The option of ``items[k]`` each cell ``cells[k]`` names, read as ``how`` (one of
    ``OPTION_HOW``; ``auto`` as ``items_of`` reads); None for an empty cell. An ``OptionRefError``
    for the first cell that names none, or two options where the column cannot say which, its
    ``index`` the cell's position. ``reader``: an ``OptionRefs`` to reuse across columns."""
    reader = reader or OptionRefs()
    pairs: dict = {}
    for item, value in zip(items, cells):
        if not empty_cell(value):
            key = (item["item_id"], _key(value))
            pairs[key] = (item, value, pairs[key][2] + 1 if key in pairs else 1)
    prefer = usual_kind(((reader.kinds(it, v), n) for it, v, n in pairs.values()), OPTION_KINDS, counted=True) \
        if how == "auto" else None
    read: dict = {}
    out = []
    for k, (item, value) in enumerate(zip(items, cells)):
        key = (item["item_id"], _key(value))
        if key not in read:
            try:
                read[key] = reader.read(item, value, how, prefer)
            except OptionRefError as exc:
                exc.index = k
                raise
        out.append(read[key])
    return out


def _key(value):
    """A cell as a dictionary key, its type kept (True is no row 1); a list or object by its repr."""
    return (type(value), value) if isinstance(value, (str, int, float, type(None))) else (list, repr(value))


def _distinct(cells) -> dict:
    """key -> (a cell of that key, how many cells have it)."""
    out: dict = {}
    for cell in cells:
        key = _key(cell)
        out[key] = (cell, out[key][1] + 1) if key in out else (cell, 1)
    return out


# --- options -------------------------------------------------------------------------------

#: How a cell may name one of an item's options: its 0-based index (``2``), its letter (``C``,
#: ``(C)``, ``C.``: A the first option in the item's own order) or its text (white space aside;
#: case too when no option matches with it).
OPTION_KINDS = ("index", "letter", "text")
OPTION_HOW = ("auto", *OPTION_KINDS)
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def letter_index(text) -> int | None:
    """A letter answer as an index: "B", "(B)", "B." and "B)" are 1; anything else None."""
    core = str(text).strip().strip("()[].:").strip()
    return LETTERS.index(core) if len(core) == 1 and core in LETTERS else None


def empty_cell(value) -> bool:
    """A cell that names no option: empty, white space, null or NaN (an unreadable answer)."""
    return value is None or (isinstance(value, float) and value != value) or (isinstance(value, str) and not value.strip())


class OptionRefs:
    """Which option of an item a cell names, read each way (``OPTION_KINDS``); each item's option
    texts are normalized once."""

    def __init__(self):
        self._texts: dict[str, tuple[dict, dict]] = {}

    def texts(self, item: dict) -> tuple[dict, dict]:
        """(normalized text -> option indexes, casefolded normalized text -> option indexes)."""
        found = self._texts.get(item["item_id"])
        if found is None:
            exact, folded = defaultdict(list), defaultdict(list)
            for j, option in enumerate(item["options"]):
                exact[_norm(option)].append(j)
                folded[_norm(option).casefold()].append(j)
            found = self._texts[item["item_id"]] = (dict(exact), dict(folded))
        return found

    def text_hits(self, item: dict, value) -> list[int]:
        """The options whose text is ``value`` (case ignored when none matches with it)."""
        exact, folded = self.texts(item)
        wanted = _norm(value)
        return exact.get(wanted) or folded.get(wanted.casefold(), [])

    def kinds(self, item: dict, value) -> dict[str, int]:
        """kind -> the option ``value`` names read that way, for each kind it reads as."""
        out: dict[str, int] = {}
        n = len(item["options"])
        if isinstance(value, bool) or not isinstance(value, (int, float, str)) or empty_cell(value):
            return out
        index = _index(value)
        if index is not None and index < n:
            out["index"] = index
        if isinstance(value, str):
            letter = letter_index(value)
            if letter is not None and letter < n:
                out["letter"] = letter
        hits = self.text_hits(item, value) if isinstance(value, str) or index is not None else []
        if len(hits) == 1:
            out["text"] = hits[0]
        return out

    def read(self, item: dict, value, how: str = "auto", prefer: str | None = None) -> int | None:
        """The option ``value`` names read as ``how`` (one of ``OPTION_HOW``); None for an empty
        cell (an answer that could not be read). ``auto`` reads it every way; when two ways name
        different options the ``prefer``red kind decides (its column's usual kind), else an
        ``OptionRefError`` says so, or why no way fits."""
        if empty_cell(value):
            return None
        found = self.kinds(item, value)
        if how == "auto":
            if prefer in found:
                return found[prefer]
            if len(set(found.values())) > 1:
                raise OptionRefError(self.ambiguous(item, value, found), found)
            if found:
                return next(iter(found.values()))
        elif how in found:
            return found[how]
        elif how not in OPTION_KINDS:
            raise ValueError(f"how {how!r}: read an option as one of {', '.join(OPTION_HOW)}")
        raise OptionRefError(self._no_option(item, value, how))

    @staticmethod
    def ambiguous(item: dict, value, found: dict[str, int]) -> str:
        parts = [f"option {j}'s {kind}" for kind, j in found.items()]
        return f"{_short(value)} is {' and '.join(parts)} of item {item['item_id']}"

    def _no_option(self, item: dict, value, how: str) -> str:
        n, iid = len(item["options"]), item["item_id"]
        last = chr(ord("A") + n - 1)
        index, letter = _index(value), letter_index(value) if isinstance(value, str) else None
        hits = self.text_hits(item, value) if isinstance(value, (str, int)) and not isinstance(value, bool) else []
        if how in ("auto", "text") and len(hits) > 1:
            return f"{_short(value)} is the text of options {', '.join(map(str, hits))} of item {iid} alike; give the index"
        if how in ("auto", "index") and index is not None:
            return f"{_short(value)} is not an option index of item {iid} (0-{n - 1})"
        if how in ("auto", "letter") and letter is not None:
            return f"letter {str(value).strip()!r} is past item {iid}'s {n} options (A-{last})"
        if how == "index":
            return f"{_short(value)} is not an option index of item {iid} (0-{n - 1})"
        if how == "letter":
            return f"{_short(value)} is not a letter of item {iid}'s options (A-{last})"
        if how == "text":
            return f"{_short(value)} is not the text of an option of item {iid}: {_short(item['options'], 100)}"
        return (f"{_short(value)} is no option of item {iid} (an index 0-{n - 1}, a letter A-{last} or an "
                f"option's text: {_short(item['options'], 100)})")


class OptionRefError(CellError):
    """A cell naming no option of its item, or different options in different ways."""


def _index(value) -> int | None:
    """An option index as a cell writes it: an int, an integral float, or ASCII digits."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value == value and value not in (float("inf"), float("-inf")) and value.is_integer() \
            and value >= 0 else None
    if isinstance(value, str) and _ROW.fullmatch(value.strip()):
        return int(value.strip())
    return None


def usual_kind(readings, kinds: tuple[str, ...], counted: bool = False) -> str | None:
    """The kind in which more cells of a column read than in any other (``readings``: one dict
    kind -> what the cell names that way per non-empty cell; ``counted``: pairs of such a dict and
    how many cells read so), or None on a tie. A column holds one kind of reference: a cell that
    reads two ways is read the way most of its column reads (a column of MMLU's option texts reads
    '2' as a text, though it is also an index); a column where two kinds read as many cells cannot
    say, and such a cell is refused."""
    counts = dict.fromkeys(kinds, 0)
    for entry in readings:
        found, n = entry if counted else (entry, 1)
        for kind in found:
            counts[kind] += n
    best = max(counts.values(), default=0)
    top = [k for k, n in counts.items() if n == best]
    return top[0] if best and len(top) == 1 else None
