"""`curate score`: the command-line shell over ``scoring.run``."""
from __future__ import annotations

from pathlib import Path

import click

from curate.core.options import click_options
from scoring.options import SCORE, TEXT_SCORES, ScoreOptions, TextScoresOptions


def backend_named(kwargs) -> tuple[str, str]:
    """The backend a command runs on and how it was named (a backend's settings are refused
    beside another backend)."""
    return kwargs["backend"], f"--backend {kwargs['backend']}"


@click.command()
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click_options(SCORE, into=ScoreOptions, backend_of=backend_named)
def score(workspace, options):
    """Score every option of every item of WORKSPACE under each prompt mode and formulation."""
    from scoring.run import Score

    if options.max_memory is not None and options.device != "auto":  # it would be stored with the run and never used
        raise click.UsageError("--max-memory places a model with --device auto; it has no use with --device "
                               f"{options.device}")
    summary = Score(workspace, options).run()
    if summary["process"] != 0:
        return
    click.echo(summary_lines(summary, options))
    if options.verify_batch_invariance:
        verify_lines(workspace, summary, options)


def summary_lines(summary: dict, options) -> str:
    """What `curate score` prints of a run: what it computed, the self-check, and notes."""
    from scoring.models import emulated_half
    from scoring.self_check import check_line

    who = f" (process 0 of {summary['processes']})" if summary["processes"] > 1 else ""
    lines = [f"replaced: deleted {summary['replaced_rows']} stored score rows of {summary['label']!r}"] \
        if summary["replaced_rows"] else []
    shots = "" if summary["fewshot"] == [0] else f", {','.join(map(str, summary['fewshot']))}-shot"
    lines.append(f"scored {summary['label']} [{options.dtype}, {options.device}, {', '.join(summary['formulations'])}"
                 f"{shots}]{who}: {summary['computed']} item-modes computed, {summary['cached']} cached, "
                 + (f"{summary['text_computed']} text scores computed, " if options.text_scores else "")
                 + f"{summary['tokens']} tokens in {summary['seconds']:.1f} s (run {summary['run_id']})")
    lines += summary.get("notes", [])  # what the backend chose for the run (vLLM's memory)
    check = summary["self_check"]
    if options.self_check and summary["computed"] and not check["items"]:  # every row longer than --batch-tokens
        click.echo(f"note: self-check {check['note']}", err=True)
    if check["items"]:
        lines.append(f"{check_line(check, 'units (an item in one mode)')} ({summary['runner']} runner)")
    if summary["computed"] and emulated_half(options.dtype, options.device):
        click.echo(f"note: this CPU has no native {options.dtype} instructions, so --dtype {options.dtype} ran slower "
                   f"than float32 would (torch converts in software); the scores are those of a {options.dtype} model "
                   "all the same", err=True)
    return "\n".join(lines)


def verify_lines(workspace, summary: dict, options) -> None:
    """--verify-batch-invariance: K random items re-scored one at a time, per mode."""
    from scoring.run import verify_batch_invariance

    first = summary["formulations"][0]  # the first formulation scored (a rotation request: its unrotated list)
    for mode in options.modes:
        check = verify_batch_invariance(workspace, options, mode, label=summary["label"],
                                        formulation="letters" if first == "letters+rotations" else first)
        diff = check["max_abs_diff"]
        click.echo(f"batch invariance ({mode}, {check['items']} items one at a time): max |diff| "
                   f"logprob_sum {diff['logprob_sum']:.2e}, seq_mean {diff['seq_mean']:.2e}")


@click.command("text-scores")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click_options(TEXT_SCORES, into=TextScoresOptions, backend_of=backend_named)
def text_scores(workspace, options):
    """Store membership signals of each item's own text (loss, zlib, Min-K%, Min-K%++) under a model."""
    from scoring.self_check import check_line
    from scoring.text_run import TextScores

    s = TextScores(workspace, options).run()
    if s["replaced_rows"]:
        click.echo(f"replaced: deleted the text scores of {s['replaced_rows']} items of {s['label']!r}")
    click.echo(f"text scores of {s['label']} [{options.dtype}, {options.device}, {s['runner']} runner]: "
               f"{s['computed']} computed, {s['cached']} cached, {s['tokens']} tokens in {s['seconds']:.1f} s"
               + (f" (run {s['run_id']})" if s["computed"] else ""))
    if s["self_check"]["items"]:
        click.echo(check_line(s["self_check"], "texts"))
