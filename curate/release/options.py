"""The options of `curate release` (and the audit config's ``release`` keys of the same names),
declared once: ``curate.core.options`` derives the click options, the config schema's properties and
the options object (``ReleaseOptions``) ``curate.release.Release`` takes whole. The name and
version grammars are ``curate.release.manifest``'s, so the command, the config and a manifest
check agree. ``--to`` and ``--decisions`` are no config keys: the config writes the target as an
object (``$defs.target``), and the decisions are the audit's filter output."""
from __future__ import annotations

from curate.core.options import Option, defaults, options_class
from curate.release.manifest import NAME_MAX, NAME_RE, VERSION_RE, check_name_version


def release_name(value: str) -> str:
    check_name_version(value, "0.0.0")  # its own words: what a release name is
    return value


def release_version(value: str) -> str:
    check_name_version("name", value)
    return value

RELEASE = [
    Option("decisions", flag="--decisions", required=True, path="folder", help="Output folder of `curate filter`."),
    Option("name", required=True, pattern=f"^{NAME_RE.pattern}(?![\\s\\S])", max_length=NAME_MAX, convert=release_name,
           help="Release name (lowercase, digits, . _ -).",
           config="Release name: lowercase ASCII letters and digits separated by single '.', '_' or '-'."),
    Option("version", required=True, pattern=f"^{VERSION_RE.pattern}(?![\\s\\S])", convert=release_version,
           help="X.Y.Z; an existing version is refused.",
           config="Semantic version X.Y.Z; a released version is never overwritten."),
    Option("to", flag="--to", required=True,
           help="PATH (local folder), git:REPO (commit + tag NAME-vX.Y.Z) or hf:OWNER/DATASET (Hugging Face Hub)."),
    Option("license", help="License id, when the benchmark's is not known.",
           config="License id of the released data (e.g. mit), for a benchmark whose license the toolkit does not "
                  "know; the source's license applies to a release."),
    Option("changelog", help="What changed since the previous version (shown on the card)."),
]

DEFAULTS = defaults(RELEASE)
ReleaseOptions = options_class("ReleaseOptions", RELEASE)
