"""Command-line value checks shared by several commands."""
from __future__ import annotations

import math

import click


def finite(ctx, param, value):
    """click callback: refuse 'nan' and 'inf', which float() accepts and no comparison catches
    (a --max-cost of nan would never stop a run)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number")
    return value


def end_of_run(summary: dict, what: str) -> None:
    """How a run over the items ends, for every command that answers them (annotate, generate):
    stopped (the spend cap, a refusal) is an error; ``what`` that failed after retries are a
    warning and exit status 1; otherwise nothing."""
    import sys

    from curate.core.errors import CurateError

    if summary["stopped"]:
        raise CurateError(f"stopped: {summary['stopped']}; what was answered is kept, re-run to resume")
    if summary["failed"]:
        click.echo(f"warning: {summary['failed']} {what} failed after retries (last: {summary['last_error']}); "
                   f"re-run to retry them", err=True)
        sys.exit(1)


class DefaultGroup(click.Group):
    """A command group whose first argument, when it names no subcommand, goes to the subcommand
    ``default_command`` (`curate release WORKSPACE ...` is `curate release create WORKSPACE ...`)."""

    default_command = ""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)
