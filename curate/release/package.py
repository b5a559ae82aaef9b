"""Building a release folder from a workspace and a decisions folder (`curate filter --out`).

The folder holds the kept items in the source's own format (one parquet file per split, the
rows exactly as ingested), a dataset card, and ``manifest.json``. Before anything is written the
decisions are checked against the workspace and against themselves, so a release cannot pair
decisions with other data or carry a hand-edited stage table.
"""
from __future__ import annotations

import io
import json
import re
from pathlib import Path, PurePosixPath, PureWindowsPath

import pandas as pd

import curate
import schemas
from curate.core.atomic import write_text
from curate.core.clock import now
from curate.core.errors import CurateError, InputError
from curate.filter.decisions import stage_table
from curate.filter.run import DECISIONS, RULES, STAGES, SUMMARY
from curate.filter.inputs import changed_inputs
from curate.items.canonical import sha256_text
from curate.core.reading import DOCUMENT_LIMIT, decode_utf8, loads, read_bounded
from curate.release.card import dataset_card, license_for
from curate.release.croissant import CROISSANT, croissant, croissant_json
from curate.release.lm_eval_task import write_task
from curate.release.manifest import MANIFEST, MANIFEST_VERSION, content_digest, hash_files
from curate.items.sources import bytes_sha256, public_provenance
from curate.items.store import Workspace


def read_decisions(decisions_dir: Path) -> tuple[pd.DataFrame, dict, str]:
    """(decisions, summary, rules text), checked to be what `curate filter` wrote and to belong
    together; a hand-edited or damaged file is named in one line. Each file is read once and
    checked as read, and the summary again at the end: a filter rewriting the folder meanwhile
    is said to be one, not taken for a hand edit."""
    decisions_dir = Path(decisions_dir)
    summary_path = decisions_dir / SUMMARY
    summary_bytes = _read(summary_path)
    if summary_bytes is None:
        raise InputError(f"no {SUMMARY}: not a decisions folder (make one with `curate filter ... --out`)",
                         path=str(decisions_dir))
    try:
        summary = loads(decode_utf8(summary_bytes, str(summary_path)), str(summary_path))
        names = [s["stage"] for s in summary["stages"]]
        recorded = [{k: s[k] for k in ("stage", "matched", "removed_here", "left")} for s in summary["stages"]]
        rules_sha, source = summary["rules"]["sha256"], summary["workspace"]["source"]
        summary["inputs"]["score_runs"], summary["inputs"]["annotators"], summary["inputs"]["tokenizers"]
        # The digests are what make hand edits visible: without them there is nothing to check.
        outputs = {name: summary["outputs"][name] for name in (DECISIONS, STAGES)}
        if not all(isinstance(d, str) for d in outputs.values()):
            raise TypeError("outputs must give the sha256 of each file")
    except InputError as exc:  # not UTF-8, not JSON, or nested deeper than can be read
        raise InputError(f"not a summary written by `curate filter` ({exc.detail}); run the filter again",
                         path=str(summary_path)) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"not a summary written by `curate filter` ({type(exc).__name__}: {exc}); run the "
                         f"filter again", path=str(summary_path)) from None
    blobs = {name: _read(decisions_dir / name) for name in (DECISIONS, STAGES, RULES)}
    if _read(summary_path) != summary_bytes:
        raise InputError("is being rewritten (a `curate filter` run into it?); release it once that has finished",
                         path=str(decisions_dir))
    for name, digest in outputs.items():
        if blobs[name] is None or bytes_sha256(blobs[name]) != digest:
            raise InputError(f"changed after `curate filter` wrote it (its sha256 is not the one in {SUMMARY}); "
                             f"run the filter again instead of editing decisions", path=str(decisions_dir / name))
    try:
        if blobs[RULES] is None:
            raise FileNotFoundError(f"no {RULES}")
        decisions = pd.read_parquet(io.BytesIO(blobs[DECISIONS]))
        rules_text = blobs[RULES].decode("utf-8")
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot be read: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                         path=str(decisions_dir)) from None
    _check_decision_rows(decisions, names, decisions_dir / DECISIONS)
    decisions["matched"] = decisions["matched"].map(list)
    if sha256_text(rules_text) != rules_sha:
        raise InputError(f"{RULES} differs from the rules the decisions were made with", path=str(decisions_dir))
    table = stage_table(decisions, names).to_dict("records")
    if table != recorded:
        raise InputError(f"the stage counts in {SUMMARY} do not follow from {DECISIONS}", path=str(decisions_dir))
    return decisions, summary, rules_text


def _read(path: Path) -> bytes | None:
    """The file's bytes, at most ``DOCUMENT_LIMIT``; None when there is no such file."""
    try:
        return read_bounded(path, DOCUMENT_LIMIT, "a file of a decisions folder", missing=None)
    except FileNotFoundError:
        return None


def _check_decision_rows(decisions: pd.DataFrame, stages: list[str], path: Path) -> None:
    """Each row as `curate filter` writes it: kept exactly when no stage matched, first_stage the
    first stage matched, only stages of the table."""
    missing = [c for c in ("item_id", "row_index", "source", "kept", "first_stage", "matched") if c not in decisions]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", path=str(path))
    if decisions["kept"].dtype != bool:
        raise InputError(f"column 'kept' is {decisions['kept'].dtype}, not boolean", path=str(path), field="kept")
    for row, (kept, first, matched) in enumerate(zip(decisions["kept"], decisions["first_stage"], decisions["matched"])):
        matched = list(matched) if matched is not None else None
        if matched is None or any(m not in stages for m in matched) or \
                kept != (not matched) or (first if first == first else None) != (matched[0] if matched else None):
            raise InputError(f"kept={kept}, first_stage={first!r}, matched={matched} do not agree with each other "
                             f"and the stages {stages}", path=str(path), row=row)


def build_release(ws: Workspace, folder: Path, options) -> dict:
    """Write the release of ``options`` (``ReleaseOptions``) of the open workspace ``ws`` into the
    empty folder ``folder``; returns the manifest. ``options.changelog`` says what changed since
    the previous version (in the manifest and on the card)."""
    inputs = _checked_inputs(ws, options)
    kept = inputs["decisions"]["kept"].to_numpy()
    data_path = f"data/{inputs['split']}-00000-of-00001.parquet"
    (folder / "data").mkdir(parents=True)
    write_rows([raw for raw, k in zip(inputs["raw_rows"], kept) if k], folder / data_path, columns_from=inputs["raw_rows"])
    task = write_task(folder, name=options.name, version=options.version, adapter=inputs["adapter"],
                      split=inputs["split"], data_path=data_path, items=[it for it, k in zip(inputs["items"], kept) if k],
                      formulation=inputs["formulation"])
    manifest = _manifest(inputs, options, task)
    write_text(folder / "README.md", dataset_card(manifest, {inputs["split"]: data_path}))
    write_text(folder / CROISSANT, croissant_json(croissant(manifest, folder, data_path)))
    manifest["files"] = hash_files(folder)
    manifest["content_sha256"] = content_digest(manifest)
    problems = schemas.errors("manifest", manifest)
    if problems:  # a bug, not bad input: never publish a manifest that fails its own schema
        raise CurateError(f"internal error: the manifest does not fit its schema: {problems[0]}")
    write_text(folder / MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    for path in folder.rglob("*"):  # atomic writes make private temp files; releases are for reading
        if path.is_file():
            path.chmod(0o644)
    return manifest


def _checked_inputs(ws: Workspace, options) -> dict:
    """The decisions and what the workspace holds, checked to belong together and to be
    unchanged since the filter read them; the license the release goes out under."""
    root = ws.root
    decisions_dir = Path(options.decisions)
    decisions, summary, rules_text = read_decisions(decisions_dir)
    found = {"benchmark": ws.meta("benchmark"), "split": ws.meta("split"), "source": ws.meta("source"),
             "adapter": ws.meta("adapter") or {}, "formulation": ws.meta("formulation", "cloze"),
             "items": ws.items(), "raw_rows": ws.raw_rows(), "runs": _score_runs(ws)}
    changed = changed_inputs(ws, summary["inputs"])
    if changed:
        raise CurateError(f"the decisions in {decisions_dir} were made from {changed}, which changed since; run "
                          f"`curate filter` again")
    if summary["workspace"]["source"] != found["source"]:
        raise CurateError(f"the decisions in {decisions_dir} were made on another source than workspace {root}")
    if decisions["item_id"].tolist() != [it["item_id"] for it in found["items"]]:
        raise CurateError(f"the decisions in {decisions_dir} do not cover exactly the items of workspace {root}")
    found["license"] = license_for(found["benchmark"], options.license)
    if not found["license"]:
        raise CurateError(f"the license of benchmark {found['benchmark']!r} is not known here; pass --license")
    return {**found, "decisions": decisions, "summary": summary, "rules_text": rules_text}


def _manifest(inputs: dict, options, lm_eval_task: dict) -> dict:
    """manifest.json's content, but for the files' digests (added once every file is written)."""
    decisions, summary, runs = inputs["decisions"], inputs["summary"], inputs["runs"]
    kept, changelog = decisions["kept"].to_numpy(), options.changelog
    removed = decisions[~decisions["kept"]]
    return {
        "manifest_version": MANIFEST_VERSION,
        "name": options.name,
        "version": options.version,
        "created_at": now(),
        "toolkit": {"name": "benchcurate", "version": curate.__version__},
        "source": {"benchmark": inputs["benchmark"], "split": inputs["split"], "license": inputs["license"],
                   "provenance": public_provenance(inputs["source"])},
        "rules": {"name": summary["rules"]["name"], "sha256": summary["rules"]["sha256"],
                  "content": inputs["rules_text"], "defaults": _without_local_paths(summary["rules"].get("defaults", {}))},
        "stages": summary["stages"],
        "counts": {"items": len(decisions), "kept": int(kept.sum()), "removed": int((~kept).sum()),
                   "kept_by_source": {str(k): int(v) for k, v in
                                      decisions[decisions["kept"]]["source"].value_counts().sort_index().items()}},
        "annotators": _without_local_paths(summary["inputs"]["annotators"]),
        "scoring_runs": [_without_local_paths({**r, **runs.get(r["run_id"], {})})
                         for r in summary["inputs"]["score_runs"]],
        "tokenizers": [_without_local_paths(t) for t in summary["inputs"]["tokenizers"]],
        "generation_runs": [_without_local_paths(g) for g in summary["inputs"].get("generation_runs", [])],
        **({"changelog": changelog.strip()} if changelog and changelog.strip() else {}),
        "formats": {"lm_eval_task": lm_eval_task, "croissant": CROISSANT},
        "kept": decisions.loc[decisions["kept"], "item_id"].tolist(),
        "removed": dict(zip(removed["item_id"], removed["matched"])),
        "files": {},
    }


def public_name(value: str) -> str:
    """``value`` with a path of this machine cut to its last part: ``/home/me/tok`` -> ``tok``,
    ``local:/home/me/model`` -> ``local:model``. A folder's name still says which tokenizer or
    model it was (its files are hashed beside it) without telling the world where it was kept."""
    prefix, sep, rest = value.partition(":")
    if sep and _is_local_path(rest) and not _is_local_path(value):  # "local:/abs/model", "local:~/model"
        return f"{prefix}:{public_name(rest)}"
    if _is_local_path(value):
        return re.split(r"[\\/]", value.rstrip("/\\"))[-1] or value
    return value


def _is_local_path(value: str) -> bool:
    return PurePosixPath(value).is_absolute() or PureWindowsPath(value).is_absolute() or value.startswith("~")


def _without_local_paths(value):
    """``value`` (a record from the decisions' summary: defaults, tokenizers, annotators, runs)
    with every string that is a path of this machine cut by ``public_name``, at any depth. Every
    string, not a list of keys: a tokenizer or model named by its folder appears as a ``name``,
    a ``model``, a default's value, ``path`` and more."""
    if isinstance(value, dict):
        return {k: _without_local_paths(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_local_paths(v) for v in value]
    return public_name(value) if isinstance(value, str) else value


def _score_runs(ws: Workspace) -> dict[str, dict]:
    """run_id -> the run's record (model hash, origin, parameters), when scores exist."""
    if "score_runs" not in ws.tables():
        return {}
    from scoring.store import read_runs
    runs = read_runs(ws)
    out = {}
    for rec in runs.to_dict("records"):
        info = json.loads(rec.pop("info_json"))
        fields = {k: (None if v != v else v) for k, v in rec.items() if k != "model"}  # NaN -> None
        out[rec["run_id"]] = {**fields, "info": info}
    return out


def write_rows(rows: list[dict], path, *, columns_from: list[dict]) -> None:
    """The kept source rows as parquet. Parquet holds one type per column, so a source column
    mixing types across rows (ids "001" and 1 in a JSON file) is refused in one line naming it,
    rather than converted to something the source did not hold. With no row kept, the file
    still has the source's columns (typed from ``columns_from``, all its rows), and no rows."""
    import pyarrow as pa
    frame = pd.DataFrame.from_records(rows) if rows else pd.DataFrame.from_records(columns_from).iloc[:0]
    rows = rows or columns_from  # what the mixed-type check below reads
    try:
        frame.to_parquet(path, index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        for column in dict.fromkeys(key for row in rows for key in row):
            kinds = sorted({type(row[column]).__name__ for row in rows if row.get(column) is not None})
            if len(kinds) > 1:
                raise CurateError(f"the kept rows cannot be written as parquet: source column {column!r} holds "
                                  f"values of several types ({', '.join(kinds)}) and parquet holds one per "
                                  f"column") from None
        raise CurateError(f"the kept rows cannot be written as parquet: {str(exc).splitlines()[0]}") from None
