"""What the answer formats share: finding an answer's item in the workspace, reading a choice
(an index, a letter or an option's text) as the item's original option, and collecting the
answers so that one answered twice is named with both places."""
from __future__ import annotations

import functools
from collections import defaultdict
from pathlib import Path

import pandas as pd

from curate.core.errors import CurateError
from curate.items.references import LETTERS, ItemRefs, OptionRefs, letter_index  # noqa: F401  (the formats' names)
from curate.items.sources import file_sha256


def norm(text) -> str:
    """Text as compared: runs of white space as one space, none at the ends (adapters strip)."""
    return " ".join(str(text).split())


def short(value, most: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= most else text[:most - 4] + "...'"


def fail(where: str, field: str, message: str):
    """The one-line refusal of every format: the place (file, sample or row), the field, why."""
    raise CurateError(f"{where}, field '{field}': {message}; nothing was imported")


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

    @functools.cached_property
    def refs(self) -> ItemRefs:
        """The items by every reference a table may write (``curate.items.references``)."""
        return ItemRefs(self.items)

    @functools.cached_property
    def options(self) -> OptionRefs:
        return OptionRefs()

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
    """The answers read so far, each with where it was read and the file it came from, for one
    store. ``add`` refuses an answer given twice as it comes; a format reading a million rows
    ``extend``s instead, each answer's place its row number in its file, and calls ``check_once``
    when done (one pass over integer codes rather than a dictionary of every answer)."""

    def __init__(self):
        self.columns: dict[str, list] = {c: [] for c in ("model", "item_id", "choice", "run", "file")}
        self.places: list = []
        self.where: dict[tuple[str, str, str], object] = {}
        self.files: list[str] = []
        self.given: dict[str, str] = {}

    def read_file(self, path) -> str:
        """Note a file read (its answers' ``file``), whether it gives answers or not."""
        name = str(Path(path).resolve())
        if name not in self.files:
            self.files.append(name)
            self.given[name] = str(path)
        return name

    def add(self, *, model: str, item: dict, choice: int | None, run: str, where: str, field: str, file: str) -> None:
        key = (model, item["item_id"], run)
        if key in self.where:
            fail(where, field, f"answers item {item['item_id']}, which {self.where[key]} answers already (model "
                               f"{model!r}, run {run!r}): each answer is stored once")
        self.where[key] = where
        self.extend(model=model, item_id=item["item_id"], choice=choice, run=run, file=file, where=where)

    def extend(self, *, model: str, item_id: str, choice: int | None, run: str, file: str, where) -> None:
        """One answer, not checked against those before it (``check_once``); ``where`` a text, or
        the answer's row in ``file``."""
        for column, value in (("model", model), ("item_id", item_id), ("choice", choice), ("run", run),
                              ("file", file)):
            self.columns[column].append(value)
        self.places.append(where)

    def place(self, k: int) -> str:
        where = self.places[k]
        return where if isinstance(where, str) else f"{self.given[self.columns['file'][k]]}, row {where}"

    def check_once(self, field: str) -> None:
        """Refuse the first answer given twice (the same model, item and run), naming both places."""
        import numpy as np

        codes = [pd.factorize(pd.Series(self.columns[c], dtype=object))[0] + 1 for c in ("model", "item_id", "run")]
        sizes = [int(c.max(initial=0)) + 1 for c in codes]
        if sizes[0] * sizes[1] * sizes[2] < 2 ** 62:
            key = (codes[0] * sizes[1] + codes[1]) * sizes[2] + codes[2]
            twice = pd.Series(key).duplicated(keep="first").to_numpy()
        else:  # more distinct values than one integer key holds
            twice = pd.DataFrame({c: self.columns[c] for c in ("model", "item_id", "run")}).duplicated().to_numpy()
        if twice.any():
            n = int(twice.argmax())
            model, item_id, run = (self.columns[c][n] for c in ("model", "item_id", "run"))
            first = int(np.flatnonzero((codes[0] == codes[0][n]) & (codes[1] == codes[1][n])
                                       & (codes[2] == codes[2][n]))[0])
            fail(self.place(n), field, f"answers item {item_id}, which {self.place(first)} answers already (model "
                                       f"{model!r}, run {run!r}): each answer is stored once")

    def claimed(self, model: str, item: dict, run: str) -> bool:
        return (model, item["item_id"], run) in self.where

    def frame(self) -> pd.DataFrame:
        """The answers as ``scoring.answers`` stores them, with the file of each; ``attrs["files"]``
        lists every file read (one whose answers are all gone still replaces what it gave)."""
        frame = pd.DataFrame({c: pd.Series(v, dtype=object) for c, v in self.columns.items()})
        frame.attrs["files"] = list(self.files)
        return frame


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
