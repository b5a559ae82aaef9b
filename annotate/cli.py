"""`curate annotate`, `curate agreement`, `curate import-annotations` (export: `curate export WS annotations`)."""
from __future__ import annotations

from pathlib import Path

import click

from annotate.options import ANNOTATE, IMPORT_VERDICTS, AnnotateOptions, ImportVerdictsOptions
from curate.click_types import end_of_run
from curate.core.errors import CurateError
from curate.core.options import Option, click_options
from scoring.model_spec import backend_named

WORKSPACE = click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))

#: The options of `curate agreement` and `curate import-annotations`.
AGREEMENT = [
    Option("round", int, min=1, max=2, help="Only this round (default both)."),
    Option("human", path="file",
           help="Human labels in the study's layout (see import-annotations), compared as annotator 'human'."),
    Option("human_round", int, min=1, max=2, help="Round of the --human file (default --round)."),
    Option("boot", int, 1000, min=10, flag="--bootstrap", aliases=("--boot",),
           help="Bootstrap resamples for the 95% intervals."),
    Option("out", path="write-file", help="Also write the table (.csv .jsonl .parquet)."),
]
IMPORT_ANNOTATIONS = [
    Option("fmt", flag="--format", required=True, choices=("study",),
           help="study: the reference study's published layout."),
    Option("round", int, required=True, min=1, max=2),
    Option("file", path="file", required=True),
    Option("annotator", default="imported:study"),
    Option("missing", choices=("skip", "refused"), default="skip",
           help="Items without a row: leave them, or record them as refused (the study's round-2 file omits its "
                "refusals)."),
]


@click.command()
@WORKSPACE
@click_options(ANNOTATE, into=AnnotateOptions, backend_of=lambda kw: backend_named(kw["annotator"], "--annotator"))
def annotate(workspace, options):
    """Annotate the items of WORKSPACE that have no valid record for ANNOTATOR in this round."""
    from annotate.run import Annotate
    from curate.anthropic_api.prices import retirement_note
    from curate.anthropic_api.spend import left_in_flight_note, possibly_line

    if note := retirement_note(options.annotator):
        click.echo(note, err=True)
    s = Annotate(workspace, options).run()
    if s.get("dry_run"):
        click.echo(dry_run_lines(s))
        return
    c = s["cost"]
    if note := left_in_flight_note(s.get("left_in_flight")):
        click.echo(note, err=True)
    click.echo(f"{s['run_id']}: valid {s['valid']}, invalid {s['invalid']}, refused {s['refused']}, "
               f"failed {s['failed']}, skipped {s['skipped']} (already done), remaining {s['remaining']}")
    if s["backend"] == "local":  # no API, no ledger: "0 replies" would read as nothing answered
        click.echo("cost: none (a local model; nothing is sent to an API)")
    else:
        click.echo(f"cost: {c['usd']:.4f} USD for {c['replies']} replies (input {c['input_tokens']}, output "
                   f"{c['output_tokens']}, cache write {c['cache_write_tokens']}, cache read {c['cache_read_tokens']}, "
                   f"as the API reported){possibly_line(c)}")
    if s.get("cache"):
        click.echo(cache_line(s["cache"]))
    end_of_run(s, "items")


def cache_line(cache: dict) -> str:
    how = "counted by the endpoint" if cache["method"] == "count_tokens" else "estimated at 4 bytes a token"
    if cache["marked"]:
        return (f"prompt cache: the shared prefix ({cache['prefix_tokens']} tokens, {how}) is marked for caching "
                f"(the model's minimum is {cache['minimum']})")
    return (f"prompt cache: not used; the shared prefix ({cache['prefix_tokens']} tokens, {how}) is below the "
            f"model's minimum cacheable length of {cache['minimum']} tokens")


def dry_run_lines(s: dict) -> str:
    lines = [f"dry run: {s['to_annotate']} of {s['items']} items to annotate ({s['skipped']} done)"]
    if s["input_tokens_method"]:
        how = (f"counted by the endpoint's count_tokens (the ceilings below price each request at the larger of "
               f"that count and its byte bound; {s['input_tokens_bound']} in all)"
               if s["input_tokens_method"] == "count_tokens" else
               "an upper bound (the request's UTF-8 bytes plus framing and the tool-use system prompt; "
               "the endpoint offers no count_tokens or no key is set)")
        lines += [f"input tokens: {s['input_tokens']}, {how}",
                  f"output tokens: at most {s['max_output_tokens']} (max_tokens per reply)",
                  f"cost: at most {s['usd_first_answers']:.4f} USD if every first reply is usable; at most "
                  f"{s['usd_upper_bound']:.4f} USD if every item needs all {s['parse_retries']} re-asks",
                  cache_line(s["cache"])]
    return "\n".join(lines)


@click.command()
@WORKSPACE
@click_options(AGREEMENT)
def agreement(workspace, round, human, human_round, boot, out):
    """Agreement between annotators per label: Cohen's kappa, Krippendorff's alpha, Gwet's AC1."""
    from annotate.agreement import annotators_by_round, workspace_agreement, workspace_records
    from curate.core.exports import write_records

    if human is not None and (human_round or round) is None:
        raise click.UsageError("--human needs --human-round (or --round)")
    rounds = (round,) if round else (1, 2)
    table = workspace_agreement(workspace, rounds=rounds, human=human, human_round=human_round or round, n_boot=boot)
    if table.empty:
        _, records = workspace_records(workspace, human=human, human_round=human_round or round)
        raise CurateError("no pair of annotators has valid records for the same items; nothing to compare "
                          f"({annotators_by_round(records, rounds)})")
    for r in table.itertuples():
        click.echo(f"round {r.round} {r.facet:<24} {r.annotator_a} vs {r.annotator_b} n={r.n_items} "
                   f"agree={r.agreement:.3f} kappa={r.cohen_kappa:.3f} [{r.cohen_kappa_lo:.3f}, {r.cohen_kappa_hi:.3f}] "
                   f"alpha={r.krippendorff_alpha:.3f} [{r.krippendorff_alpha_lo:.3f}, {r.krippendorff_alpha_hi:.3f}] "
                   f"ac1={r.gwet_ac1:.3f} [{r.gwet_ac1_lo:.3f}, {r.gwet_ac1_hi:.3f}]")
    if out:
        click.echo(f"wrote {len(table)} rows to {write_records(table.to_dict('records'), out)}")


@click.command("import-annotations")
@WORKSPACE
@click_options(IMPORT_ANNOTATIONS)
def import_annotations(workspace, fmt, round, file, annotator, missing):
    """Import annotations from FILE (.parquet .csv .jsonl) into WORKSPACE."""
    from annotate.study_import import import_study

    s = import_study(workspace, file, round, annotator=annotator, missing=missing)
    click.echo(f"imported {s['records']} round-{round} records as {annotator}: "
               + ", ".join(f"{k} {s[k]}" for k in ("valid", "refused") if k in s))


@click.command("import-verdicts")
@WORKSPACE
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click_options(IMPORT_VERDICTS, into=ImportVerdictsOptions)
def import_verdicts(workspace, paths, options):
    """Import judges' verdicts on items (LLM judges, another audit's labels, reviews made elsewhere)
    from PATHS into WORKSPACE: all are stored or none; importing a file again replaces what it
    brought. They join the ranking of likely broken items (suspect_score), each judge weighted by
    its agreement with the models' evidence."""
    from annotate.verdict_import import import_verdicts as read_and_store

    s = read_and_store(workspace, paths, fmt=options.format, judge=options.judge)
    for j in s["judges"]:
        click.echo(f"  {j['judge']:<40} {j['items']} verdicts, {j['broken']} call the item broken")
    notes = [f"{s[k]} {what}" for k, what in (("dropped", "no longer in the files, removed"),
                                              ("repeated", "repeat a judge's verdict on an item, kept")) if s[k]]
    click.echo(f"imported {s['stored']} verdict{'' if s['stored'] == 1 else 's'} of {len(s['judges'])} judge"
               f"{'' if len(s['judges']) == 1 else 's'} from {s['files']} file{'' if s['files'] == 1 else 's'}"
               + (f" ({'; '.join(notes)})" if notes else ""))


COMMANDS = (annotate, agreement, import_annotations, import_verdicts)
