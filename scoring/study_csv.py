"""Import of the reference study's released per-option scores (``--format study-csv``).

Layout: ``DIR/{full,zero,placeholder}_prompt/<model>.csv``, each with a header
``nll_0,...,nll_{k-1}`` and one row per item in the benchmark's row order. Values are the
study's whole-sequence mean log-likelihood (higher = more likely, despite the name) and go to
``seq_mean``; files named ``sum_<model>.csv`` and ``byte_mean_<model>.csv`` hold the study's
sum and per-byte variants of that model and go to ``study_sum`` / ``study_byte_mean``.
Model names come from file names, ``org--name`` read as ``org/name``.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from curate.errors import InputError
from curate.items import sha256_text
from scoring.store import add_run, check_label, open_scores, write_scores

MODE_FOLDERS = {"full_prompt": "full", "zero_prompt": "zero", "placeholder_prompt": "placeholder"}
VARIANT_PREFIXES = (("byte_mean_", "study_byte_mean"), ("sum_", "study_sum"))
_COLUMN = re.compile(r"^nll_(\d+)$")


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
    """(mode, file) for every study CSV under ``root``; an error if there are none."""
    found = [(MODE_FOLDERS[d.name], f) for d in sorted(root.iterdir())
             if d.is_dir() and d.name in MODE_FOLDERS for f in sorted(d.glob("*.csv"))]
    if not found:
        raise InputError(f"no study CSVs found (expected folders {', '.join(MODE_FOLDERS)})", path=str(root))
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
    one ``nll_j`` column per option, finite numbers only."""
    try:
        frame = pd.read_csv(path)
    except Exception as exc:
        raise InputError(f"unreadable CSV: {exc}", path=str(path)) from None
    cols = [c for c in frame.columns if _COLUMN.match(str(c))]
    if not cols or len(cols) != len(frame.columns):
        raise InputError(f"expected columns nll_0..nll_k, got {list(frame.columns)}", path=str(path))
    if len(frame) != len(items):
        raise InputError(f"has {len(frame)} rows but the workspace has {len(items)} items "
                         f"(rows must be the items, in row order)", path=str(path))
    n_options = {len(it["options"]) for it in items}
    if n_options != {len(cols)}:
        raise InputError(f"has {len(cols)} option columns but items have {sorted(n_options)} options",
                         path=str(path))
    values = frame.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        row, col = next(zip(*bad.nonzero()))
        raise InputError(f"not a finite number: {frame.iat[row, col]!r}", path=str(path), row=int(row),
                         field=str(cols[col]))
    return values


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
        summary = []
        # Every row names one of the workspace's items and the run added just before it.
        with ws.transaction(foreign_keys=False):
            for (model, mode), columns in sorted(merged.items()):
                rid, digest = run_id(model, mode, {c: p for c, (p, _) in columns.items()})
                check_label(ws, model, ("imported:study-csv",), replace=replace)
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
    finally:
        ws.close()


def _file_hash(path: Path) -> str:
    from curate.sources import file_sha256
    return file_sha256(path)
