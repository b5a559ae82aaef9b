"""`curate review` (the local web app) and `curate import-review` (verdicts from other tools)."""
from __future__ import annotations

from pathlib import Path

import click

WORKSPACE = click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
DECISIONS = click.option("--decisions", "decisions", multiple=True,
                         type=click.Path(exists=True, file_okay=False, path_type=Path),
                         help="A `curate filter --out` folder: its removed items form the 'removed' queues and "
                              "its matched stages show on every item (repeatable).")


@click.command("review")
@WORKSPACE
@click.option("--queue", default=None, help="removed, removed:STAGE, disagree, wrong, wrong:K, sample, sample:N, "
                                            "sample:N:SEED, ids:FILE or all (default: removed with --decisions, else all).")
@click.option("--reviewer", default=None, help="Your name: verdicts are stored as annotator human:NAME "
                                               "(default: asked in the page, or ?reviewer=NAME in the URL).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port on 127.0.0.1 (0: any free port).")
@DECISIONS
def review(workspace, queue, reviewer, port, decisions):
    """Review the items of WORKSPACE in the browser, one at a time, and record verdicts.

    Serves http://127.0.0.1:PORT/ to this computer only; stop with Ctrl-C (everything saved is
    kept; open it again to resume).
    """
    from curate.review.data import ReviewData
    from curate.review.server import ReviewApp, make_server

    data = ReviewData.load(workspace, decisions)
    app = ReviewApp(data, reviewer=reviewer, queue=queue or ("removed" if decisions else "all"))
    server = make_server(app, port)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    click.echo(f"reviewing {workspace} ({len(data.items)} items), queue {app.queue}: "
               f"{len(app.queue_items(app.queue))} items")
    click.echo(f"open {url}" + ("?reviewer=NAME" if not app.reviewer else "") + "   (Ctrl-C stops; verdicts are saved as you go)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("stopped; run the same command again to resume")
    finally:
        server.server_close()
COMMANDS = (review,)
