"""The options of `curate release` (and the audit config's ``release`` keys of the same names),
declared once: ``curate.core.options`` derives the click options, the config schema's properties and
the defaults ``curate.release.make_release`` takes from this table. The name and version
grammars are ``curate.release.manifest``'s, so the command, the config and a manifest check
agree. Not here: ``--to`` (the config writes the target as an object, ``$defs.target``) and the
decisions folder (the audit's filter output)."""
from __future__ import annotations

from curate.core.options import Option, defaults
from curate.release.manifest import NAME_MAX, NAME_RE, VERSION_RE

RELEASE = [
    Option("name", required=True, pattern=f"^{NAME_RE.pattern}(?![\\s\\S])", max_length=NAME_MAX,
           help="Release name (lowercase, digits, . _ -).",
           config="Release name: lowercase ASCII letters and digits separated by single '.', '_' or '-'."),
    Option("version", required=True, pattern=f"^{VERSION_RE.pattern}(?![\\s\\S])",
           help="X.Y.Z; an existing version is refused.",
           config="Semantic version X.Y.Z; a released version is never overwritten."),
    Option("license", help="License id, when the benchmark's is not known.",
           config="License id of the released data (e.g. mit), for a benchmark whose license the toolkit does not "
                  "know; the source's license applies to a release."),
    Option("changelog", help="What changed since the previous version (shown on the card)."),
]

DEFAULTS = defaults(RELEASE)
