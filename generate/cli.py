"""`curate generate`: the command-line shell over ``generate.run`` (export: `curate export WS generations`)."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from curate.click_types import finite
from curate.errors import CurateError
from scoring.cli import _label, _modes  # one reading of --modes and --label for every command that takes them


def _template(ctx, param, value: str) -> str:
    from generate.prompts import template_names
    if value not in template_names():
        raise click.BadParameter(f"unknown template {value!r}; choose from {', '.join(template_names())}")
    return value


#: Each seed is a full pass over the items; the study used 5.
MAX_SEEDS = 1000
#: Below this, logits / temperature overflow and sampling fails on inf/nan probabilities.
MIN_TEMPERATURE = 0.01


def _temperature(ctx, param, value):
    value = finite(ctx, param, value)
    if value is not None and 0 < value < MIN_TEMPERATURE:
        raise click.BadParameter(f"{value} is below {MIN_TEMPERATURE}, where the sampling probabilities overflow; "
                                 "use 0 for greedy decoding")
    return value


@click.command()
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--model", default="smollm2-135m", show_default=True,
              help="A local model (built-in name, folder, GGUF file or Hub id) or anthropic:MODEL.")
@click.option("--modes", default="full,zero", show_default=True, callback=_modes, help="Comma-separated prompt modes.")
@click.option("--seeds", type=click.IntRange(min=1, max=MAX_SEEDS), default=5, show_default=True,
              help="Number of seeds (0..N-1): each shuffles the options anew (and seeds sampling when --temperature > 0).")
@click.option("--template", default="numbered", show_default=True, callback=_template,
              help="Prompt wording (generate/templates/NAME.yaml): numbered or question.")
@click.option("--temperature", type=click.FloatRange(min=0), default=None, callback=_temperature,
              help="local: 0 (the default) = greedy decoding. Not for anthropic: the API takes no sampling settings.")
@click.option("--top-p", type=click.FloatRange(0, 1, min_open=True), default=None, callback=finite,
              help="local, with --temperature > 0: nucleus sampling (default 1 = off).")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N items (row order).")
@click.option("--label", default=None, callback=_label, help="Model name stored with the answers (default: --model).")
@click.option("--replace", is_flag=True,
              help="Delete the label's stored answers for this template and settings first (needed when they "
                   "were made by another model, dtype or template version).")
@click.option("--batch-size", type=click.IntRange(min=1), default=64, show_default=True, help="local: prompts per generate call.")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32", show_default=True)
@click.option("--device", default="cpu", show_default=True, help="local: cpu, cuda or cuda:N.")
@click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True, help="anthropic: requests in flight.")
@click.option("--max-cost", type=click.FloatRange(min=0), default=None, callback=finite,
              help="anthropic: stop before this run's spend could exceed USD (re-asks included).")
@click.option("--retries", type=click.IntRange(min=0), default=6, show_default=True,
              help="anthropic: retries per request on 408/429/5xx/529, timeouts and connection errors.")
@click.option("--parse-retries", type=click.IntRange(min=0), default=0, show_default=True,
              help="anthropic: re-ask (with a reminder) when a reply names no option.")
@click.option("--backoff", type=click.FloatRange(min=0), default=1.0, callback=finite, show_default=True)
@click.option("--timeout", type=click.FloatRange(min=0.1), default=60.0, callback=finite, show_default=True)
@click.option("--key-header", default=None, help="anthropic: also send ANTHROPIC_API_KEY in this header.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def generate(workspace, model, modes, seeds, template, temperature, top_p, max_new_tokens, limit, label, replace,
             batch_size, dtype, device, concurrency, max_cost, retries, parse_retries, backoff, timeout, key_header,
             quiet):
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
                           timeout=timeout, key_header=key_header, replace=replace)
    if note := left_in_flight_note(s.get("left_in_flight")):
        click.echo(note, err=True)
    click.echo(summary_line(s))
    if s["backend"] == "local" and s["computed"]:
        click.echo(f"{s['answers_per_second']:.2f} answers/s over {s['generate_seconds']:.1f} s")
    if s["backend"] == "anthropic":
        c = s["cost"]
        click.echo(f"cost: {c['usd']:.4f} USD for {c['replies']} replies (input {c['input_tokens']}, "
                   f"output {c['output_tokens']}){possibly_line(c)}")
    if s["stopped"]:
        raise CurateError(f"stopped: {s['stopped']}; what was answered is kept, re-run to resume")
    if s["failed"]:
        click.echo(f"warning: {s['failed']} answers failed after retries (last: {s['last_error']}); re-run to retry",
                   err=True)
        sys.exit(1)
