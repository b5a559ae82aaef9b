"""What keeps a recomputing stage from running again for nothing: the two stages that recompute
from stored data, filter and analyze, are skipped when their inputs have not changed. Each output
folder keeps the fingerprint of the workspace's state (``curate.audit.plan.workspace_state``) and
the settings it was made from (``.audit-fingerprint``), with the digest of the stage's own output
file, so another command writing into the same folder makes the audit run the stage again."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

import curate

FINGERPRINT = ".audit-fingerprint"

#: The output file of each recomputing stage whose digest the fingerprint records: another
#: command writing into the same folder (``curate filter --out``, ``curate analyze --out``)
#: rewrites it, and the audit then reruns the stage instead of trusting what it finds.
OUTPUT = {"analyze": "metrics.json", "filter": "summary.json"}


def fingerprint(state: str, settings: dict) -> str:
    text = json.dumps({"state": state, "settings": settings, "toolkit": curate.__version__}, sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _stamp_with_output(out: Path, stage: str, stamp: str) -> str:
    from curate.items.sources import file_sha256
    made = out / OUTPUT[stage]
    return f"{stamp} {file_sha256(made) if made.is_file() else 'missing'}"


def up_to_date(out: Path, stage: str, stamp: str) -> bool:
    marker = out / FINGERPRINT
    return marker.is_file() and marker.read_text().strip() == _stamp_with_output(out, stage, stamp)


def mark(out: Path, stage: str, stamp: str) -> None:
    from curate.core.atomic import write_text
    write_text(out / FINGERPRINT, _stamp_with_output(out, stage, stamp) + "\n")


def recompute(stage: str, out: Path, workspace: Path, settings: dict, run: Callable[[], dict],
              kept: Callable[[], dict] = dict) -> tuple[bool, dict]:
    """(whether it ran, what it gave): ``run()`` writing into ``out``, unless what is there was made
    from the workspace's present state and the same ``settings`` (then ``kept()``, what the output
    there says). The folder is locked while it is checked, made and stamped, so the output
    checked and stamped is this run's own."""
    from curate.audit.plan import workspace_state
    from curate.core.lock import folder_lock

    stamp = fingerprint(workspace_state(workspace), {"stage": stage, **settings})
    with folder_lock(out, command=stage):
        if up_to_date(out, stage, stamp):
            return False, kept()
        made = run()
        mark(out, stage, stamp)
    return True, made
