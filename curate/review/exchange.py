"""A review queue to and from external labelling tools: Argilla 2.x, or plain JSON lines.

**argilla** -- ``curate export WS review --format argilla --out DIR`` writes DIR/settings.json
(what ``rg.Settings.from_json`` reads) and DIR/records.json (what ``dataset.records.from_json``
reads: a list of ``{"id", "fields", "metadata", "suggestions", "responses", "vectors"}``):

- fields: ``context`` (the full-mode context), ``options`` (one line per option, ``A. text``,
  the gold one marked ``(marked correct)``), ``scores`` (each model's full-mode pick);
- questions: ``labels`` (multi-label: the eight round-1 labels), ``best``, ``worst`` (label:
  ``A``..), ``equally_good`` (multi-label: ``A``..), ``all_implausible`` (label: ``yes``/``no``),
  ``note`` (text); none required, so a reviewer may answer one round only;
- metadata: ``item_id``, ``row_index``, ``source``, ``gold`` (letter), ``content_hash``, ``queue``.

Load it with ``rg.Dataset(name=..., settings=rg.Settings.from_json("DIR/settings.json")).create()``
then ``dataset.records.from_json("DIR/records.json")``; after review, ``dataset.records.to_json(
"reviewed.json")`` writes the same record shape with ``responses``: ``{question: [{"value",
"user_id"}]}``. ``curate import-review WS --format argilla --file reviewed.json`` reads them back:
per (record, user) a round-1 verdict when ``labels`` was answered, a round-2 verdict when
``best`` and ``worst`` were (``equally_good`` defaults to none, ``all_implausible`` to no), with
the ``note``. A user becomes reviewer ``human:USER_ID`` unless ``--user USER_ID=NAME`` names them.

**jsonl** -- one JSON object per item: ``item_id``, ``row_index``, ``source``, ``content_hash``,
``queue``, ``context``, ``options`` (list), ``gold`` (letter), and the verdict fields to fill in,
all null: ``reviewer``, ``labels`` (list of label names), ``best``, ``worst`` (letters),
``equally_good`` (list of letters), ``all_implausible`` (true/false), ``note``. The import reads
the same shape (``--reviewer`` fills a missing ``reviewer``); a line with no answers is skipped.

Both imports refuse an item whose content changed since the export (``content_hash``), name the
file, row and field of every problem, and write all verdicts or none (one transaction).
"""
from __future__ import annotations

import json
from pathlib import Path

from annotate.prompts import letters
from annotate.store import LABELS, open_annotations, write_human_annotation
from curate.core.atomic import check_writable, unwritable, write_text
from curate.core.errors import CurateError, InputError
from curate.core.reading import DOCUMENT_LIMIT, loads, read_json, read_text
from curate.review import queues
from curate.review.data import ReviewData
from curate.review.verdicts import LABEL_TEXT, VerdictError, annotator_name, verdict_record

FORMATS = ("argilla", "jsonl")
ANSWERS = ("labels", "best", "equally_good", "all_implausible", "worst")


def queue_rows(data: ReviewData, spec: str) -> list[dict]:
    """The queue's items with what a reviewer needs to judge them."""
    from annotate.store import read_annotations

    with open_annotations(data.root) as ws:
        records = read_annotations(ws) if spec.startswith("disagree") else None
    picks = full_mode_picks(data)
    rows = []
    for item_id in queues.resolve(data, spec, records):
        item = data.by_id[item_id]
        opts = letters(len(item["options"]))
        rows.append({"item_id": item_id, "row_index": item["row_index"], "source": item["source"],
                     "content_hash": item["content_hash"], "queue": spec, "context": item["prompts"]["full"],
                     "options": list(item["options"]), "gold": opts[item["gold"]],
                     "picks": {m: opts[p] for m, p in picks.get(item_id, {}).items()}})
    return rows


def full_mode_picks(data: ReviewData) -> dict[str, dict[str, int]]:
    """item_id -> model -> full-mode pick under the report's normalizations (empty without scores)."""
    if data.scores.empty:
        return {}
    full = data.scores[data.scores["mode"] == "full"]
    if full.empty:
        return {}
    out: dict[str, dict[str, int]] = {}
    for r in data.predictions(full).itertuples():
        out.setdefault(r.item_id, {})[r.model] = int(r.pred)
    return out


# --- export ----------------------------------------------------------------------------------

def export_review(data: ReviewData, spec: str, fmt: str, out: Path) -> int:
    """Write queue ``spec`` to ``out`` (a folder for argilla, a .jsonl file for jsonl)."""
    rows = queue_rows(data, spec)
    if fmt == "jsonl":
        check_writable(out, file=True)
        blank = {"reviewer": None, **{k: None for k in ANSWERS}, "note": None}
        write_text(out, "".join(json.dumps({k: v for k, v in r.items() if k != "picks"} | blank, ensure_ascii=False)
                                + "\n" for r in rows))
    elif fmt == "argilla":
        width = max((len(r["options"]) for r in rows), default=2)
        if out.exists() and not out.is_dir():
            raise CurateError(f"{out}: exists and is not a folder; --format argilla writes a folder "
                              "(settings.json, records.json)")
        check_writable(out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise unwritable(exc, out) from None
        write_text(out / "settings.json", json.dumps(argilla_settings(width), indent=1) + "\n")
        write_text(out / "records.json", json.dumps([argilla_record(r) for r in rows], ensure_ascii=False, indent=1) + "\n")
    else:
        raise CurateError(f"unknown review export format {fmt!r}; use {' or '.join(FORMATS)}")
    return len(rows)


def _labels(name: str, title: str, values: list[tuple[str, str]], *, multi: bool, required: bool = False) -> dict:
    settings = {"type": "multi_label_selection" if multi else "label_selection",
                "options": [{"value": v, "text": t, "description": None} for v, t in values],
                "visible_options": len(values) if len(values) >= 3 else None}
    if multi:
        settings["options_order"] = "natural"
    return {"name": name, "title": title, "description": None, "required": required, "settings": settings}


def argilla_settings(n_options: int) -> dict:
    opts = [(o, o) for o in letters(n_options)]
    text = {"type": "text", "use_markdown": False}
    return {
        "guidelines": "Round 1: the quality labels that apply (high quality = no issue). Round 2: the most and "
                      "least plausible options, other options as good as the one marked correct, whether all "
                      "are implausible. Answer either round or both; add a note if useful.",
        "fields": [{"name": n, "title": t, "required": n != "scores", "settings": text}
                   for n, t in (("context", "Context"), ("options", "Options"), ("scores", "Model picks (full mode)"))],
        "questions": [
            _labels("labels", "Round 1: quality labels", [(k, LABEL_TEXT[k]) for k in LABELS], multi=True),
            _labels("best", "Round 2: most plausible option", opts, multi=False),
            _labels("equally_good", "Round 2: other options as good as the one marked correct", opts, multi=True),
            _labels("all_implausible", "Round 2: all options implausible?", [("yes", "yes"), ("no", "no")], multi=False),
            _labels("worst", "Round 2: least plausible option", opts, multi=False),
            {"name": "note", "title": "Note", "description": None, "required": False,
             "settings": {"type": "text", "use_markdown": False}},
        ],
        "vectors": [],
        "metadata": [{"name": k, "title": k, "visible_for_annotators": True, "settings": {"type": "terms", "values": None}}
                     for k in ("item_id", "source", "gold", "queue")],
        "allow_extra_metadata": True,
    }


def argilla_record(row: dict) -> dict:
    opts = letters(len(row["options"]))
    lines = [f"{o}. {text}{' (marked correct)' if o == row['gold'] else ''}" for o, text in zip(opts, row["options"])]
    picks = "\n".join(f"{m}: {p}" for m, p in row["picks"].items()) or "(no scores)"
    return {"id": row["item_id"], "fields": {"context": row["context"], "options": "\n".join(lines), "scores": picks},
            "metadata": {k: row[k] for k in ("item_id", "row_index", "source", "gold", "content_hash", "queue")},
            "suggestions": {}, "responses": {}, "vectors": {}}


# --- import ----------------------------------------------------------------------------------

def import_review(root, path: Path, fmt: str, *, reviewer: str | None = None, users: dict | None = None) -> dict:
    """Store the verdicts in ``path`` as human:NAME records (all or none); returns counts."""
    data = ReviewData.load(root)
    if fmt == "jsonl":
        verdicts = jsonl_verdicts(data, path, reviewer)
    elif fmt == "argilla":
        verdicts = argilla_verdicts(data, path, users or {})
    else:
        raise CurateError(f"unknown review import format {fmt!r}; use {' or '.join(FORMATS)}")
    origin = f"import:{fmt}:{path.name}"
    records, seen = [], {}
    for where, item, rnd, name, result, note in verdicts:
        key = (annotator_name(name), rnd, item["item_id"])
        if key in seen:  # two answers of one reviewer to one round of one item: neither may silently win
            raise InputError(f"a second round-{rnd} verdict of {name} on {item['item_id']} (also row {seen[key]})",
                             path=str(path), row=where[0], field=where[1])
        seen[key] = where[0]
        try:
            records.append(verdict_record(item, rnd, name, result, note=note, origin=origin))
        except VerdictError as exc:  # named by the answer at fault, in the file's own field names
            prefix = where[1].rpartition(".")[0]  # "responses" in an Argilla file, "" in JSON lines
            field = where[1] if exc.field is None else (f"{prefix}.{exc.field}" if prefix else exc.field)
            raise InputError(str(exc), path=str(path), row=where[0], field=field) from None
        except CurateError as exc:
            raise InputError(str(exc), path=str(path), row=where[0], field=where[1]) from None
    with open_annotations(root) as ws:
        with ws.transaction():
            for r in records:
                write_human_annotation(ws, r)
    counts: dict = {}
    for r in records:
        counts[(r["annotator"], r["round"])] = counts.get((r["annotator"], r["round"]), 0) + 1
    return {"records": len(records), "by_reviewer": {f"{a} round {n}": c for (a, n), c in sorted(counts.items())}}


# --- the shape of what is read: every value's JSON type, checked before any value is used --------

def _kind(value) -> str:
    """A JSON value's type in words ("a number", "an array", "null")."""
    from curate.items.sources import json_kind
    kind = json_kind(value)
    return kind if kind == "null" else ("an " if kind[0] in "ao" else "a ") + kind


def _is_text(value) -> bool:
    return isinstance(value, str)


def _is_texts(value) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


#: field -> (check, what it must be); a missing field or null always passes.
ANSWER_SHAPE = {
    "labels": (_is_texts, "a list of label names"), "best": (_is_text, "an option letter"),
    "worst": (_is_text, "an option letter"), "equally_good": (_is_texts, "a list of option letters"),
    "all_implausible": (lambda v: isinstance(v, (bool, str)), "true/false or yes/no"), "note": (_is_text, "text"),
}
JSONL_SHAPE = {"item_id": (_is_text, "an item id"), "content_hash": (_is_text, "a content hash"),
               "reviewer": (_is_text, "a reviewer name"), **ANSWER_SHAPE}
ARGILLA_SHAPE = {"id": (_is_text, "a record id"), "metadata": (lambda v: isinstance(v, dict), "an object"),
                 "responses": (lambda v: isinstance(v, dict), "an object (question -> responses)")}
METADATA_SHAPE = {"item_id": (_is_text, "an item id"), "content_hash": (_is_text, "a content hash")}


def _check_shape(value, shape: dict, path: Path, row: int, *, what: str = "an object", prefix: str = "") -> None:
    """Refuse ``value`` unless it is a JSON object whose fields in ``shape`` are null or of their
    type, naming the file, row and field."""
    if not isinstance(value, dict):
        raise InputError(f"is {_kind(value)}, expected {what}", path=str(path), row=row,
                         field=prefix.rstrip(".") or None)
    for field, (ok, expected) in shape.items():
        got = value.get(field)
        if got is not None and not ok(got):
            raise InputError(f"is {_kind(got)}, expected {expected}", path=str(path), row=row,
                             field=prefix + field)


def _check_argilla_record(rec, path: Path, row: int) -> None:
    """An Argilla record as ``dataset.records.to_json`` writes it, down to each response's value."""
    _check_shape(rec, ARGILLA_SHAPE, path, row, what="a record (an object)")
    _check_shape(rec.get("metadata") or {}, METADATA_SHAPE, path, row, prefix="metadata.")
    for question, answers in (rec.get("responses") or {}).items():
        field = f"responses.{question}"
        if not isinstance(answers, list):
            raise InputError(f"is {_kind(answers)}, expected a list of responses", path=str(path), row=row,
                             field=field)
        for a in answers:
            if not isinstance(a, dict):
                raise InputError(f'holds {_kind(a)}, expected responses {{"value", "user_id"}}',
                                 path=str(path), row=row, field=field)
            _check_shape({question: a.get("value")}, ANSWER_SHAPE, path, row, prefix="responses.")


def _item(data: ReviewData, item_id, content_hash, path: Path, row: int) -> dict:
    item = data.by_id.get(item_id)
    if item is None:
        raise InputError(f"{item_id!r} is not an item of this workspace", path=str(path), row=row, field="item_id")
    if content_hash is not None and content_hash != item["content_hash"]:
        raise InputError(f"{item_id} changed since it was exported (content hash differs)", path=str(path), row=row,
                         field="content_hash")
    return item


def _letter(value, n: int, path: Path, row: int, field: str) -> int:
    opts = letters(n)
    if value not in opts:
        raise InputError(f"{value!r} is not an option letter {opts[0]}..{opts[-1]}", path=str(path), row=row, field=field)
    return opts.index(value)


def _answers(item: dict, got: dict, path: Path, row: int) -> list[tuple[int, dict, str]]:
    """(round, result, field) from one reviewer's answers (letters, label names, yes/no)."""
    n, out = len(item["options"]), []
    if got.get("labels"):
        out.append((1, {"labels": list(got["labels"])}, "labels"))
    if got.get("best") is not None and got.get("worst") is not None:
        implausible = got.get("all_implausible")
        if isinstance(implausible, str):
            implausible = {"yes": True, "no": False}.get(implausible.strip().lower(), implausible)
        if implausible not in (None, True, False):
            raise InputError(f"{implausible!r} is not yes/no", path=str(path), row=row, field="all_implausible")
        out.append((2, {"best": _letter(got["best"], n, path, row, "best"),
                        "equally_good": sorted(_letter(x, n, path, row, "equally_good") for x in got.get("equally_good") or []),
                        "all_implausible": bool(implausible), "worst": _letter(got["worst"], n, path, row, "worst")},
                    "best"))
    elif (got.get("best") is None) != (got.get("worst") is None):
        raise InputError("round 2 needs both best and worst", path=str(path), row=row,
                         field="best" if got.get("best") is None else "worst")
    return out


def jsonl_verdicts(data: ReviewData, path: Path, reviewer: str | None):
    lines = read_text(path, DOCUMENT_LIMIT, "a verdicts file").splitlines()
    for row, line in enumerate(lines):
        if not line.strip():
            continue
        obj = loads(line, str(path), row=row, line=row + 1)
        _check_shape(obj, JSONL_SHAPE, path, row)
        item = _item(data, obj.get("item_id"), obj.get("content_hash"), path, row)
        answers = _answers(item, obj, path, row)
        if not answers:
            continue
        name = obj.get("reviewer") or reviewer
        if not name:
            raise InputError("no reviewer (give one per line or --reviewer)", path=str(path), row=row, field="reviewer")
        try:
            annotator_name(name)
        except CurateError as exc:
            raise InputError(str(exc), path=str(path), row=row, field="reviewer") from None
        for rnd, result, field in answers:
            yield (row, field), item, rnd, name, result, obj.get("note") or ""


def argilla_verdicts(data: ReviewData, path: Path, users: dict):
    records = read_json(path, "a file of Argilla records")
    if not isinstance(records, list):
        raise InputError("expected a JSON list of records (dataset.records.to_json)", path=str(path))
    for row, rec in enumerate(records):
        _check_argilla_record(rec, path, row)
        meta = rec.get("metadata") or {}
        item = _item(data, rec.get("id") or meta.get("item_id"), meta.get("content_hash"), path, row)
        by_user: dict[str, dict] = {}
        for question, answers in (rec.get("responses") or {}).items():
            for k, a in enumerate(answers):
                user = a.get("user_id")
                if user is None or str(user).strip() == "":
                    raise InputError("a response without a user_id (whose verdict is it?)", path=str(path), row=row,
                                     field=f"responses.{question}[{k}].user_id")
                if question in by_user.get(str(user), {}):
                    raise InputError(f"user {user} answered {question} twice", path=str(path), row=row,
                                     field=f"responses.{question}[{k}]")
                by_user.setdefault(str(user), {})[question] = a.get("value")
        for user, got in sorted(by_user.items()):
            name = users.get(user, user)
            try:
                annotator_name(name)
            except CurateError as exc:
                raise InputError(f"{exc}; name the user with --user {user}=NAME", path=str(path), row=row,
                                 field="responses") from None
            for rnd, result, field in _answers(item, got, path, row):
                yield (row, f"responses.{field}"), item, rnd, name, result, str(got.get("note") or "")
