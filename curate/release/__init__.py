"""Versioned releases of a filtered benchmark: build, publish to a target, verify, diff.

``Release`` builds the release in a temporary folder (data in the source's format, dataset
card, manifest), then hands it to the target, which publishes all of it or none of it.
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from curate.core.errors import CurateError
from curate.core.lock import claimed, remove_stale
from curate.items.stage import Stage
from curate.release.manifest import check_name_version, read_manifest
from curate.release.options import ReleaseOptions
from curate.release.targets import parse_target

# Building, verifying and diffing releases need pandas and the filter run (most of a second to
# import); they are imported where used, so that the CLI, which imports this package for every
# command, starts quickly.

__all__ = ["Release", "verify_release", "diff_releases", "fetched", "release_line", "where_published"]

STAGING_PREFIX = "benchcurate-release-"


class Release(Stage):
    """A versioned release: built in a temporary folder (data in the source's format, dataset card,
    manifest), then handed to the target, which publishes all of it or none of it. An existing
    version is refused before anything is built."""
    name = "release"
    timed = False  # the summary is the manifest

    Options = ReleaseOptions

    def execute(self) -> dict:
        from curate.release.package import build_release

        o = self.options
        check_name_version(o.name, o.version)
        tgt = parse_target(o.to)
        tgt.check_new(o.name, o.version)
        # Named after this process and held by it, so the next run can remove what a `kill -9` left behind.
        remove_stale(Path(tempfile.gettempdir()), rf"{STAGING_PREFIX}(\d+)-[a-z0-9_]+")
        with tempfile.TemporaryDirectory(prefix=f"{STAGING_PREFIX}{os.getpid()}-") as tmp, claimed(Path(tmp)):
            staging = Path(tmp) / "release"
            staging.mkdir()
            manifest = build_release(self.ws, staging, o)
            published = tgt.publish(staging, o.name, o.version)
        return {**manifest, "published": published}


def where_published(published: dict) -> str:
    """Where ``Release`` put a release, in words: the location, and a git target's commit and tag."""
    tag = f" (commit {published['commit'][:12]}, tag {published['tag']})" if "tag" in published else ""
    return published["location"] + tag


def release_line(manifest: dict) -> str:
    """What a release holds and where it went, as `curate release` and `curate audit` print it."""
    return (f"{manifest['counts']['kept']} of {manifest['counts']['items']} items, {len(manifest['files'])} files "
            f"+ manifest.json -> {where_published(manifest['published'])}")


@contextmanager
def fetched(location: str, name: str | None = None, version: str | None = None) -> Iterator[Path]:
    """A local folder holding the release: ``location`` itself when no name/version is given
    (a release folder or manifest file), else that version fetched from the target."""
    if name is None and version is None:
        yield Path(location)
        return
    if not (name and version):
        raise CurateError("give both --name and --version to fetch a release from a target")
    check_name_version(name, version)  # they become a path and a tag: "0.1.0/../0.2.0" would fetch 0.2.0
    with tempfile.TemporaryDirectory(prefix="benchcurate-fetch-") as tmp:
        yield parse_target(location).fetch(name, version, Path(tmp))


def verify_release(location: str, name: str | None = None, version: str | None = None) -> list[str]:
    """Problems found re-hashing a release's files against its manifest (empty: intact)."""
    from curate.release.manifest import verify_dir

    with fetched(location, name, version) as folder:
        problems = verify_dir(folder)
        if name is not None:  # the folder fetched as NAME VERSION must hold that release
            m = read_manifest(folder)
            if (m["name"], m["version"]) != (name, version):
                problems.append(f"manifest.json: names release {m['name']} {m['version']}, not {name} {version}")
        return problems


def diff_releases(a: str, b: str) -> dict:
    """Items added and removed between releases ``a`` and ``b`` (folders or manifest files)."""
    from curate.release.diff import diff_manifests

    return diff_manifests(read_manifest(a), read_manifest(b))
