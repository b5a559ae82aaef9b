"""Building a release folder from a workspace and a decisions folder (`curate filter --out`).

The folder holds the kept items in the source's own format (one parquet file per split, the
rows exactly as ingested), a dataset card, and ``manifest.json``. Before anything is written the
decisions are checked against the workspace and against themselves, so a release cannot pair
decisions with other data or carry a hand-edited stage table.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

import curate
import schemas
from curate.atomic import write_text
from curate.errors import CurateError, InputError
from curate.filter.decisions import stage_table
from curate.filter.engine import DECISIONS, RULES, SUMMARY
from curate.items import sha256_text
from curate.release.card import dataset_card, license_for
from curate.release.manifest import MANIFEST, hash_files
from curate.store import Workspace, now


def read_decisions(decisions_dir: Path) -> tuple[pd.DataFrame, dict, str]:
    """(decisions, summary, rules text), checked to belong together."""
    decisions_dir = Path(decisions_dir)
    summary_path = decisions_dir / SUMMARY
    if not summary_path.is_file():
        raise InputError(f"no {SUMMARY}: not a decisions folder (make one with `curate filter ... --out`)",
                         path=str(decisions_dir))
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    decisions = pd.read_parquet(decisions_dir / DECISIONS)
    decisions["matched"] = decisions["matched"].map(list)
    rules_text = (decisions_dir / RULES).read_text(encoding="utf-8")
    if sha256_text(rules_text) != summary["rules"]["sha256"]:
        raise InputError(f"{RULES} differs from the rules the decisions were made with", path=str(decisions_dir))
    names = [s["stage"] for s in summary["stages"]]
    table = stage_table(decisions, names).to_dict("records")
    recorded = [{k: s[k] for k in ("stage", "matched", "removed_here", "left")} for s in summary["stages"]]
    if table != recorded:
        raise InputError(f"the stage counts in {SUMMARY} do not follow from {DECISIONS}", path=str(decisions_dir))
    return decisions, summary, rules_text


def build_release(root, decisions_dir, name: str, version: str, folder: Path, *, license: str | None = None) -> dict:
    """Write the release into the empty folder ``folder``; returns the manifest."""
    decisions, summary, rules_text = read_decisions(Path(decisions_dir))
    with Workspace.open(root) as ws:
        benchmark, split, source = ws.meta("benchmark"), ws.meta("split"), ws.meta("source")
        items, raw_rows = ws.items(), ws.raw_rows()
        runs = _score_runs(ws)
    if summary["workspace"]["source"] != source:
        raise CurateError(f"the decisions in {decisions_dir} were made on another source than workspace {root}")
    if decisions["item_id"].tolist() != [it["item_id"] for it in items]:
        raise CurateError(f"the decisions in {decisions_dir} do not cover exactly the items of workspace {root}")
    chosen_license = license_for(benchmark, license)
    if not chosen_license:
        raise CurateError(f"the license of benchmark {benchmark!r} is not known here; pass --license")

    kept = decisions["kept"].to_numpy()
    data_path = f"data/{split}-00000-of-00001.parquet"
    (folder / "data").mkdir(parents=True)
    pd.DataFrame.from_records([raw for raw, k in zip(raw_rows, kept) if k]).to_parquet(folder / data_path, index=False)

    removed = decisions[~decisions["kept"]]
    manifest = {
        "manifest_version": 1,
        "name": name,
        "version": version,
        "created_at": now(),
        "toolkit": {"name": "benchcurate", "version": curate.__version__},
        "source": {"benchmark": benchmark, "split": split, "license": chosen_license, "provenance": source},
        "rules": {"name": summary["rules"]["name"], "sha256": summary["rules"]["sha256"], "content": rules_text,
                  "defaults": summary["rules"].get("defaults", {})},
        "stages": summary["stages"],
        "counts": {"items": len(decisions), "kept": int(kept.sum()), "removed": int((~kept).sum()),
                   "kept_by_source": {str(k): int(v) for k, v in
                                      decisions[decisions["kept"]]["source"].value_counts().sort_index().items()}},
        "annotators": summary["inputs"]["annotators"],
        "scoring_runs": [{**r, **runs.get(r["run_id"], {})} for r in summary["inputs"]["score_runs"]],
        "tokenizers": summary["inputs"]["tokenizers"],
        "generation_runs": summary["inputs"].get("generation_runs", []),
        "kept": decisions.loc[decisions["kept"], "item_id"].tolist(),
        "removed": dict(zip(removed["item_id"], removed["matched"])),
        "files": {},
    }
    write_text(folder / "README.md", dataset_card(manifest, {split: data_path}))
    manifest["files"] = hash_files(folder)
    problems = schemas.errors("manifest", manifest)
    if problems:  # a bug, not bad input: never publish a manifest that fails its own schema
        raise CurateError(f"internal error: the manifest does not fit its schema: {problems[0]}")
    write_text(folder / MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    for path in folder.rglob("*"):  # atomic writes make private temp files; releases are for reading
        if path.is_file():
            path.chmod(0o644)
    return manifest


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
