"""Import of the reference study's released per-option scores (``--format study-csv``).

Layout: ``DIR/{full,zero,placeholder}_prompt/<model>.csv``, each with a header
``nll_0,...,nll_{k-1}`` and one row per item in the benchmark's row order. Values are the
study's whole-sequence mean log-likelihood (higher = more likely, despite the name) and go to
``seq_mean``; files named ``sum_<model>.csv`` and ``byte_mean_<model>.csv`` hold the study's
sum and per-byte variants of that model and go to ``study_sum`` / ``study_byte_mean``.
Model names come from file names, ``org--name`` read as ``org/name``.
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

from curate.core.errors import CurateError, InputError
from curate.items.canonical import sha256_text
from scoring.store import add_run, check_label, delete_scores, label_lock, open_scores, write_scores

MODE_FOLDERS = {"full_prompt": "full", "zero_prompt": "zero", "placeholder_prompt": "placeholder"}
VARIANT_PREFIXES = (("byte_mean_", "study_byte_mean"), ("sum_", "study_sum"))


def model_name(stem: str) -> str:
    return stem.replace("--", "/")


def classify(path: Path) -> tuple[str, str]:
    """(model, column) for one study file."""
    stem = path.stem
    for prefix, column in VARIANT_PREFIXES:
        if stem.startswith(prefix):
            return model_name(stem[len(prefix):]), column
    return model_name(stem), "seq_mean"


def find_files(root: Path) -> list[tuple[str, Path]]:
    """(mode, file) for every study CSV under ``root``; an error if there are none, or if a CSV
    lies anywhere else under ``root`` (a misnamed folder or a .CSV would otherwise be skipped
    without a word)."""
    found = [(MODE_FOLDERS[d.name], f) for d in sorted(root.iterdir())
             if d.is_dir() and d.name in MODE_FOLDERS for f in sorted(d.glob("*.csv"))]
    if not found:
        raise InputError(f"no study CSVs found (expected folders {', '.join(MODE_FOLDERS)})", path=str(root))
    taken = {f for _, f in found}
    stray = sorted(f for f in root.rglob("*") if f.suffix.lower() == ".csv" and f not in taken)
    if stray:
        raise InputError(f"{stray[0].relative_to(root)} is not a study file (expected "
                         f"{{{','.join(MODE_FOLDERS)}}}/<model>.csv); move or remove it"
                         + (f", and {len(stray) - 1} more" if len(stray) > 1 else ""), path=str(root))
    return found


def group_files(directory: Path) -> dict[tuple[str, str], dict[str, Path]]:
    """(model, mode) -> {score column: file} for every study CSV under ``directory``, read from
    the file names alone (what an audit plan needs to know before anything is imported)."""
    grouped: dict[tuple[str, str], dict[str, Path]] = {}
    for mode, path in find_files(Path(directory)):
        model, column = classify(path)
        grouped.setdefault((model, mode), {})[column] = path
    return grouped


def run_id(model: str, mode: str, columns: dict[str, Path]) -> tuple[str, str]:
    """(run id, sha256 of the files): one run per (model, mode) and exact file contents, so the
    same files imported again have the same run id."""
    digest = sha256_text("".join(sorted(f"{p.name}:{_file_hash(p)}" for p in columns.values())))
    return f"study-csv:{model}:{mode}:{digest[7:19]}", digest


def imported(root_ws, directory: str | Path) -> bool:
    """Whether every file under ``directory`` is already in the workspace, unchanged: each
    (model, mode) holds a score row for every option of every item from that files' run."""
    grouped = group_files(Path(directory))
    ws = open_scores(root_ws)
    try:
        options = sum(len(it["options"]) for it in ws.items())
        for (model, mode), columns in grouped.items():
            rid = run_id(model, mode, columns)[0]
            n = ws.conn.execute("SELECT count(*) FROM scores WHERE model = ? AND mode = ? AND run_id = ?",
                                (model, mode, rid)).fetchone()[0]
            if n != options:
                return False
        return True
    finally:
        ws.close()


def read_matrix(path: Path, items: list[dict]) -> np.ndarray:
    """The file's values as a frame, checked against the workspace's items: one row per item,
    one ``nll_j`` column per option, each a possible log-likelihood: finite and <= 0.

    Every study file holds log-likelihoods despite the ``nll_`` name (the mean, the sum or the
    per-byte mean over tokens; higher = more likely; the released files range from -519 to
    -0.35). A token's log-probability from a log-softmax is <= 0 exactly, even in floating
    point (the largest logit's term is exp(0) = 1, so the log of the sum is >= 0), and a sum or
    mean of such terms stays <= 0; 0 itself is a probability of 1, possible. So a value above 0
    is no log-likelihood: a file of negative log-likelihoods (signs flipped), or a corrupt
    number such as 1e300, which would otherwise win every argmax. There is no lower bound short
    of -inf: an option may be arbitrarily unlikely."""
    try:
        frame = pd.read_csv(path)
    except Exception as exc:
        raise InputError(f"unreadable CSV: {exc}", path=str(path)) from None
    # Values are read by position, so the header must be exactly nll_0, nll_1, ... in order.
    cols = [str(c) for c in frame.columns]
    expected = [f"nll_{j}" for j in range(len(cols))]
    if not cols or cols != expected:
        wrong = next((c for c, e in zip(cols, expected) if c != e), None)
        raise InputError(f"expected the header {','.join(expected) or 'nll_0,...'} (one column per option, in "
                         f"order), got {','.join(cols) or 'none'}", path=str(path), field=wrong)
    if len(frame) != len(items):
        raise InputError(f"has {len(frame)} rows but the workspace has {len(items)} items "
                         f"(rows must be the items, in row order)", path=str(path))
    n_options = {len(it["options"]) for it in items}
    if n_options != {len(cols)}:
        raise InputError(f"has {len(cols)} option columns but items have {sorted(n_options)} options",
                         path=str(path))
    values = frame.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    _refuse_first(~np.isfinite(values), frame, path, "not a finite number: {}")
    _refuse_first(values > 0, frame, path, "{} is above 0, which no log-likelihood is (a probability above 1); "
                  "these files hold log-likelihoods (higher = more likely, <= 0), not negative log-likelihoods")
    return values


def _refuse_first(bad: np.ndarray, frame: pd.DataFrame, path: Path, message: str) -> None:
    """One line naming the file, row and column of the first ``bad`` value, if any (text quoted,
    a number as written: 1e+300, not np.float64(1e+300))."""
    if bad.any():
        row, col = next(zip(*bad.nonzero()))
        value = frame.iat[row, col]
        raise InputError(message.format(repr(value) if isinstance(value, str) else value), path=str(path), row=int(row),
                         field=str(frame.columns[col]))


def import_study_csv(root_ws, directory: str | Path, *, progress=None, replace: bool = False) -> list[dict]:
    """Import every study file under ``directory`` into the workspace, in one transaction.

    Files must line up with the workspace's items (same count, row order); they cannot be
    checked item by item beyond that, so the workspace must hold the full split in order.
    A model that holds scores from elsewhere (computed here, or another import format) is
    refused unless ``replace``. Returns one summary dict per (model, mode, column) imported.
    """
    directory = Path(directory)
    find_files(directory)  # no study files: fail before the workspace is opened
    ws = open_scores(root_ws)
    try:
        items = ws.items()
        if [it["row_index"] for it in items] != list(range(len(items))):
            raise InputError("study CSVs are in row order; the workspace must hold rows 0..N-1 "
                             "(it was ingested with gaps)", path=str(ws.root))
        grouped = group_files(directory)
        merged = {key: {column: (path, read_matrix(path, items)) for column, path in columns.items()}
                  for key, columns in grouped.items()}
        # A label scored or imported by another process meanwhile would end up mixing both: hold
        # each label's lock (the one `curate score` takes) for the import.
        with contextlib.ExitStack() as held:
            for model in sorted({model for model, _ in merged}):
                held.enter_context(label_lock(ws.root, model, command="score or import-scores"))
            return _write(ws, merged, items, directory, progress=progress, replace=replace)
    finally:
        ws.close()


def _write(ws, merged: dict, items: list[dict], directory: Path, *, progress, replace: bool) -> list[dict]:
    """Store every (model, mode)'s files as one run each, in one transaction; one summary dict
    per (model, mode, column)."""
    summary = []
    # Every row names one of the workspace's items and the run added just before it.
    with ws.transaction(foreign_keys=False):
        for (model, mode), columns in sorted(merged.items()):
            rid, digest = run_id(model, mode, {c: p for c, (p, _) in columns.items()})
            check_label(ws, model, ("imported:study-csv",), replace=replace)
            _check_files(ws, model, mode, rid, replace=replace)
            add_run(ws, run_id=rid, model=model, origin="imported:study-csv",
                    info={"directory": str(directory.resolve()), "mode": mode,
                          "files": {c: p.name for c, (p, _) in columns.items()}, "sha256": digest})
            rows = []
            for i, item in enumerate(items):
                for j in range(len(item["options"])):
                    row = {"model": model, "mode": mode, "item_id": item["item_id"], "option_index": j,
                           "content_hash": item["content_hash"], "run_id": rid}
                    for column, (_, values) in columns.items():
                        row[column] = float(values[i, j])
                    rows.append(row)
            write_scores(ws, rows)
            for column, (path, _) in columns.items():
                summary.append({"model": model, "mode": mode, "column": column, "file": str(path),
                                "items": len(items)})
            if progress:
                progress(model, mode)
    return summary


def _check_files(ws, model: str, mode: str, run: str, *, replace: bool) -> None:
    """Refuse to import (model, mode) over its scores from other study files: a row holds every
    column of one import, so importing ``sum_`` alone would empty the stored ``seq_mean``, and a
    changed file would replace numbers without a word. With ``replace``, delete them first."""
    held = ws.conn.execute("SELECT DISTINCT s.run_id, r.info_json FROM scores s JOIN score_runs r USING (run_id) "
                           "WHERE s.model = ? AND s.mode = ? AND s.run_id != ?", (model, mode, run)).fetchall()
    if not held:
        return
    if not replace:
        files = json.loads(held[0][1]).get("files", {})
        raise CurateError(
            f"model {model!r}, mode {mode}: already holds scores imported from other files "
            f"({', '.join(sorted(files.values())) or 'run ' + held[0][0]}; run {held[0][0]}). Import all of its files "
            f"for this mode together (<model>.csv, sum_<model>.csv, byte_mean_<model>.csv), or --replace to "
            f"replace the stored ones")
    delete_scores(ws, "model = ? AND mode = ?", (model, mode))


def _file_hash(path: Path) -> str:
    from curate.items.sources import file_sha256
    return file_sha256(path)
