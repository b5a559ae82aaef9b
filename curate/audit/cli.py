"""`curate audit` (every stage from one config) and `curate check-config` (validate a config and
show what it would run, before a long run)."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from curate.core.options import Option, click_options

CONFIG = click.argument("config", required=False, type=click.Path(dir_okay=False, path_type=Path))
CHECK_CONFIG = [Option("no_files", bool, False, help="Do not require the input files (data, rules, imported scores) "
                       "to exist yet, nor read the data (its rows, a Hub dataset) or count the imported scores' rows.")]
AUDIT = [Option("dry_run", bool, False, help="Show the plan, the requests Claude's rounds would send (each round's "
                "first, as sent) and the most they could cost, with no key and no network; run and write nothing.")]

#: Where a config's paths lead (``curate.core.config_section``), said under its name.
PATHS = "paths      outputs under {cwd}, the folder curate runs in; inputs beside the config file"


@click.command("check-config")
@CONFIG
@click_options(CHECK_CONFIG)
def check_config(config, no_files):
    """Validate an audit CONFIG (default: the embedded demo), print its plan, and check that the
    plan is complete: every input the filter rules read will exist after the planned stages, and
    nothing known now would stop the audit after it has spent anything (a placeholder such as
    <COMMIT-SHA>, a missing ANTHROPIC_API_KEY or Hub token, score or answer imports that cannot
    match the items the ingest makes).

    Lists every problem, each with the config file and the key at fault, and exits 2 if any.
    Exits 1 when the plan could not be checked in full: a Hub dataset that cannot be reached
    from here ("cannot check offline").
    """
    from curate.audit import config as ac
    from curate.audit.plan import before_spending, plan_summary

    path = config or ac.DEFAULT_CONFIG
    data = ac.read_yaml(path)
    problems = ac.config_problems(data)
    complete, unchecked = None, []
    if not problems:
        resolved = ac.build(data, file=path.resolve(), cwd=Path.cwd())
        missing = [(key, f"no such file or folder: {p}") for key, p in ac.missing_inputs(resolved)]
        # what `curate audit` refuses up front (outputs that clash, ...), then what it needs
        problems = ac.stage_problems(resolved)
        if not missing:
            check = before_spending(resolved, sources=not no_files)  # --no-files: the data is not read either
            problems += check.problems
            unchecked = check.unchecked
            complete = not problems
        else:
            problems += before_spending(resolved, files=False).problems + ([] if no_files else missing)
    offline = [f"cannot check offline: {what}: {why}" for what, why in unchecked]
    if problems:
        for line in offline:
            click.echo(f"note: {line}", err=True)
        report(path, problems)
    click.echo(f"config     {path.resolve()}")
    click.echo(PATHS.format(cwd=Path.cwd()))
    for line in ac.describe(resolved):
        click.echo(line)
    retirement_notes(resolved)
    if not complete:
        click.echo("plan completeness not checked: input files are missing (--no-files)")
    elif offline:
        click.echo("\n".join(offline))
        click.echo("plan not fully checked: what is named above needs the Hub; the rest is "
                   + plan_summary(resolved).removeprefix("plan "))
        sys.exit(1)
    else:
        click.echo(plan_summary(resolved))


def show_dry_run(cfg) -> None:
    """`curate audit --dry-run`: the plan, what each stage would send and cost, what a real run
    still needs (a key) and what could not be checked offline; exit 2 on a problem."""
    from curate.audit.dry_run import dry_run

    lines, check, keys = dry_run(cfg)
    for line in [f"cannot check offline: {what}: {why}" for what, why in check.unchecked]:
        click.echo(f"note: {line}", err=True)
    for key, message in keys:
        click.echo(f"note: a real run needs it ({key}): {message}", err=True)
    if check.problems:
        report(cfg.file, check.problems)
    click.echo(f"config     {cfg.file}")
    click.echo(PATHS.format(cwd=Path.cwd()))
    for line in lines:
        click.echo(line)


def retirement_notes(cfg) -> None:
    """A note for each planned Claude annotator whose model the anthropic SDK says retires."""
    from curate.anthropic_api.prices import retirement_note

    for annotator in dict.fromkeys(o.annotator for o in cfg.options("annotate")):
        if note := retirement_note(annotator):
            click.echo(note, err=True)


def report(path: Path, problems: list[tuple[str, str]]) -> None:
    for key, message in problems:
        click.echo(f"error: {path}, field '{key}': {message}", err=True)
    sys.exit(2)


@click.command("audit")
@CONFIG
@click_options(AUDIT)
def audit(config, dry_run):
    """Run the whole audit CONFIG describes (default: the embedded offline demo).

    ingest -> answers -> annotate -> score -> filter -> analyze -> release in one workspace;
    every stage resumes, so running the same command again does only what is missing. Nothing
    runs unless the plan is complete (as `curate check-config` reports it).
    """
    from curate.audit import config as ac
    from curate.audit.run import run_audit, summary_lines
    from curate.audit.plan import before_spending

    cfg = ac.load_config(config)
    if dry_run:
        return show_dry_run(cfg)
    problems = before_spending(cfg).problems  # before anything is spent
    if problems:
        report(cfg.file, problems)
    click.echo(f"config     {cfg.file}")
    click.echo(PATHS.format(cwd=Path.cwd()))
    retirement_notes(cfg)
    outcomes = run_audit(cfg)
    click.echo(click.style("summary", bold=True))
    for line in summary_lines(cfg, outcomes):
        click.echo(line)
    if any(o.status == "stopped" for o in outcomes):
        sys.exit(1)


COMMANDS = (audit, check_config)
