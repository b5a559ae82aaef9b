"""``--format table``: a plain table of which option each model chose, as CSV, JSON Lines (or a
JSON array) or parquet (gzipped, bz2, xz or zst too), one row per answer with the columns

- ``model``: the answering model (or give ``--model`` for a table of one model without the column);
- ``item``: the item, by the workspace's item id, the benchmark's own id (an id column the ingest
  kept: the generic adapter's ``ids``) or its row (0-based, in the order ``curate init`` read
  them) (``curate.items.references``);
- ``choice``: the chosen option as its 0-based index (``2``), its letter (``C``, A being the first
  option in the item's own order) or its text (as the workspace stores it, white space aside); an
  empty cell (or JSON null) is an answer that could not be read, stored as such;
- ``run`` (optional): what keeps one model's answers to an item apart (a seed, a shuffle); without
  the column every row's run is the file's name.

How the item and choice columns are read (``curate.items.references``: ``items_of``,
``options_of``): ``--item-as`` (id, own, row) and ``--choice-as`` (index, letter, text), default
``auto``: each cell as what it reads as, and a cell that reads two ways naming different items or
options as most cells of its column in the file read (a column of option texts reads MMLU's option
``'2'`` of ``['8', '2', '24', '120']`` as that text, not as index 2); where no way reads more cells
than every other, such a cell is refused, naming the file, row and field, with the flags that
decide.

Other columns are ignored. CSV cells are read as text (``curate.core.textfiles``: ``--encoding``,
``--delimiter``). A file that is no regular file, larger than ``MAX_BYTES`` or, with the files
before it, holding more than ``MAX_ROWS`` answers is refused (``_cells``). Any bad row is refused
in one line naming the file, the row (0-based, the header not counted) and the field.
"""
from __future__ import annotations

from pathlib import Path

from curate.core.errors import CurateError, InputError
from curate.core.names import model_name
from curate.items.references import KINDS, OPTION_KINDS, CellError, items_of, options_of
from scoring.answer_imports._cells import columns
from scoring.answer_imports._match import Answers, Items, file_record, short

DESCRIPTION = "a table of model, item (id, the benchmark's own id or row), choice (index, letter or option text) " \
              "and optional run: .csv, .jsonl/.json or .parquet"
SOURCE = "table"
COLUMNS = ("model", "item", "choice", "run")
#: The import settings this format reads besides ``model``.
SETTINGS = ("item_as", "choice_as", "encoding", "delimiter")
#: Bounds of one import: bytes per file (after decompression), answers of all its files together.
MAX_BYTES = 256 * 1024 * 1024
MAX_ROWS = 2_000_000


def inputs(paths) -> list[Path]:
    """The files ``read`` reads: the paths as given."""
    return [Path(p) for p in paths]


def read(paths, items: Items, *, model: str | None = None, item_as: str | None = None, choice_as: str | None = None,
         encoding: str | None = None, delimiter: str | None = None):
    answers, files, total = Answers(), [], 0
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            raise CurateError(f"{path}: --format table reads files (.csv, .jsonl, .json, .parquet), not folders")
        cells, rows, used = columns(path, COLUMNS, max_bytes=MAX_BYTES, max_rows=MAX_ROWS - total, encoding=encoding,
                                    delimiter=delimiter)
        if not rows:
            raise CurateError(f"{path}: the table has no rows; nothing was imported")
        missing = [c for c in ("item", "choice") + (() if model else ("model",)) if c not in cells]
        if missing:
            raise InputError(f"has no column {', '.join(map(repr, missing))} (a table of answers has columns model, "
                             f"item, choice and optionally run{'; or give --model' if 'model' in missing else ''}); "
                             f"nothing was imported", path=str(path))
        total += rows
        _read_file(path, cells, rows, items, answers, model, (item_as or "auto", choice_as or "auto"))
        files.append({**file_record(path), "rows": rows, **used})
    answers.check_once("item")
    return answers.frame(), {"files": files}


def _read_file(path: Path, cells: dict, rows: int, items: Items, answers: Answers, model: str | None,
               how: tuple[str, str]) -> None:
    """Every row of one file: its item and choice columns read whole (``curate.items.references``),
    then each row's model and run; the first bad cell refused, naming its row and field."""
    try:
        found = items_of(cells["item"], items.refs, how[0])
    except CellError as exc:
        _refused(path, exc, "item", "--item-as", KINDS)
    try:
        chosen = options_of(found, cells["choice"], how[1], items.options)
    except CellError as exc:
        _refused(path, exc, "choice", "--choice-as", OPTION_KINDS)
    file, run_of_file = answers.read_file(path), path.name
    names: dict = {}
    for n in range(rows):
        def bad(field: str, message: str):
            raise InputError(f"{message}; nothing was imported", path=str(path), row=n, field=field)

        label = model or _name(cells["model"][n], names, bad)
        run = cells["run"][n] if "run" in cells else run_of_file
        if run is None or not str(run).strip():
            bad("run", f"{short(run)} is empty (leave the column out for one run per file)")
        answers.extend(model=label, item_id=found[n]["item_id"], choice=chosen[n], run=str(run).strip(), file=file,
                       where=n)


def _refused(path: Path, exc: CellError, field: str, flag: str, kinds: tuple[str, ...]):
    """A cell no way reads, or two ways read differently: one line naming the file, row and field
    (and the flag that says how the column is read)."""
    advice = "" if not exc.readings else "; say how the column is read: " + " or ".join(
        f"{flag} {k}" for k in kinds if k in exc.readings)
    raise InputError(f"{exc}{advice}; nothing was imported", path=str(path), row=exc.index, field=field) from None


def _name(value, names: dict, bad) -> str:
    """A model cell as its name (each distinct cell checked once)."""
    if not isinstance(value, str):
        bad("model", f"{short(value)} is not a model name (a text)")
    if value not in names:
        try:
            names[value] = model_name(value)
        except ValueError as exc:
            bad("model", f"{short(value)} is not a model name: it {exc}")
    return names[value]
