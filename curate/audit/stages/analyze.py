"""``analyze``: the report (``curate.analyses.report.Analyze``), counting what the filter removed
(its decisions, when the audit has a filter). Skipped when neither the workspace nor those
decisions changed since the report there was made (``curate.audit.fingerprints``)."""
from __future__ import annotations

from pathlib import Path

from curate.analyses.report import Analyze
from curate.audit.stages import AuditStage, Outcome, Run, line


class Step(AuditStage):
    name, section, ORDER = "analyze", "analyze", 60

    @classmethod
    def from_config(cls, section) -> list[Run]:
        decided = section.other("filter")  # the report counts what the filter removed
        decisions = decided.output(decided["out"]) if decided is not None else None
        return [Run(cls, section.key, Analyze.from_config(section, out=section.output(section["out"]),
                                                          decisions=decisions))]

    @classmethod
    def outputs(cls, run: Run, config) -> list[tuple[str, Path]]:
        return [(f"{cls.section}.out", run.options.out)]

    @classmethod
    def refused(cls, run: Run, key: str, folder: Path, config) -> str | None:
        from curate.analyses.outdir import check_report_dir

        check_report_dir(folder)
        return None

    @classmethod
    def describe(cls, runs: list[Run]) -> list[str]:
        return [line("analyze", f"-> {runs[0].options.out}")]

    @classmethod
    def run(cls, run: Run, config) -> list[Outcome]:
        from curate.audit.fingerprints import recompute
        from curate.items.sources import file_sha256

        o = run.options
        summary = o.decisions / "summary.json" if o.decisions else None
        ran, metrics = recompute("analyze", o.out, config.workspace,
                                 {"decisions": file_sha256(summary) if summary else None},
                                 lambda: Analyze(config.workspace, o).run())
        if not ran:
            return [Outcome("analyze", "skipped", f"report up to date in {o.out}")]
        return [Outcome("analyze", "ran", f"report in {o.out / 'report.html'}", {"metrics": metrics})]

    @classmethod
    def summary(cls, runs: list[Run], outcomes: list[Outcome], config) -> list[str]:
        return [line("report", str(runs[0].options.out / "report.html"))]
