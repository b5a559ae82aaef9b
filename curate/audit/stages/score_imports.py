"""``scoring.imports``: per-option scores imported as `curate import-scores` imports them
(``scoring.imports``), before the models are scored; files already stored, unchanged, are skipped."""
from __future__ import annotations

import time
from pathlib import Path

from curate.audit.stages import AuditStage, Outcome, Run, line
from scoring.import_options import ImportScoresOptions


class Step(AuditStage):
    name, section, ORDER, PROVIDES = "score", "scoring", 39, ("scores",)

    @classmethod
    def from_config(cls, section) -> list[Run]:
        return [Run(cls, entry.key, entry.options(ImportScoresOptions, **entry.given(ImportScoresOptions.TABLE),
                                                  quiet=True))
                for entry in section.entries("imports")]

    @classmethod
    def provides(cls, run: Run, plan) -> set[tuple]:
        """What importing the files will store, read without importing: each format's
        ``supplies``, at the shot counts it records (``shot_counts``; 0 without)."""
        from scoring.imports import get, shot_counts

        o = run.options
        shots = shot_counts(o.format, [o.dir])
        return {("scores", model, mode, formulation, k, norm)
                for (model, mode, formulation), norms in get(o.format).supplies([o.dir], plan.default_formulation).items()
                for k in shots.get(model, (0,)) for norm in norms}

    @classmethod
    def fits(cls, run: Run, plan) -> list[tuple[str, str]]:
        """Files that cannot be the workspace's items (a study CSV holds one row per item; an
        lm-eval sample matches an item of its own), given how many items there will be. Where
        that is not known before the ingest, the audit checks again right after it; with the
        source offline, the import is listed as unchecked too."""
        from scoring.imports import get

        fmt, key, items = get(run.options.format), f"{run.key}.dir", plan.items
        if not hasattr(fmt, "misfits"):
            return []
        if items.count is not None and (bad := fmt.misfits([run.options.dir], items.count, items.exact)):
            more = f" (and {len(bad) - 1} more files)" if len(bad) > 1 else ""
            return [(key, f"cannot match the items: {bad[0]}{more}, but the workspace {items.why}")]
        if not items.exact and items.offline:
            plan.unchecked.append((key, "whether its files match the items the ingest makes (the audit counts them "
                                        "right after its ingest, before anything is spent)"))
        return []

    @classmethod
    def inputs(cls, run: Run, config) -> list[tuple[str, Path]]:
        return [(f"{run.key}.dir", run.options.dir)]

    @classmethod
    def describe(cls, runs: list[Run]) -> list[str]:
        return [line("score", f"import {run.options.format} scores from {run.options.dir}") for run in runs]

    @classmethod
    def run(cls, run: Run, config) -> list[Outcome]:
        from scoring.imports import get

        start, o = time.perf_counter(), run.options
        fmt = get(o.format)
        if fmt.imported(config.workspace, [o.dir]):
            return [Outcome("score", "skipped", f"{o.format} scores from {o.dir} already imported",
                            seconds=time.perf_counter() - start)]
        summary = fmt.import_scores(config.workspace, [o.dir], label=o.label, replace=o.replace, progress=not o.quiet)
        pairs = sorted({(r["model"], r["mode"]) for r in summary})
        return [Outcome("score", "ran", f"imported {o.format} scores from {o.dir}: {len(pairs)} model-modes of "
                                        f"{len({m for m, _ in pairs})} models", {"imported": summary},
                        time.perf_counter() - start)]
