"""The release manifest: what a release holds, where it came from, and how to check it.

``manifest.json`` sits beside the released files and lists the sha256 of every one of them,
so ``verify_dir`` can tell an intact release from a tampered or incomplete one wherever it was
copied to. The manifest is checked too: against ``schemas/manifest.schema.json``, against the
digest of its own content it carries (``content_sha256``, from manifest version 2), and for
consistency (counts, kept and removed ids, the stage table recomputed from the removal
reasons, the rules text against its hash, the data file's row count against the kept ids).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import schemas
from curate.core.errors import CurateError
from curate.items.canonical import canonical_json, sha256_text
from curate.items.sources import file_sha256

MANIFEST = "manifest.json"
MANIFEST_VERSION = 2
#: Exactly these spellings, nothing around them (``fullmatch``: no trailing newline, no
#: whitespace, ASCII digits only, no leading zeros, no separator at either end or twice).
NAME_RE = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*")
VERSION_RE = re.compile(r"(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)")
NAME_MAX = 96  # the Hub's limit for a repository name


def check_name_version(name: str, version: str) -> None:
    if not isinstance(name, str) or len(name) > NAME_MAX or not NAME_RE.fullmatch(name):
        raise CurateError(f"release name {name!r}: use lowercase ASCII letters and digits, separated by single "
                          f"'.', '_' or '-' (at most {NAME_MAX} characters)")
    if not isinstance(version, str) or not VERSION_RE.fullmatch(version):
        raise CurateError(f"release version {version!r}: use X.Y.Z (semantic versioning, e.g. 0.1.0; ASCII "
                          f"digits, no leading zeros, nothing before or after)")


def tag_name(name: str, version: str) -> str:
    return f"{name}-v{version}"


def release_files(folder: Path) -> list[str]:
    """Every plain file of a release folder but its manifest, hidden ones included, as posix
    paths. Symlinks are not followed (see ``odd_entries``)."""
    return sorted(rel for rel, path in _entries(folder)
                  if path.is_file() and not path.is_symlink() and rel != MANIFEST)


def odd_entries(folder: Path) -> list[str]:
    """What a release never holds: symlinks (to files or folders, dangling or not) and special
    files. A link could make a verified folder show other content than it was verified with."""
    out = []
    for rel, path in _entries(folder):
        if path.is_symlink():
            out.append(f"{rel}: a symlink (to {os.readlink(path)}), which a release never holds")
        elif not (path.is_file() or path.is_dir()):
            out.append(f"{rel}: not a plain file or folder, which a release never holds")
    return sorted(out)


def _entries(folder: Path) -> list[tuple[str, Path]]:
    """(posix path, path) of everything under ``folder``, not following symlinked folders."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        for n in dirnames + filenames:
            path = Path(dirpath) / n
            out.append((path.relative_to(folder).as_posix(), path))
    return out


def hash_files(folder: Path) -> dict[str, dict]:
    return {rel: {"sha256": file_sha256(folder / rel), "bytes": (folder / rel).stat().st_size}
            for rel in release_files(folder)}


def content_digest(manifest: dict) -> str:
    """sha256 of the manifest's canonical JSON without its own ``content_sha256``."""
    return sha256_text(canonical_json({k: v for k, v in manifest.items() if k != "content_sha256"}))


def read_manifest(path: str | Path) -> dict:
    """The manifest in a release folder (or a manifest file), schema-checked."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST
    return schemas.read_checked(path, "manifest", missing="no release manifest here")


def manifest_problems(m: dict) -> list[str]:
    """What does not add up inside a (schema-valid) manifest; empty when it is consistent."""
    out = []
    if m["manifest_version"] >= 2 and m.get("content_sha256") != content_digest(m):
        out.append("content differs from its recorded digest content_sha256 (edited after release)")
    try:
        check_name_version(m["name"], m["version"])
    except CurateError as exc:
        out.append(str(exc))
    outside = [f for f in m["files"] if Path(f).is_absolute() or ".." in Path(f).parts or f == MANIFEST]
    if outside:
        out.append(f"files lists paths outside the release: {', '.join(outside[:3])}")
    if sha256_text(m["rules"]["content"]) != m["rules"]["sha256"]:
        out.append("rules.content does not hash to rules.sha256 (the rules text was edited)")
    counts, kept, removed = m["counts"], m["kept"], m["removed"]
    if counts["kept"] != len(kept):
        out.append(f"counts.kept is {counts['kept']} but {len(kept)} ids are listed in kept")
    if counts["removed"] != len(removed):
        out.append(f"counts.removed is {counts['removed']} but {len(removed)} ids are listed in removed")
    if counts["items"] != counts["kept"] + counts["removed"]:
        out.append(f"counts.items is {counts['items']}, not kept + removed ({counts['kept'] + counts['removed']})")
    if sum(counts.get("kept_by_source", {}).values()) not in (0, counts["kept"]):
        out.append("counts.kept_by_source does not add up to counts.kept")
    both = sorted(set(kept) & set(removed))
    if both:
        out.append(f"{len(both)} ids are both kept and removed (first: {both[0]})")
    prefix = f"{m['source']['benchmark']}/{m['source']['split']}/"
    expected = {f"{prefix}{i}" for i in range(counts["items"])}
    strangers = sorted((set(kept) | set(removed)) - expected)
    if strangers:
        out.append(f"{len(strangers)} listed ids are not items of {prefix}0..{counts['items'] - 1} (first: {strangers[0]})")
    unlisted = sorted(expected - set(kept) - set(removed), key=row_of)
    if unlisted:
        out.append(f"{len(unlisted)} items are neither kept nor removed (first: {unlisted[0]})")
    if kept != sorted(kept, key=row_of):
        out.append("kept ids are not in row order")
    out += _stage_problems(m)
    return out


def _stage_problems(m: dict) -> list[str]:
    """The stage table recomputed from the removal reasons (kept items matched no stage)."""
    names = [s["stage"] for s in m["stages"]]
    unknown = sorted({r for reasons in m["removed"].values() for r in reasons} - set(names))
    if unknown:
        return [f"removal reasons name stages that are not in the stage table: {', '.join(unknown)}"]
    left, out = m["counts"]["items"], []
    for row in m["stages"]:
        matched = sum(row["stage"] in reasons for reasons in m["removed"].values())
        here = sum(reasons[0] == row["stage"] for reasons in m["removed"].values())
        left -= here
        if (row["matched"], row["removed_here"], row["left"]) != (matched, here, left):
            out.append(f"stage {row['stage']!r}: the table says matched {row['matched']}, removed {row['removed_here']}, "
                       f"left {row['left']}; the removal reasons give {matched}, {here}, {left}")
    return out


def row_of(item_id: str) -> int:
    """Row index from an item id ('benchmark/split/row'), for row order (-1 when there is none)."""
    tail = item_id.rsplit("/", 1)[-1]
    return int(tail) if tail.isascii() and tail.isdigit() else -1


def verify_dir(folder: str | Path) -> list[str]:
    """Problems with a release folder: the manifest inconsistent or edited, files missing,
    changed, or not in the manifest, a data file whose rows are not the kept items; empty when
    everything matches."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    problems = [f"{MANIFEST}: {p}" for p in manifest_problems(manifest)]
    recorded = {rel: meta for rel, meta in manifest["files"].items()
                if not (Path(rel).is_absolute() or ".." in Path(rel).parts or rel == MANIFEST)}
    present = set(release_files(folder))
    for rel, meta in sorted(recorded.items()):
        if rel not in present:
            problems.append(f"{rel}: missing")
        elif file_sha256(folder / rel) != meta["sha256"]:
            problems.append(f"{rel}: sha256 differs from the manifest (changed after release)")
    for rel in sorted(present - set(recorded)):
        problems.append(f"{rel}: not listed in the manifest")
    problems += odd_entries(folder)
    data = [rel for rel in recorded if rel.startswith("data/") and rel.endswith(".parquet") and rel in present]
    if data and not problems:
        import pyarrow.parquet as pq
        rows = sum(pq.ParquetFile(folder / rel).metadata.num_rows for rel in data)
        if rows != len(manifest["kept"]):
            problems.append(f"{', '.join(data)}: {rows} rows, but the manifest keeps {len(manifest['kept'])} items")
    return problems
