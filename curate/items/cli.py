"""`curate init` (a workspace from a benchmark), `curate items` (its items) and `curate info`."""
from __future__ import annotations

import collections
from pathlib import Path

import click

from curate.core.options import Option, click_options
from curate.items.adapters import known
from curate.items.ingest_options import IngestOptions

WORKSPACE = click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))

#: The generic adapter's column mapping as single flags (its keys in --columns): the spelling
#: before --columns, still accepted, hidden from --help. Flag -> (mapping key, a list of columns?).
_COLUMN_FLAGS = {"--name": ("name", False), "--question": ("question", False), "--choices": ("choices", True),
                 "--answer": ("answer", False), "--answer-format": ("answer_format", False),
                 "--choice-labels": ("choice_labels", False), "--zero-column": ("zero", False),
                 "--source-column": ("source", False), "--id-columns": ("ids", True),
                 "--template": ("template", False), "--letters-template": ("letters_template", False),
                 "--kind": ("kind", False), "--formulation": ("formulation", False)}

#: `curate init`'s own options beside what the ingest reads (``IngestOptions``).
BENCHMARK = [Option("benchmark", required=True, choices=tuple(known()),
                    help="Adapter that maps source rows to canonical items: a built-in benchmark, or generic.")]
COLUMNS = [
    Option("columns", metavar="FILE|MAPPING",
           help="generic: the column mapping, as the audit config's benchmark.columns writes it: a YAML/JSON "
                "file, or inline, e.g. '{question: goal, choices: [sol1, sol2], answer: label}'."),
    *(Option("column_" + key, flag=flag, hidden=True) for flag, (key, _) in _COLUMN_FLAGS.items()),
]
ITEMS = [Option("out", path="write-file",
                help="Output file (.jsonl, .parquet or .csv); default WORKSPACE/exports/items.jsonl.")]


def _column_mapping(columns: str | None, flags: dict) -> dict:
    """One mapping from --columns and the single flags; a key given both ways is refused, and the
    whole is checked as the audit config's benchmark.columns is."""
    from curate.items.adapters.columns import check_columns, read_columns

    mapping = read_columns(columns) if columns else {}
    for flag, (key, is_list) in _COLUMN_FLAGS.items():
        value = flags["column_" + key]
        if value is None:
            continue
        if key in mapping:
            raise click.UsageError(f"{flag} and --columns both give {key}: give it once")
        # "--choices endings" is one list column (a string, as in the config), "--choices a,b" one per option
        listed = [c for c in value.split(",") if c] if is_list else value
        if not listed:
            raise click.UsageError(f"{flag} {value!r}: name the {key} column(s)")
        mapping[key] = listed[0] if key == "choices" and len(listed) == 1 else listed
    missing = [k for k in ("question", "choices", "answer") if k not in mapping]
    if missing:
        raise click.UsageError(f"the generic adapter needs --columns with {', '.join(missing)}")
    check_columns(mapping, where="--columns")
    return mapping


@click.command()
@click.argument("workspace", type=click.Path(file_okay=False, path_type=Path))
@click_options(BENCHMARK)
@click_options(IngestOptions.TABLE, into=IngestOptions)
@click_options(COLUMNS)
def init(workspace, benchmark, options, columns, **column_flags):
    """Create WORKSPACE by ingesting a benchmark split into canonical items."""
    from curate.items.adapters import get_adapter
    from curate.items.adapters.columns import adapter_keywords
    from curate.items.ingest import Ingest

    if benchmark == "generic":
        try:
            adapter = get_adapter("generic", **adapter_keywords(_column_mapping(columns, column_flags)))
        except ValueError as exc:  # a column mapping that names nothing (--choices ",")
            raise click.UsageError(str(exc)) from None
    elif columns or any(v is not None for v in column_flags.values()):
        raise click.UsageError(f"the {benchmark} adapter takes no column mapping (--columns is for generic)")
    else:
        adapter = get_adapter(benchmark)
    root = Ingest(workspace, options, adapter).run()
    click.echo(f"created {root} with {_summary(root)}")


@click.command()
@WORKSPACE
@click_options(ITEMS)
def items(workspace, out):
    """Export the canonical items of WORKSPACE."""
    from curate.core.exports import write_records
    from curate.items.store import Workspace

    with Workspace.open(workspace) as ws:
        records = ws.items()
        out = write_records(records, out or ws.exports / "items.jsonl")
    click.echo(f"wrote {len(records)} items to {out}")


@click.command()
@WORKSPACE
def info(workspace):
    """Summarize WORKSPACE: source, items, and what each stage has stored."""
    from curate.items.store import Workspace

    with Workspace.open(workspace) as ws:
        src = ws.meta("source", {})
        click.echo(f"workspace   {workspace}")
        click.echo(f"benchmark   {ws.meta('benchmark')} (split {ws.meta('split')}, scored in "
                   f"{ws.meta('formulation', 'cloze')} by default)")
        where = src.get("path") or src.get("repo_id")
        pin = src.get("sha256") or src.get("resolved_revision") or src.get("revision") or "unpinned"
        click.echo(f"source      {where} [{pin}]")
        if src.get("encoding"):  # as read: named with --encoding, or the one detected
            encodings = src["encoding"] if isinstance(src["encoding"], list) else [src["encoding"]]
            click.echo(f"encoding    {', '.join(encodings)}")
        if src.get("copy_of"):
            copy = src["copy_of"]
            click.echo(f"copy of     {copy['repo_id']}@{copy['revision'] or '(revision not recorded)'}")
        click.echo(f"created     {ws.meta('created_at')} by benchcurate {ws.meta('toolkit_version')}")
        click.echo(f"items       {_summary(workspace, ws)}")
        click.echo("tables")
        for name, n in ws.tables().items():
            click.echo(f"  {name:<24}{n:>10}")


def _summary(root, ws=None) -> str:
    from curate.items.store import Workspace

    own = ws is None
    ws = ws or Workspace.open(root)
    try:
        items = ws.items()
    finally:
        if own:
            ws.close()
    by_source = collections.Counter(it["source"] or "(none)" for it in items)
    n_opts = collections.Counter(len(it["options"]) for it in items)
    parts = ", ".join(f"{s} {n}" for s, n in sorted(by_source.items()))
    opts = ", ".join(f"{k} options: {v}" for k, v in sorted(n_opts.items()))
    return f"{len(items)} items ({parts}; {opts})"


COMMANDS = (init, items, info)
