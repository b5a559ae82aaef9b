"""`curate analyze`: run every analysis on a workspace and write the report.

``Analyze`` (``Analyze(root, AnalyzeOptions(out=..., ...)).run()``) reads the items, the scores
(``scoring.store.read_scores``) and any annotations (``annotate.store.read_annotations``),
generations and stored answers (``scoring.answers``) once, runs the report's sections in their
order (``curate.analyses.sections``, one module each, computing with the pure analyses of this
package) and writes into ``out_dir``:

- ``metrics.json``   every number, keyed as in ``ABOUT`` and the sections' (also stored in the
                     file under "about")
- ``core_items.csv`` every item scored in the core mode with how many models got it right, and
                     which: the item ids behind the zero-prompt core at any k
- ``report.md``, ``report.html`` (self-contained, plots embedded), and the PNG plots.

It returns the metrics dict. Every table in metrics.json names the items it covers (``subset``:
"all" = every item the model was scored on in that mode, "source=<s>" = those of one source),
the scores (``model``, ``mode``, ``formulation``) and the ``normalization`` the predictions come
from. Formulations are analysed like modes; the rotated letters formulations (``letters+rK``)
only in the accuracy table and the position audit.
"""
from __future__ import annotations

import hashlib
import json
import math
import shutil
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

import curate
from annotate.store import MIGRATIONS as ANNOTATION_TABLES, read_annotations
from curate.items import formulations as forms
from curate.analyses import accuracy, length, outdir, render, sections
from curate.analyses.options import AnalyzeOptions
from curate.core.atomic import write_text
from curate.core.errors import CurateError
from curate.items.canonical import MODES
from curate.items.stage import Stage
from curate.items.store import Workspace
from curate.core.lock import folder_lock
from curate.validity.item_table import stored_answers
from curate.validity.responses import answer_mode
from generate.store import prepare as prepare_generations, read_generations
from generate.store import read_runs as read_generation_runs
from scoring import normalize
from scoring.models import tokenizer
from scoring.store import MIGRATIONS as SCORE_TABLES, read_runs, read_scores, require_one_source, score_sources

SCHEMA_VERSION = 1

#: What metrics.json's top-level keys hold; each section adds its own (``sections.about``).
ABOUT = {
    "provenance": "workspace, item count and a digest of the items' content hashes, the score runs read, "
                  "and the annotation records read per annotator x round x run x status",
    "settings": "options of this run: primary normalization, modes, models, alpha, bootstrap seed and "
                "resamples, length units, core mode and threshold",
}
PLOTS_ABOUT = {"plots": "file names of the PNG figures in the output folder"}


class Analyze(Stage):
    """The report: read the workspace once, run the sections in their order, write the report.
    ``normalization`` (default: the first of ``scoring.normalize.PREFERENCE`` all (model, mode)
    pairs have) drives agreement, core, length, annotation and comparison results; accuracy is
    given under every normalization available."""
    name = "analyze"
    Options = AnalyzeOptions
    timed = False  # the summary is metrics.json itself

    def locked(self):
        # One run at a time writes a report folder: two would mix their plots and reports.
        return folder_lock(self.options.out, command="analyze")

    def run(self) -> dict:
        o = self.options
        for unit in o.length_units:  # refuse a bad unit or tokenizer before any work is done
            kind, name = length.parse_unit(unit)
            if kind == "tokens":
                tokenizer(name)
        outdir.check_report_dir(o.out)
        return super().run()

    def migrate(self, ws: Workspace) -> None:
        ws.migrate(SCORE_TABLES)
        ws.migrate(ANNOTATION_TABLES)
        prepare_generations(ws)  # and the answers' tables

    def execute(self) -> dict:
        o = self.options
        # Decisions that are not this workspace's are refused before any work is done.
        self.decisions = _checked_decisions(self.ws, o.decisions) if o.decisions is not None else None
        # Steps: reading, each section, writing the report.
        with tqdm(total=2 + len(sections.registry()), desc="analyze", unit="step") as bar:
            built = outdir.staging(self.options.out)
            try:
                with _stage(bar, "reading scores and annotations"):
                    read = self.read()
                ctx, metrics = self.context(read, built)
                for section in sections.registry():
                    with _stage(bar, sections.name(section)):
                        if sections.runs_for(ctx, section):
                            metrics.update(section.compute(ctx))
                metrics["plots"] = ctx.plots
                metrics = _write_report(bar, built, metrics)
                outdir.publish(built, self.options.out)
            finally:
                shutil.rmtree(built, ignore_errors=True)
        return metrics

    def read(self) -> dict:
        """Everything the sections read of the workspace, read once, the asked models and modes
        checked against it (a typo is an error, not a smaller report)."""
        root, o, ws = self.root, self.options, self.ws
        models, modes = list(o.models) if o.models else None, list(o.modes) if o.modes else None
        read = {"items": ws.items(), "scores": read_scores(ws, models=models, modes=modes), "runs": read_runs(ws),
                "meta": {"benchmark": ws.meta("benchmark"), "split": ws.meta("split"),
                         "source": ws.meta("source", {}), "formulation": ws.meta("formulation", "cloze")},
                "answers": stored_answers(ws),
                "round1": read_annotations(ws, round=1), "round2": read_annotations(ws, round=2),
                "gens": read_generations(ws, models=models, modes=modes), "gen_runs": read_generation_runs(ws)}
        scores, gens = read["scores"], read["gens"]
        if scores.empty and gens.empty and read["answers"] is None and not (models or modes):
            raise CurateError(f"{root}: no scores or generations, and no stored answers; score, import (curate "
                              "import-scores, curate import-answers) or generate (curate generate) some first")
        _check_asked(root, "--model", models, set(scores["model"].unique()) | set(gens["model"].unique()),
                     set(read["runs"]["model"]) | set(read["gen_runs"]["model"]))
        _check_asked(root, "--mode", modes, set(scores["mode"].unique()) | set(gens["mode"].unique()),
                     lambda: _stored_modes(ws))
        if o.core_mode != "none" and o.core_mode not in MODES and o.core_mode not in set(scores["mode"].unique()):
            raise CurateError(f"--core-mode {o.core_mode!r} is not a prompt mode (one of {', '.join(MODES)}, or none)")
        return read

    def context(self, read: dict, out: Path) -> tuple[sections.Context, dict]:
        """What every section reads (``sections.Context``), and metrics.json's opening keys."""
        o, items, scores = self.options, read["items"], read["scores"]
        ctx = sections.Context(root=self.root, ws=self.ws, out=out, items=items,
                               gold=pd.Series({it["item_id"]: it["gold"] for it in items}),
                               round1=read["round1"], round2=read["round2"], gens=read["gens"],
                               gen_runs=read["gen_runs"], answers=read["answers"], alpha=o.alpha,
                               n_resamples=o.n_resamples, seed=o.seed,
                               length_units=tuple(o.length_units), core_mode=o.core_mode,
                               core_threshold=o.core_threshold, decisions=self.decisions)
        out.mkdir(parents=True, exist_ok=True)
        if scores.empty:  # answers only: generated or imported (models without log-probabilities, such as Claude)
            sources = pd.DataFrame(columns=SOURCE_COLUMNS)
        else:
            sources = require_one_source(score_sources(scores, read["runs"]))  # one source per label; names the runs read
            ctx.fewshot_scores, scores = scores, one_shot_count(scores)
            _with_scores(ctx, scores, o.normalization, read["meta"]["formulation"])
        records = pd.concat([read["round1"], read["round2"]])
        return ctx, {
            "about": {**ABOUT, **sections.about(), **PLOTS_ABOUT}, "schema_version": SCHEMA_VERSION,
            "toolkit_version": curate.__version__,
            "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "provenance": _provenance(self.root, items, read["meta"], sources, records), "settings": _settings(ctx),
        }


def _checked_decisions(ws: Workspace, folder):
    """The `curate filter --out` folder, read once (the filter section reports what is read here);
    decisions made on other items than ``ws``'s are refused (InputError naming the folder)."""
    from curate.review.data import Decisions

    found = Decisions.read(folder)
    found.check_made_on(ws.meta("source"), [it["item_id"] for it in ws.items()])
    return found


def one_shot_count(scores: pd.DataFrame) -> pd.DataFrame:
    """The rows of one shot count (0 where present, else the fewest shots): every section but
    the few-shot one reads these, so 0-shot and k-shot predictions never mix in one table; the
    few-shot section compares the shot counts (``ctx.fewshot_scores``)."""
    if "fewshot" not in scores.columns or scores.empty:
        return scores
    return scores[scores["fewshot"] == scores["fewshot"].min()].reset_index(drop=True)


def _with_scores(ctx: sections.Context, scores: pd.DataFrame, normalization: str | None, formulation: str) -> None:
    """Fill in what the sections read of the scores: the primary normalization and formulation,
    the modes and formulations in report order, the predictions, and the item subsets."""
    ctx.scores, ctx.normalizations = scores, normalize.model_normalizations(scores, normalization)
    ctx.normalization = normalization or normalize.most_shared(ctx.normalizations)
    present = set(scores["mode"].unique())
    ctx.mode_order = [m for m in MODES if m in present] + sorted(present - set(MODES))
    ctx.formulation_order, ctx.base_forms = _formulations(scores)
    ctx.primary = formulation if formulation in ctx.base_forms else ctx.base_forms[0]
    ctx.preds_all = accuracy.all_predictions(scores, ctx.gold)
    own = ctx.preds_all["model"].map(ctx.normalizations)
    ctx.preds = ctx.preds_all[ctx.preds_all["normalization"] == own]
    ctx.subsets = {"all": list(ctx.gold.index)}
    for source in sorted({it["source"] for it in ctx.items if it["source"]}):
        ctx.subsets[f"source={source}"] = [it["item_id"] for it in ctx.items if it["source"] == source]


def _settings(ctx: sections.Context) -> dict:
    """The run's options as metrics.json records them (fewer without scores)."""
    common = {"alpha": ctx.alpha, "n_resamples": ctx.n_resamples, "seed": ctx.seed}
    if ctx.scores is None:  # the models that answer: generated and stored answers
        answers = ctx.answers if ctx.answers is not None else pd.DataFrame(columns=["model", "run", "source"])
        present = set(ctx.gens["mode"].unique()) | {answer_mode(r, s) for r, s in zip(answers["run"], answers["source"])}
        return {"normalization": None, "modes": [m for m in MODES if m in present] + sorted(present - set(MODES)),
                "models": sorted(set(ctx.gens["model"]) | set(answers["model"])), **common}
    return {"normalization": ctx.normalization, "own_normalizations": ctx.own_normalizations,
            "own_normalization_why": {m: f"`{ctx.normalization}` missing for "
                                         f"{normalize.lacking(ctx.scores, m, ctx.normalization)}"
                                      for m in ctx.own_normalizations},
            "incomplete": {m: f"`{n}` missing for {gaps}" for m, n in ctx.normalizations.items()
                           if (gaps := normalize.lacking(ctx.scores, m, n))},
            "modes": ctx.mode_order, "formulations": ctx.formulation_order,
            "primary_formulation": ctx.primary, "models": sorted(ctx.scores["model"].unique()), **common,
            "length_units": list(ctx.length_units), "core_mode": ctx.core_mode, "core_threshold": ctx.core_threshold}


def _write_report(bar, out: Path, metrics: dict) -> dict:
    metrics = _clean(metrics)
    with _stage(bar, "writing the report"):
        write_text(out / "metrics.json", json.dumps(metrics, indent=1, allow_nan=False) + "\n")
        blocks = sections.report_blocks(metrics, out)
        write_text(out / "report.md", render.markdown(blocks))
        write_text(out / "report.html", render.html_page(blocks, "benchcurate audit report"))
    return metrics


def _check_asked(root, option: str, asked, found: set, known) -> None:
    """Every name given with ``option`` has scores or generations: a typo is an error, not a
    smaller report. ``known`` (a set, or a function giving one) is what the error offers instead."""
    missing = [name for name in asked or () if name not in found]
    if missing:
        known = known() if callable(known) else known
        raise CurateError(f"{root}: no scores or generations for {option} {', '.join(map(repr, missing))} "
                          f"(the workspace has: {', '.join(sorted(known)) or 'none'})")


def _stored_modes(ws: Workspace) -> set:
    """The modes that hold scores or generations (read only when an asked mode has none: the
    frames in hand hold the asked modes alone)."""
    return {r[0] for sql in ("SELECT DISTINCT mode FROM scores", "SELECT DISTINCT mode FROM generations")
            for r in ws.conn.execute(sql)}


@contextmanager
def _stage(bar, name: str):
    """Name the stage on the progress bar while it runs; count it when done."""
    bar.set_postfix_str(name)
    yield
    bar.update(1)


def _formulations(scores) -> tuple[list[str], list[str]]:
    """The formulations present in report order (cloze, letters, rotations by K, others), and
    those that are not rotations."""
    def order(name):
        try:
            kind, k = forms.parse(name)
        except CurateError:
            return (2, 0, name)
        return (0 if kind == "cloze" else 1, k, name)
    present = sorted(scores["formulation"].unique(), key=order)
    return present, [f for f in present if order(f)[1] == 0]


SOURCE_COLUMNS = ["model", "mode", "formulation", "fewshot", "run_id", "origin", "dtype", "device", "engine", "items",
                  "model_hash", "created_at"]


def _provenance(root, items, meta, sources, records) -> dict:
    digest = hashlib.sha256("\n".join(it["content_hash"] for it in items).encode()).hexdigest()
    return {"workspace": str(Path(root).resolve()), **meta, "items": len(items),
            "items_digest": f"sha256:{digest}",
            "score_runs": sources[SOURCE_COLUMNS].to_dict("records"),
            "annotations": records.groupby(["annotator", "round", "run_id", "status"], dropna=False)
                                  .size().rename("records").reset_index().to_dict("records")}


def _clean(value):
    """JSON-ready: numpy scalars to Python, NaN to None."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
