"""`curate filter`: rules + workspace -> decisions.parquet, stages.csv, rules.yaml, summary.json.

The output folder is what a release reads: the decisions, the rules exactly as applied, and a
summary of the inputs they rest on (annotators, score runs, tokenizers, workspace source).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

import curate
from curate.core.atomic import atomic_path, check_writable, unwritable, write_text
from curate.core.exports import write_csv
from curate.core.clock import now
from curate.core.errors import CurateError, InputError
from curate.filter.conditions import evaluate
from curate.filter.decisions import decide, stage_table
from curate.filter.inputs import Inputs
from curate.filter.options import FilterOptions
from curate.filter.rules import load_rules
from curate.core.lock import folder_lock
from curate.core.reading import read_json
from curate.items.sources import file_sha256
from curate.items.stage import Stage

DECISIONS, STAGES, RULES, SUMMARY = "decisions.parquet", "stages.csv", "rules.yaml", "summary.json"


class Filter(Stage):
    """The rules' stages over the workspace's items, then the decisions written as one set. The
    summary (also ``summary.json``) holds the stage table under ``"stages"``."""
    name = "filter"
    Options = FilterOptions
    timed = False  # the summary is summary.json itself

    def run(self) -> dict:
        # The rules file and --out are refused before the workspace is opened: nothing is read twice.
        o = self.options
        self.rules = load_rules(o.rules, annotator=o.annotator, tokenizer=o.tokenizer)
        check_out_dir(o.out)
        return super().run()

    def execute(self) -> dict:
        decisions, table, summary = self.decide(self.ws, self.rules)
        self.write(self.rules, decisions, table, summary)
        return summary

    def decide(self, ws, rules: dict) -> tuple:
        """Each stage's matches on the workspace, the decisions and stage table they make, and
        the summary of the inputs they rest on."""
        inputs = Inputs(ws)
        names = [s["name"] for s in rules["stages"]]
        masks = [stage_mask(stage, inputs, self.options.rules)
                 for stage in tqdm(rules["stages"], desc="filter stages", unit="stage")]
        decisions = decide(inputs.items, names, masks)
        table = stage_table(decisions, names)
        summary = {
            "rules": {"name": rules["name"], "path": str(Path(self.options.rules).resolve()),
                      "sha256": rules["sha256"], "defaults": rules["defaults"]},
            "workspace": {"path": str(self.root.resolve()), "benchmark": ws.meta("benchmark"),
                          "split": ws.meta("split"), "source": ws.meta("source")},
            "items": len(decisions),
            "kept": int(decisions["kept"].sum()),
            "stages": [{**row, "description": stage["description"]}
                       for row, stage in zip(table.to_dict("records"), rules["stages"])],
            "inputs": inputs.provenance(),
            "toolkit_version": curate.__version__,
            "created_at": now(),
        }
        return decisions, table, summary

    def write(self, rules: dict, decisions, table, summary: dict) -> None:
        """The outputs, as one set: the summary goes first and comes back last, so a folder with a
        summary holds a complete, consistent set of outputs, whose files it records by sha256."""
        out_dir = self.options.out
        check_out_dir(out_dir)
        try:
            with folder_lock(out_dir, command="filter"):  # a second run into this folder waits for none: refused
                check_out_dir(out_dir)  # again: another run may have written here since
                (out_dir / SUMMARY).unlink(missing_ok=True)
                for name in out_dir.iterdir():  # temp files of a run killed while writing
                    if _temp_file(name.name):
                        name.unlink(missing_ok=True)
                with atomic_path(out_dir / DECISIONS) as tmp:
                    decisions.to_parquet(tmp, index=False)
                with atomic_path(out_dir / STAGES) as tmp:
                    write_csv(table, tmp)
                write_text(out_dir / RULES, rules["text"])
                summary["outputs"] = {name: file_sha256(out_dir / name) for name in (DECISIONS, STAGES)}
                write_text(out_dir / SUMMARY, json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
        except OSError as exc:
            raise unwritable(exc, out_dir) from None


def stage_mask(stage: dict, inputs: Inputs, rules_path) -> np.ndarray:
    """The stage's matches; a condition that cannot be evaluated on this workspace (an annotator
    with no records, a field no item has) is refused naming the rules file and the stage."""
    try:
        return evaluate(stage["when"], inputs)
    except InputError:
        raise  # it names its own file, row and field
    except CurateError as exc:
        raise CurateError(f"{rules_path}, stage {stage['name']!r}: {exc}") from None


def check_out_dir(out_dir: Path) -> None:
    """``--out`` must be new, empty, or this command's own earlier output (which is replaced);
    anything else, a release folder above all, is refused before any work is done."""
    if out_dir.exists() and not out_dir.is_dir():
        raise CurateError(f"{out_dir}: exists and is not a folder; --out names a folder for the decisions")
    check_writable(out_dir)
    names = sorted(p.name for p in out_dir.iterdir()) if out_dir.is_dir() else []
    if not names:
        return
    if "manifest.json" in names:
        raise CurateError(f"{out_dir}: is a release folder (it holds manifest.json), which filter never writes "
                          f"into; give --out a new folder")
    ours = {DECISIONS, STAGES, RULES, SUMMARY}
    visible = {n for n in names if not n.startswith(".")}  # hidden: temp files, the audit's fingerprint
    if visible <= ours and SUMMARY in names and _is_summary(out_dir / SUMMARY):
        return
    # A run killed while writing leaves its files without the summary (removed first, written
    # last), or only the temp file of its first write: that folder is ours to replace.
    if visible <= ours and SUMMARY not in names and (visible & {DECISIONS, STAGES} or any(map(_temp_file, names))):
        return
    others = sorted(visible - ours) or sorted(visible) or names
    raise CurateError(f"{out_dir}: exists and is not an earlier `curate filter` output (it holds "
                      f"{', '.join(others[:3])}{' ...' if len(others) > 3 else ''}); give --out a new or empty folder")


def _temp_file(name: str) -> bool:
    """Whether ``name`` is the temp file of one of this command's outputs (``atomic_path``'s)."""
    return name.endswith(".tmp") and any(name.startswith(f".{ours}.") for ours in (DECISIONS, STAGES, RULES, SUMMARY))


def _is_summary(path: Path) -> bool:
    try:
        summary = read_json(path, "a decisions summary")
    except InputError:
        return False
    return isinstance(summary, dict) and {"rules", "stages", "workspace"} <= set(summary)
