"""`curate review` (the local web app) and `curate import-review` (verdicts from other tools)."""
from __future__ import annotations

from pathlib import Path

import click

from curate.core.errors import CurateError
from curate.core.options import Option, click_options

WORKSPACE = click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))

REVIEW = [
    Option("queue", help="removed, removed:STAGE, disagree, wrong, wrong:K, suspects, suspects:N, suspects:K-shot, "
                         "suspects:N:K-shot, sample, sample:N, sample:N:SEED, ids:FILE or all (default: removed with "
                         "--decisions, else all)."),
    Option("reviewer", help="Your name: verdicts are stored as annotator human:NAME (default: asked in the page, or "
                            "?reviewer=NAME in the URL)."),
    Option("port", int, 8000, min=0, max=65535, help="Port on 127.0.0.1 (0: any free port)."),
    Option("decisions", multiple=True, path="folder",
           help="A `curate filter --out` folder: its removed items form the 'removed' queues and its matched stages "
                "show on every item (repeatable)."),
]
IMPORT_REVIEW = [
    Option("fmt", flag="--format", required=True, choices=("argilla", "jsonl"),
           help="argilla: records.json as Argilla's dataset.records.to_json writes it; jsonl: the shape "
                "`curate export WS review --format jsonl` writes, filled in."),
    Option("file", path="file", required=True),
    Option("reviewer", help="jsonl: the reviewer of lines that name none."),
    Option("users", flag="--user", multiple=True, metavar="USER_ID=NAME",
           help="argilla: store this user's responses as human:NAME (default human:USER_ID; repeatable)."),
]


@click.command("review")
@WORKSPACE
@click_options(REVIEW)
def review(workspace, queue, reviewer, port, decisions):
    """Review the items of WORKSPACE in the browser, one at a time, and record verdicts.

    Serves http://127.0.0.1:PORT/ to this computer only; stop with Ctrl-C (everything saved is
    kept; open it again to resume).
    """
    from curate.review.data import ReviewData
    from curate.review.server import ReviewApp, make_server
    from curate.items.store import read_only_filesystem

    if read_only_filesystem(workspace):  # verdicts could be read but never saved
        raise CurateError(f"{workspace}: is on a read-only file system and `curate review` saves verdicts in the "
                          f"workspace: copy it somewhere writable, or mount it read-write")
    import time

    started = time.perf_counter()
    click.echo(f"loading {workspace}: items, scores, generations and decisions ...", err=True)
    data = ReviewData.load(workspace, decisions)
    click.echo(f"  {len(data.items)} items, {len(data.scores)} score rows in {time.perf_counter() - started:.1f} s; "
               f"building queue {queue or ('removed' if decisions else 'all')} ...", err=True)
    app = ReviewApp(data, reviewer=reviewer, queue=queue or ("removed" if decisions else "all"))
    try:
        server = make_server(app, port)
    except OSError as exc:
        raise CurateError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}; choose another --port") from None
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    click.echo(f"reviewing {workspace} ({len(data.items)} items), queue {app.queue}: "
               f"{len(app.queue_items(app.queue))} items (ready in {time.perf_counter() - started:.1f} s)")
    click.echo(f"open {url}" + ("?reviewer=NAME" if not app.reviewer else "") + "   (Ctrl-C stops; verdicts are saved as you go)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("stopped; run the same command again to resume")
    finally:
        server.server_close()
@click.command("import-review")
@WORKSPACE
@click_options(IMPORT_REVIEW)
def import_review(workspace, fmt, file, reviewer, users):
    """Import verdicts made in another tool as human:NAME annotation records (all or none)."""
    from curate.review.exchange import import_review as run

    names = {}
    for pair in users:
        user, sep, name = pair.partition("=")
        if not sep or not user or not name:
            raise click.UsageError(f"--user {pair!r}: expected USER_ID=NAME")
        names[user] = name
    s = run(workspace, file, fmt, reviewer=reviewer, users=names)
    click.echo(f"imported {s['records']} verdicts: " + (", ".join(f"{k} {v}" for k, v in s["by_reviewer"].items())
                                                       or "none (no answered items)"))


COMMANDS = (review, import_review)
