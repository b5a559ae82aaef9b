"""`curate score`: the command-line shell over ``scoring.run``."""
from __future__ import annotations

from pathlib import Path

import click

from curate.items.canonical import MODES
from curate.core.options import click_options
from scoring.options import SCORE, TEXT_SCORES


def _formulations(ctx, param, value: str | None) -> list[str] | None:
    from curate.core.errors import CurateError
    from curate.items.formulations import check

    if value is None:
        return None
    names = [f.strip() for f in value.split(",") if f.strip()]
    if not names:  # "," or "": a list that names nothing, as --modes "," is refused
        raise click.BadParameter(f"{value!r} names no formulation; give e.g. cloze or letters")
    try:
        return [check(f) for f in names]
    except CurateError as exc:
        raise click.BadParameter(str(exc)) from None


def _label(ctx, param, value: str | None) -> str | None:
    if value is not None and not value.strip():  # "" became the model name, " " a label no one can read
        raise click.BadParameter("is empty; give a name, or leave --label out to use --model")
    return value


def _modes(ctx, param, value: str) -> list[str]:
    modes = [m.strip() for m in value.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise click.BadParameter(f"unknown mode(s) {', '.join(bad) or '(none)'}; choose from {', '.join(MODES)}")
    return modes


@click.command()
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--model", required=True, help="Built-in name (smollm2-135m), local model folder, GGUF file or Hub id.")
@click.option("--modes", default=",".join(MODES), show_default=True, callback=_modes,
              help="Comma-separated prompt modes.")
@click.option("--formulations", default=None, callback=_formulations,
              help="Comma-separated: cloze, letters, letters+rK (the list rotated K places) or letters+rotations "
                   "(every rotation) [default: the benchmark's, as lm-eval scores it].")
@click.option("--label", default=None, callback=_label, help="Model name stored with the scores (default: --model).")
@click.option("--verify-batch-invariance", "verify", type=click.IntRange(min=0), default=0, metavar="K",
              help="Afterwards re-score K random items one at a time and report the largest difference.")
@click.option("--no-seq-mean", "no_seq_mean", is_flag=True, hidden=True, help="--seq-mean none.")
@click_options(SCORE)
def score(workspace, model, modes, formulations, dtype, device, max_memory, batch_tokens, limit, label, verify,
          no_seq_mean, self_check, replace, quiet, fewshot, seq_mean, fewshot_pool, prefix_cache_mb, text_scores):
    """Score every option of every item of WORKSPACE under each prompt mode and formulation."""
    from scoring.models import emulated_half
    from scoring.run import score_workspace, verify_batch_invariance
    from scoring.self_check import check_line

    if no_seq_mean:  # the older spelling of --seq-mean none
        if click.get_current_context().get_parameter_source("seq_mean") is click.core.ParameterSource.COMMANDLINE:
            raise click.UsageError("--no-seq-mean is --seq-mean none: give one of them")
        seq_mean = "none"
    if max_memory is not None and device != "auto":  # it would be stored with the run and never used
        raise click.UsageError("--max-memory places a model with --device auto; it has no use with --device "
                               f"{device}")

    summary = score_workspace(workspace, model, modes, dtype=dtype, device=device, batch_tokens=batch_tokens,
                              limit=limit, show_progress=not quiet, label=label, seq_mean=seq_mean,
                              replace=replace, formulations=formulations, self_check_items=self_check,
                              max_memory=max_memory, fewshot=fewshot, fewshot_pool=fewshot_pool,
                              prefix_cache_mb=prefix_cache_mb, text_scores=text_scores)
    if summary["process"] != 0:
        return
    who = f" (process 0 of {summary['processes']})" if summary["processes"] > 1 else ""
    if summary["replaced_rows"]:
        click.echo(f"replaced: deleted {summary['replaced_rows']} stored score rows of {summary['label']!r}")
    shots = "" if summary["fewshot"] == [0] else f", {','.join(map(str, summary['fewshot']))}-shot"
    click.echo(f"scored {summary['label']} [{dtype}, {device}, {', '.join(summary['formulations'])}{shots}]{who}: "
               f"{summary['computed']} item-modes computed, "
               f"{summary['cached']} cached, "
               + (f"{summary['text_computed']} text scores computed, " if text_scores else "")
               + f"{summary['tokens']} tokens in {summary['seconds']:.1f} s (run {summary['run_id']})")
    check = summary["self_check"]
    if self_check and summary["computed"] and not check["items"]:  # every row longer than --batch-tokens
        click.echo(f"note: self-check {check['note']}", err=True)
    if check["items"]:
        click.echo(f"{check_line(check, 'units (an item in one mode)')} ({summary['runner']} runner)")
    if summary["computed"] and emulated_half(dtype, device):
        click.echo(f"note: this CPU has no native {dtype} instructions, so --dtype {dtype} ran slower than float32 "
                   f"would (torch converts in software); the scores are those of a {dtype} model all the same",
                   err=True)
    if verify:
        first = summary["formulations"][0]  # the first formulation scored (a rotation request: its unrotated list)
        for mode in modes:
            check = verify_batch_invariance(workspace, model, mode, verify, dtype=dtype, device=device,
                                            label=summary["label"],
                                            formulation="letters" if first == "letters+rotations" else first)
            diff = check["max_abs_diff"]
            click.echo(f"batch invariance ({mode}, {check['items']} items one at a time): max |diff| "
                       f"logprob_sum {diff['logprob_sum']:.2e}, seq_mean {diff['seq_mean']:.2e}")


@click.command("text-scores")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--model", required=True, help="Built-in name (smollm2-135m), local model folder, GGUF file or Hub id.")
@click.option("--label", default=None, callback=_label, help="Model name stored with the scores (default: --model).")
@click_options(TEXT_SCORES)
def text_scores(workspace, model, dtype, device, batch_tokens, limit, label, self_check, replace, quiet):
    """Store membership signals of each item's own text (loss, zlib, Min-K%, Min-K%++) under a model."""
    from scoring.self_check import check_line
    from scoring.text_run import text_score_workspace

    s = text_score_workspace(workspace, model, dtype=dtype, device=device, batch_tokens=batch_tokens, limit=limit,
                             label=label, replace=replace, show_progress=not quiet, self_check_items=self_check)
    if s["replaced_rows"]:
        click.echo(f"replaced: deleted the text scores of {s['replaced_rows']} items of {s['label']!r}")
    click.echo(f"text scores of {s['label']} [{dtype}, {device}, {s['runner']} runner]: {s['computed']} computed, "
               f"{s['cached']} cached, {s['tokens']} tokens in {s['seconds']:.1f} s"
               + (f" (run {s['run_id']})" if s["computed"] else ""))
    if s["self_check"]["items"]:
        click.echo(check_line(s["self_check"], "texts"))
