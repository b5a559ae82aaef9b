"""`curate release` (make a release), `curate release verify`, `curate release diff`."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from curate.click_types import DefaultGroup
from curate.core.options import Option, click_options
from curate.release.options import RELEASE, ReleaseOptions

#: `curate release verify`'s: which release to fetch from a target.
VERIFY = [Option("name", help="With --version: fetch this release from LOCATION as a target."), Option("version")]


class ReleaseGroup(DefaultGroup):
    """`curate release WORKSPACE ...` makes a release; `verify` and `diff` are subcommands."""

    default_command = "create"


@click.group("release", cls=ReleaseGroup)
def release_group():
    """Publish, verify and compare versioned releases.

    \b
    curate release WORKSPACE --decisions DIR --name NAME --version X.Y.Z --to TARGET
    curate release verify LOCATION [--name NAME --version X.Y.Z]
    curate release diff A B
    """


@release_group.command("create")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click_options(RELEASE, into=ReleaseOptions)
def create(workspace, options):
    """Release the items kept in DECISIONS from WORKSPACE (also: `curate release WORKSPACE ...`)."""
    from curate.release import Release, release_line

    name, version = options.name, options.version
    manifest = Release(workspace, options).run()
    pub = manifest["published"]
    if pub.get("finished"):
        click.echo(f"finished {pub['finished']}")
    click.echo(f"released {name} {version}: {release_line(manifest)}")
    task = manifest["formats"]["lm_eval_task"]
    folder = {"local": pub["location"], "git": f"{pub['location']}/{name}/{version}"}.get(pub["kind"], "RELEASE")
    click.echo(f"lm-eval: lm_eval --model hf --model_args pretrained=MODEL --include_path {folder}/lm_eval_task "
               f"--tasks {task['task']}   (docs/release-formats.md)")


@release_group.command("verify")
@click.argument("location")
@click_options(VERIFY)
def verify(location, name, version):
    """Re-hash a release's files against its manifest; exit 1 on any difference."""
    from curate.release import verify_release

    problems = verify_release(location, name, version)
    for p in problems:
        click.echo(f"FAIL {p}")
    if problems:
        click.echo(f"{len(problems)} problem(s): the release does not match its manifest", err=True)
        sys.exit(1)
    click.echo("OK: every file matches the manifest")


@release_group.command("diff")
@click.argument("a")
@click.argument("b")
def diff(a, b):
    """Items added and removed from release A to release B (folders or manifest.json files)."""
    from curate.release import diff_releases

    d = diff_releases(a, b)
    click.echo(f"{d['from']} -> {d['to']}: +{len(d['added'])} -{len(d['removed'])} ={d['unchanged']}"
               + (" (rules changed)" if d["rules_changed"] else "") + (" (source changed)" if d["source_changed"] else ""))
    for row in d["added"]:
        click.echo(f"+ {row['item_id']}  (was removed by: {', '.join(row['reasons'])})")
    for row in d["removed"]:
        click.echo(f"- {row['item_id']}  (removed by: {', '.join(row['reasons'])})")


COMMANDS = (release_group,)
