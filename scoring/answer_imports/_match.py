"""What the answer formats share: finding an answer's item in the workspace, reading a choice
(an index, a letter or an option's text) as the item's original option, and collecting the
answers so that one answered twice is named with both places."""
from __future__ import annotations

import string
from collections import defaultdict
from pathlib import Path

import pandas as pd

from curate.core.errors import CurateError
from curate.items.sources import file_sha256

LETTERS = string.ascii_uppercase


def norm(text) -> str:
    """Text as compared: runs of white space as one space, none at the ends (adapters strip)."""
    return " ".join(str(text).split())


def short(value, most: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= most else text[:most - 4] + "...'"


def fail(where: str, field: str, message: str):
    """The one-line refusal of every format: the place (file, sample or row), the field, why."""
    raise CurateError(f"{where}, field '{field}': {message}; nothing was imported")


def letter_index(text) -> int | None:
    """A letter answer as an index: "B", "(B)", "B." and "B)" are 1; anything else None."""
    core = str(text).strip().strip("()[].:").strip()
    return LETTERS.index(core) if len(core) == 1 and core in LETTERS else None


def option_of(item: dict, text) -> list[int]:
    """The options of ``item`` whose text is ``text`` (white space as ``norm``; case ignored when
    no option matches with it)."""
    wanted = norm(text)
    hits = [j for j, option in enumerate(item["options"]) if norm(option) == wanted]
    if not hits:
        hits = [j for j, option in enumerate(item["options"]) if norm(option).casefold() == wanted.casefold()]
    return hits


def file_record(path: Path) -> dict:
    """What the run record keeps of a file read."""
    return {"path": str(Path(path).resolve()), "sha256": file_sha256(Path(path))}


class Items:
    """The workspace's items, found by id, row, native id or context field, or content."""

    def __init__(self, items: list[dict]):
        self.items = items
        self.by_id = {it["item_id"]: it for it in items}
        self.by_row = {it["row_index"]: it for it in items}
        self.by_field: dict[tuple[str, str], list[dict]] = defaultdict(list)
        self.by_options: dict[tuple[str, ...], list[dict]] = defaultdict(list)
        self.by_native: dict[str, list[dict]] = defaultdict(list)
        for it in items:
            for value in {norm(v) for v in it["native_ids"].values() if v is not None}:
                self.by_native[value].append(it)
            for key, value in fields(it).items():
                self.by_field[(key, norm(value))].append(it)
            self.by_options[tuple(sorted(norm(o) for o in it["options"]))].append(it)

    def by_native_id(self, value) -> list[dict]:
        """Items one of whose native ids (a benchmark's own id column) is ``value``."""
        return self.by_native.get(norm(value), [])

    def by_document(self, doc: dict) -> list[dict]:
        """Items whose native ids and context fields the document ``doc`` (a source row, as
        lm-eval logs it) agrees with wherever it has them: at least one, all equal."""
        found = {}
        for key, value in doc.items():
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                for it in self.by_field.get((key, norm(value)), ()):
                    found[it["item_id"]] = it
        return [it for it in found.values()
                if all(norm(doc[k]) == norm(v) for k, v in fields(it).items() if k in doc)]

    def in_text(self, text: str) -> list[dict]:
        """Items whose every context field and option appears in ``text`` (a prompt that shows
        the question and its options)."""
        flat = norm(text)
        return [it for it in self.items if all(norm(v) in flat for v in fields(it).values())
                and all(norm(o) in flat for o in it["options"])]


def fields(item: dict) -> dict:
    """An item's native ids and context fields, the values a source row shows of it."""
    return {k: v for k, v in {**item["native_ids"], **item["context_parts"]}.items()
            if v is not None and not isinstance(v, (list, dict))}


class Answers:
    """The answers read so far, each with where it was read, for one store."""

    def __init__(self):
        self.rows: list[tuple] = []
        self.where: dict[tuple[str, str, str], str] = {}

    def add(self, *, model: str, item: dict, choice: int | None, run: str, where: str, field: str) -> None:
        key = (model, item["item_id"], run)
        if key in self.where:
            fail(where, field, f"answers item {item['item_id']}, which {self.where[key]} answers already (model "
                               f"{model!r}, run {run!r}): each answer is stored once")
        self.where[key] = where
        self.rows.append((model, item["item_id"], choice, run))

    def claimed(self, model: str, item: dict, run: str) -> bool:
        return (model, item["item_id"], run) in self.where

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame.from_records(self.rows, columns=["model", "item_id", "choice", "run"]).astype(
            {"choice": object})


def files_under(paths, patterns: tuple[str, ...], what: str) -> list[Path]:
    """The files ``paths`` name: files as given, folders searched for ``patterns``; an error for
    a folder holding none."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted({f for pattern in patterns for f in path.rglob(pattern) if f.is_file()})
            if not found:
                raise CurateError(f"{path}: no {what} ({', '.join(patterns)}) under this folder")
            out.extend(found)
        else:
            out.append(path)
    seen, unique = set(), []
    for f in out:
        if f.resolve() not in seen:
            seen.add(f.resolve())
            unique.append(f)
    return unique
