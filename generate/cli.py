"""`curate generate`: the command-line shell over ``generate.run`` (export: `curate export WS generations`)."""
from __future__ import annotations

from pathlib import Path

import click

from curate.click_types import end_of_run
from curate.core.options import click_options
from generate.options import GENERATE
from scoring.model_spec import backend_named
from scoring.cli import _label, _modes  # one reading of --modes and --label for every command that takes them


def _template(ctx, param, value: str) -> str:
    from generate.prompts import template_names
    if value not in template_names():
        raise click.BadParameter(f"unknown template {value!r}; choose from {', '.join(template_names())}")
    return value


@click.command()
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--model", default="smollm2-135m", show_default=True,
              help="A local model, local:NAME or NAME (built-in name, folder, GGUF file or Hub id), or anthropic:MODEL.")
@click.option("--modes", default="full,zero", show_default=True, callback=_modes, help="Comma-separated prompt modes.")
@click.option("--template", default="numbered", show_default=True, callback=_template,
              help="Prompt wording (generate/templates/NAME.yaml): numbered or question.")
@click.option("--label", default=None, callback=_label, help="Model name stored with the answers (default: --model).")
@click_options(GENERATE, backend_of=lambda kw: backend_named(kw["model"], "--model"))
def generate(workspace, model, modes, seeds, template, temperature, top_p, max_new_tokens, limit, label, replace,
             batch_size, dtype, device, concurrency, max_cost, retries, parse_retries, backoff, timeout, key_header,
             quiet, fewshot, fewshot_pool):
    """Ask a model to answer every item of WORKSPACE by generating the number of an option."""
    from curate.anthropic_api.prices import retirement_note
    from curate.anthropic_api.spend import left_in_flight_note, possibly_line
    from generate.run import generate_workspace, summary_line

    if note := retirement_note(model):
        click.echo(note, err=True)
    s = generate_workspace(workspace, model, modes, seeds, template=template, temperature=temperature, top_p=top_p,
                           max_new_tokens=max_new_tokens, limit=limit, label=label, batch_size=batch_size,
                           dtype=dtype, device=device, show_progress=not quiet, concurrency=concurrency,
                           max_cost=max_cost, retries=retries, backoff=backoff, parse_retries=parse_retries,
                           timeout=timeout, key_header=key_header, replace=replace, fewshot=fewshot,
                           fewshot_pool=fewshot_pool)
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
