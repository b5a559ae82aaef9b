"""``--format table``: a plain table of which option each model chose, as CSV, JSON Lines (or a
JSON array) or parquet, one row per answer with the columns

- ``model``: the answering model (or give ``--model`` for a table of one model without the column);
- ``item``: a workspace item id, or the item's row (0-based, in the order ``curate init`` read them);
- ``choice``: the chosen option as its 0-based index (``2``), its letter (``C``, A being the first
  option in the item's own order) or its text (as the workspace stores it, white space aside); an
  empty cell (or JSON null) is an answer that could not be read, stored as such;
- ``run`` (optional): what keeps one model's answers to an item apart (a seed, a shuffle); without
  the column every row's run is the file's name, so importing the file again replaces its answers.

Other columns are ignored. CSV cells are read as text (``curate.core.textfiles``). Any bad row is
refused in one line naming the file, the row (0-based, the header not counted) and the field.
"""
from __future__ import annotations

from pathlib import Path

from curate.core.errors import CurateError, InputError
from scoring.answer_imports._match import Answers, Items, file_record, letter_index, option_of, short

DESCRIPTION = "a table of model, item (id or row), choice (index, letter or option text) and optional run: " \
              ".csv, .jsonl/.json or .parquet"
SOURCE = "table"
COLUMNS = ("model", "item", "choice", "run")


def read(paths, items: Items, *, model: str | None = None, filter: str | None = None):
    if filter is not None:
        raise CurateError("--filter is for --format lm-eval-generate; a table's choices are read as they are")
    answers, files = Answers(), []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            raise CurateError(f"{path}: --format table reads files (.csv, .jsonl, .json, .parquet), not folders")
        rows = read_rows(path)
        if not rows:
            raise CurateError(f"{path}: the table has no rows; nothing was imported")
        missing = [c for c in ("item", "choice") + (() if model else ("model",)) if c not in rows[0]]
        if missing:
            raise InputError(f"has no column {', '.join(map(repr, missing))} (a table of answers has columns model, "
                             f"item, choice and optionally run{'; or give --model' if 'model' in missing else ''}); "
                             f"nothing was imported", path=str(path))
        for n, row in enumerate(rows):
            _row(path, n, row, items, answers, model)
        files.append({**file_record(path), "rows": len(rows)})
    return answers.frame(), {"files": files}


def read_rows(path: Path) -> list[dict]:
    """The table's rows as dicts, cells as written (CSV: text)."""
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".csv") or name.endswith(".tsv"):
        from curate.core.textfiles import read_csv
        return read_csv(path)[0]
    if name.endswith(".jsonl") or name.endswith(".json"):
        from curate.items.sources import read_json
        return read_json(path)
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq
        try:
            return pq.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow's errors name no file
            raise InputError(f"unreadable parquet file ({exc})", path=str(path)) from None
    raise InputError("not a table this format reads (.csv, .tsv, .jsonl, .json or .parquet)", path=str(path))


def _row(path: Path, n: int, row: dict, items: Items, answers: Answers, model: str | None) -> None:
    def bad(field: str, message: str):
        raise InputError(f"{message}; nothing was imported", path=str(path), row=n, field=field)

    label = model or row.get("model")
    if not isinstance(label, str) or not label.strip():
        bad("model", f"{short(label)} is not a model name")
    item = _item(row.get("item"), items)
    if item is None:
        bad("item", f"{short(row.get('item'))} is no item id of the workspace, nor a row of it "
                    f"(0-{len(items.items) - 1})")
    run = row.get("run", path.name)
    if run is None or not str(run).strip():
        bad("run", f"{short(run)} is empty (leave the column out for one run per file)")
    try:
        choice = choice_of(item, row.get("choice"))
    except ValueError as exc:
        bad("choice", str(exc))
    answers.add(model=label.strip(), item=item, choice=choice, run=str(run).strip(), where=f"{path}, row {n}",
                field="item")


def _item(value, items: Items) -> dict | None:
    """An item by its id, or by its row (an integer, or text of digits that is no item id)."""
    if isinstance(value, str) and value.strip() in items.by_id:
        return items.by_id[value.strip()]
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return items.by_row.get(int(value))
    if isinstance(value, str) and value.strip().isdigit():
        return items.by_row.get(int(value.strip()))
    return None


def choice_of(item: dict, value) -> int | None:
    """The original option ``value`` names: an index, then a letter, then an option's text;
    None for an empty cell. A ValueError says why nothing fits."""
    n = len(item["options"])
    if value is None or (isinstance(value, float) and value != value) or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{short(value)} is no option of item {item['item_id']} (an index, a letter or a text)")
    if isinstance(value, (int, float)) or value.strip().isdigit():
        index = float(value)
        if not index.is_integer() or not 0 <= index < n:
            raise ValueError(f"{short(value)} is not an option index of item {item['item_id']} (0-{n - 1})")
        return int(index)
    letter = letter_index(value)
    if letter is not None:  # "C", "(C)", "C."
        if letter >= n:
            raise ValueError(f"letter {value.strip()!r} is past item {item['item_id']}'s {n} options "
                             f"(A-{chr(ord('A') + n - 1)})")
        return letter
    hits = option_of(item, value)
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise ValueError(f"{short(value)} is the text of options {', '.join(map(str, hits))} of item "
                         f"{item['item_id']} alike; give the index")
    raise ValueError(f"{short(value)} is no option of item {item['item_id']} (an index 0-{n - 1}, a letter "
                     f"A-{chr(ord('A') + n - 1)} or an option's text: {short(item['options'], 100)})")
