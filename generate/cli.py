"""`curate generate`: the command-line shell over ``generate.run`` (export: `curate export WS generations`)."""
from __future__ import annotations

from pathlib import Path

import click

from curate.click_types import end_of_run
from curate.core.options import click_options
from generate.options import GENERATE, GenerateOptions
from scoring.model_spec import backend_named


@click.command()
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click_options(GENERATE, into=GenerateOptions, backend_of=lambda kw: backend_named(kw["model"], "--model"))
def generate(workspace, options):
    """Ask a model to answer every item of WORKSPACE by generating the number of an option."""
    from curate.anthropic_api.prices import retirement_note
    from curate.anthropic_api.spend import left_in_flight_note, possibly_line
    from generate.run import Generate, summary_line

    if note := retirement_note(options.model):
        click.echo(note, err=True)
    s = Generate(workspace, options).run()
    if note := left_in_flight_note(s.get("left_in_flight")):
        click.echo(note, err=True)
    click.echo(summary_line(s))
    if s["backend"] == "local" and s["computed"]:
        click.echo(f"{s['answers_per_second']:.2f} answers/s over {s['generate_seconds']:.1f} s")
    if s["backend"] == "anthropic":
        c = s["cost"]
        click.echo(f"cost: {c['usd']:.4f} USD for {c['replies']} replies (input {c['input_tokens']}, "
                   f"output {c['output_tokens']}){possibly_line(c)}")
    end_of_run(s, "answers")


COMMANDS = (generate,)
