"""``release``: the items the filter kept, released (``curate.release.Release``) to a local
folder, a git repository or the Hub. A version is immutable: when it exists with the same kept
items the stage is done, otherwise the audit stops and asks for a new version."""
from __future__ import annotations

from pathlib import Path

from curate.audit.stages import AuditStage, Outcome, Run, line
from curate.core.errors import CurateError
from curate.release import Release

#: The config's target kinds as `curate release --to` writes them.
PREFIX = {"local": "", "git": "git:", "hub": "hf:"}


def target(to: str) -> tuple[str, Path | str]:
    """(config kind, location) of a ``--to`` spec: a local or git folder (a Path), or a Hub id."""
    kind = next(k for k, prefix in reversed(PREFIX.items()) if to.startswith(prefix))
    location = to[len(PREFIX[kind]):]
    return kind, location if kind == "hub" else Path(location)


class Step(AuditStage):
    name, section, ORDER = "release", "release", 70

    @classmethod
    def check(cls, section: dict, config: dict) -> list[tuple[str, str]]:
        if "filter" not in config:
            return [("release", "a release is made from the filter's decisions: add a 'filter' section")]
        return []

    @classmethod
    def from_config(cls, section) -> list[Run]:
        [(kind, value)] = section["target"].items()
        to = PREFIX[kind] + (value if kind == "hub" else str(section.output(value)))
        decided = section.other("filter")
        return [Run(cls, section.key, Release.from_config(section, decisions=decided.output(decided["out"]), to=to))]

    @classmethod
    def settled(cls, run: Run, config) -> list[tuple[str, str]]:
        """A benchmark whose license the toolkit does not know needs one given."""
        from curate.release.card import license_for

        benchmark = config.options("ingest")[0].adapter.name
        if not license_for(benchmark, run.options.license):
            return [(f"{cls.section}.license", f"missing: the license of benchmark {benchmark!r} is not known here, "
                                               f"so the release needs one (a license id such as mit)")]
        return []

    @classmethod
    def inputs(cls, run: Run, config) -> list[tuple[str, Path]]:
        """A git target is one: the repository is committed to, not made."""
        kind, location = target(run.options.to)
        return [(f"{cls.section}.target.git", location)] if kind == "git" else []

    @classmethod
    def outputs(cls, run: Run, config) -> list[tuple[str, Path]]:
        kind, location = target(run.options.to)
        return [] if kind == "hub" else [(f"{cls.section}.target.{kind}", location)]

    @classmethod
    def refused(cls, run: Run, key: str, folder: Path, config) -> str | None:
        from curate.release.targets import VersionExists, parse_target

        o = run.options
        if folder.exists() or target(o.to)[0] == "local":  # a git target must exist: an input
            try:
                parse_target(o.to).check_new(o.name, o.version)
            except VersionExists:
                pass  # the release stage checks that it holds these decisions' items
        return None

    @classmethod
    def environment(cls, run: Run) -> list[tuple[str, str]]:
        """The Hub token a release to the Hub publishes with."""
        from huggingface_hub import get_token

        if target(run.options.to)[0] == "hub" and not get_token():
            return [(f"{cls.section}.target.hub", "publishing to the Hub needs a token: set HF_TOKEN (or run "
                                                  "`hf auth login`); none is set")]
        return []

    @classmethod
    def describe(cls, runs: list[Run]) -> list[str]:
        o = runs[0].options
        kind, location = target(o.to)
        return [line("release", f"{o.name} {o.version} -> {kind} {location}")]

    @classmethod
    def run(cls, run: Run, config) -> list[Outcome]:
        import pandas as pd

        from curate.release import fetched, release_line
        from curate.release.manifest import read_manifest
        from curate.release.targets import VersionExists, parse_target

        o = run.options
        try:
            parse_target(o.to).check_new(o.name, o.version)
        except VersionExists:  # done if it holds exactly these decisions' items (other errors are raised)
            with fetched(o.to, o.name, o.version) as folder:
                kept = set(read_manifest(folder)["kept"])
            decided = pd.read_parquet(o.decisions / "decisions.parquet")
            if kept == set(decided.loc[decided["kept"], "item_id"]):
                return [Outcome("release", "skipped", f"{o.name} {o.version} already released at {o.to}")]
            raise CurateError(f"{o.name} {o.version} exists at {o.to} with other items; releases are immutable: "
                              f"set a new release.version in {config.file}") from None
        manifest = Release(config.workspace, o).run()
        return [Outcome("release", "ran", f"{o.name} {o.version}: {release_line(manifest)}", manifest)]

    @classmethod
    def summary(cls, runs: list[Run], outcomes: list[Outcome], config) -> list[str]:
        o = runs[0].options
        return [line("release", f"{o.name} {o.version} at {o.to}")] if cls.name in {x.stage for x in outcomes} else []
