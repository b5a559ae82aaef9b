"""`curate audit`: the config's runs, stage by stage in their order (``curate.audit.stages``), in
one workspace.

Every stage resumes on its own (ingest makes the workspace once; an answers import whose answers
are all held stores nothing; annotation and scoring cache by request/content key; filter and
analyze are skipped when their inputs have not changed, ``curate.audit.fingerprints``; a release
version that exists with the same kept items is done), so running an audit again does only what
is missing. The first stage that stops ends the audit.
"""
from __future__ import annotations

import time

import click

from curate.audit.config import AuditConfig
from curate.audit.stages import Outcome, line


def run_audit(config: AuditConfig, *, echo=click.echo) -> list[Outcome]:
    """Run every run of the config, stage by stage; stop after a run that stopped."""
    outcomes: list[Outcome] = []
    names = list(dict.fromkeys(run.stage.name for run in config.runs))  # score imports and scoring: one "score"
    for i, run in enumerate(config.runs):
        if i == 0 or run.stage.name != config.runs[i - 1].stage.name:
            echo(click.style(f"[{names.index(run.stage.name) + 1}/{len(names)}] {run.stage.name}", bold=True))
        start = time.perf_counter()
        done = run.stage.run(run, config)
        for o in done:
            took = time.perf_counter() - start if o.seconds is None else o.seconds
            echo(f"      {o.status:<8}{o.detail}  ({took:.1f}s)")
        outcomes += done
        if any(o.status == "stopped" for o in done):
            echo("audit stopped; fix the cause and run the same command again to resume")
            break
    return outcomes


def summary_lines(config: AuditConfig, outcomes: list[Outcome]) -> list[str]:
    """The closing summary: where the workspace is, what was new, then each stage's own lines
    (what it cost, what it found, where its output is)."""
    new_work = [o.stage for o in outcomes if o.status == "ran"]
    return [line("workspace", str(config.workspace)),
            line("new work", ", ".join(new_work) if new_work else "none (everything was up to date)")] + [
        text for stage, runs in config.stages() for text in stage.summary(runs, outcomes, config)]
