"""Reading annotations in the reference study's published layout, so holders of those files can
rebuild GoldenSwag from them (and compare their own annotators against them).

Expected columns (a .parquet, .csv or .jsonl file; other columns are ignored):

- both rounds: ``original_index`` -- the item's row position in HellaSwag validation (0..10041).
- round 1: ``quality_label`` -- the labels as one string, e.g.
  ``"[ungrammatical, prompt; nonsense, correct answer]"``: brackets, then labels separated by
  "; ". Label names: "ungrammatical, prompt", "ungrammatical, correct answer",
  "ungrammatical, incorrect answer(s)", the same three with "nonsense", "multiple plausible"
  (also "plausibility"), "high quality". This toolkit's own label names are accepted too.
- round 2: ``best_option`` and ``worst_option`` (a letter, A = option 0), ``equally_good_options``
  ("None" or letters such as "B, D"), ``all_implausible`` ("Yes" / "No").

The study's round-2 file has no rows for the items its annotator refused; ``missing="refused"``
records those items as refused.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from annotate.store import LABELS, open_annotations, write_annotation
from curate.core.errors import InputError
from curate.items.canonical import canonical_json, sha256_text
from curate.items.sources import file_sha256

ROUND_COLUMNS = {1: ["quality_label"], 2: ["best_option", "equally_good_options", "all_implausible", "worst_option"]}

LABEL_NAMES = {
    "ungrammatical, prompt": "ungrammatical_prompt",
    "ungrammatical, correct answer": "ungrammatical_correct",
    "ungrammatical, incorrect answer(s)": "ungrammatical_incorrect",
    "ungrammatical, incorrect answers": "ungrammatical_incorrect",
    "ungrammatical, incorrect answer": "ungrammatical_incorrect",
    "nonsense, prompt": "nonsense_prompt",
    "nonsense, correct answer": "nonsense_correct",
    "nonsense, incorrect answer(s)": "nonsense_incorrect",
    "nonsense, incorrect answers": "nonsense_incorrect",
    "nonsense, incorrect answer": "nonsense_incorrect",
    "multiple plausible": "multiple_plausible",
    "plausibility": "multiple_plausible",
    "plausibility, multiple": "multiple_plausible",
    "high quality": "high_quality",
    **{label: label for label in LABELS},
}


def read_table(path: Path) -> pd.DataFrame:
    """The file's rows. CSV and JSON Lines go through ingest's readers, which refuse what pandas
    would read silently wrong: a header naming a column twice, a row with a field too many or
    too few, a JSON object writing a key twice."""
    from curate.items.sources import read_json
    from curate.core.textfiles import read_csv

    ext = path.suffix.lower()
    try:
        if ext == ".parquet":
            return pd.read_parquet(path)
        if ext == ".csv":
            rows, _ = read_csv(path, delimiter=",")
            return pd.DataFrame(rows, columns=list(rows[0]) if rows else None)
        if ext == ".jsonl":
            return pd.DataFrame(read_json(path))
    except (ValueError, OSError) as exc:
        raise InputError(f"cannot read: {exc}", path=str(path)) from None
    raise InputError(f"unsupported file type {ext or '(none)'}; use .parquet, .csv or .jsonl", path=str(path))


def parse_labels(text, *, path, row) -> list[str]:
    parts = [p.strip() for p in str(text).strip().strip("[]").split(";") if p.strip()]
    if not parts:
        raise InputError("no labels", path=path, row=row, field="quality_label")
    labels = []
    for part in parts:
        key = re.sub(r"\s+", " ", part.lower())
        if key not in LABEL_NAMES:
            raise InputError(f"unknown label {part!r}; expected one of {sorted(LABEL_NAMES)}",
                             path=path, row=row, field="quality_label")
        if LABEL_NAMES[key] not in labels:
            labels.append(LABEL_NAMES[key])
    if "high_quality" in labels and len(labels) > 1:
        raise InputError(f"'high quality' together with other labels: {text!r}", path=path, row=row,
                         field="quality_label")
    return labels


def parse_letter(text, n: int, *, path, row, field) -> int:
    letter = str(text).strip().upper()
    if len(letter) != 1 or not "A" <= letter < chr(ord("A") + n):
        raise InputError(f"{text!r} is not an option letter A..{chr(ord('A') + n - 1)}", path=path, row=row, field=field)
    return ord(letter) - ord("A")


def parse_round2(row: dict, item: dict, *, path, index) -> dict:
    """One round-2 answer. An option named both best and worst is refused: the study's protocol
    asks for two different options, so such a row is a damaged file, not an answer (an LLM
    reply that does it is kept and counted as ``best_is_worst``; a file is fixed at its source)."""
    n = len(item["options"])
    equal = str(row["equally_good_options"]).strip()
    letters = [] if equal.lower() in ("none", "", "[]") else [x for x in re.split(r"[\s,;\[\]'\"]+", equal) if x]
    flag = str(row["all_implausible"]).strip().lower()
    if flag not in ("yes", "no", "true", "false"):
        raise InputError(f"{row['all_implausible']!r} is not Yes or No", path=path, row=index, field="all_implausible")
    result = {"best": parse_letter(row["best_option"], n, path=path, row=index, field="best_option"),
              "equally_good": sorted({parse_letter(x, n, path=path, row=index, field="equally_good_options")
                                      for x in letters}),
              "all_implausible": flag in ("yes", "true"),
              "worst": parse_letter(row["worst_option"], n, path=path, row=index, field="worst_option")}
    if result["best"] == result["worst"]:
        raise InputError(f"item {item['item_id']}: worst_option {row['worst_option']!r} is also its best_option; "
                         "an option cannot be both the best and the worst", path=path, row=index, field="worst_option")
    return result


def study_records(items: list[dict], path, round: int, annotator: str, *, missing: str = "skip") -> list[dict]:
    """Annotation records (schema-shaped) for the rows of ``path``; every problem is an InputError
    naming the file, the row (0-based data row) and the column."""
    path = Path(path)
    if round not in ROUND_COLUMNS:
        raise InputError(f"round must be 1 or 2, not {round}", path=str(path))
    table = read_table(path)
    need = ["original_index", *ROUND_COLUMNS[round]]
    absent = [c for c in need if c not in table.columns]
    if absent:
        raise InputError(f"missing column(s) {absent}; found {list(table.columns)}", path=str(path))
    by_row = {it["row_index"]: it for it in items}
    source = file_sha256(path)
    records, seen = [], set()
    for index, row in enumerate(table[need].to_dict("records")):
        try:
            position = int(str(row["original_index"]).strip())
        except ValueError:
            raise InputError(f"{row['original_index']!r} is not a row number", path=str(path), row=index,
                             field="original_index") from None
        item = by_row.get(position)
        if item is None:
            raise InputError(f"no item at row {position} in this workspace", path=str(path), row=index,
                             field="original_index")
        if position in seen:
            raise InputError(f"row {position} appears twice", path=str(path), row=index, field="original_index")
        seen.add(position)
        if round == 1:
            result = {"labels": parse_labels(row["quality_label"], path=str(path), row=index)}
        else:
            result = parse_round2(row, item, path=str(path), index=index)
        raw = json.dumps({k: str(v) for k, v in row.items()}, ensure_ascii=False)
        records.append(record(item, round, annotator, "valid", result, raw, source))
    if missing == "refused":
        records += [record(it, round, annotator, "refused", None, None, source)
                    for it in items if it["row_index"] not in seen]
    return records


def record(item: dict, round: int, annotator: str, status: str, result, raw, source: str) -> dict:
    key = sha256_text(canonical_json({"content_hash": item["content_hash"], "round": round,
                                      "annotator": annotator, "file": source}))
    return {"annotator": annotator, "round": round, "item_id": item["item_id"], "status": status,
            "result": result, "raw": raw, "prompt_version": None, "model_snapshot": None,
            "request_key": key, "content_hash": item["content_hash"]}


def import_study(root, path, round: int, *, annotator: str = "imported:study", missing: str = "skip") -> dict:
    """Import a study-layout file into the workspace in one transaction (all rows or none)."""
    ws = open_annotations(root)
    try:
        records = study_records(ws.items(), path, round, annotator, missing=missing)
        with ws.transaction():
            for r in records:
                write_annotation(ws, r)
        counts = pd.Series([r["status"] for r in records]).value_counts().to_dict()
        return {"annotator": annotator, "round": round, "records": len(records), **counts}
    finally:
        ws.close()
