"""``--format study-csv``: the reference study's released per-option scores (scoring/study_csv.py
reads and stores them; this module is its entry in the format registry)."""
from __future__ import annotations

from pathlib import Path

from curate.core.errors import CurateError
from scoring import study_csv

DESCRIPTION = "the reference study's released scores, DIR/{full,zero,placeholder}_prompt/<model>.csv"


def _one_dir(paths) -> Path:
    if len(paths) != 1:
        raise CurateError(f"--format study-csv reads one folder, got {len(paths)} paths")
    return Path(paths[0])


def import_scores(workspace, paths, *, label=None, replace=False, progress=True) -> list[dict]:
    if label is not None:
        raise CurateError("--format study-csv names each model by its file name; --label is not taken")
    summary = study_csv.import_study_csv(workspace, _one_dir(paths), replace=replace)
    return [{**s, "detail": s["column"]} for s in summary]


def imported(workspace, paths) -> bool:
    return study_csv.imported(workspace, _one_dir(paths))


def supplies(paths, default_formulation: str) -> dict:
    # the study's scores are cloze; each file's column is the normalization it gives
    return {(model, mode, "cloze"): tuple(columns)
            for (model, mode), columns in study_csv.group_files(_one_dir(paths)).items()}


def misfits(paths, items: int, exact: bool) -> list[str]:
    """Files whose rows cannot be a workspace's items, read without importing: a file holds one
    row per item, in row order, so it needs exactly ``items`` rows (``exact``), or at most that
    many when ``items`` is only a bound (a limit on a source not read yet)."""
    import pandas as pd

    root = _one_dir(paths)
    out = []
    for _, path in study_csv.find_files(root):
        try:
            rows = len(pd.read_csv(path, usecols=[0]))  # read as the import reads it (blank lines skipped)
        except Exception:  # unreadable: the import names the file, row and field
            continue
        if rows > items or (exact and rows != items):
            out.append(f"{path.relative_to(root)} has {rows} rows, one per item in row order")
    return out
