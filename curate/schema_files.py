"""The schema files written from code, so editors and other tools can read them as files.

- ``schemas/rules.schema.json``: the rules schema built from the condition kinds
  (``curate.filter.kinds.rules_schema``; `curate filter` validates against that, not the file).
- the built-in benchmark list of ``schemas/audit.schema.json`` (``benchmark.adapter``): the
  adapters' registry (``curate.items.adapters.known``), the list `curate init --benchmark` offers.
- the stage options of ``schemas/audit.schema.json`` (``scoring``'s dtype, device, ...): each
  stage's option table (``stage_options``; ``curate.core.options.schema_properties``), with
  ``answer_import``'s format, model and filter (`curate import-answers`' table) and
  ``score_import``'s format and dir (the registry ``scoring.imports``, as `curate import-scores
  --format` offers them).
- the section of each audit stage the file does not describe yet (``AuditStage.SCHEMA``;
  ``curate.audit.config.audit_schema``): a stage added to ``curate/audit/stages/`` as one file.

``python -m curate.schema_files`` (``make schemas``) rewrites what is stale; ``--check`` only
names it (exit 1). A test fails while either file differs from the code.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from schemas import SCHEMA_DIR

RULES, AUDIT = SCHEMA_DIR / "rules.schema.json", SCHEMA_DIR / "audit.schema.json"
#: Lines up to this width keep a JSON object or list on one line.
WIDTH = 118


def expected() -> dict[Path, str]:
    """Each generated file's text as the code makes it."""
    from curate.items.adapters import known
    from curate.filter.kinds import rules_schema

    audit = with_options(with_benchmarks(AUDIT.read_text(encoding="utf-8"), known()), stage_options())
    return {RULES: dump(rules_schema()) + "\n", AUDIT: with_stages(audit)}


def stage_options() -> dict[str, list]:
    """The audit schema's sections (``$defs`` names) whose options a stage's table declares."""
    from annotate.options import ANNOTATE
    from curate.filter.options import FILTER
    from curate.items.ingest_options import INGEST
    from curate.release.options import RELEASE
    from scoring.answer_options import IMPORT_ANSWERS
    from scoring.import_options import IMPORT_SCORES
    from scoring.options import SCORE

    return {"benchmark": INGEST, "annotator": ANNOTATE, "scoring": SCORE, "answer_import": IMPORT_ANSWERS,
            "score_import": IMPORT_SCORES, "filter": FILTER, "release": RELEASE}


def dump(value, indent: int = 0) -> str:
    """JSON with two-space indents, each object or list on one line when it fits in ``WIDTH``."""
    flat = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, (dict, list)) or not value or 2 * indent + len(flat) <= WIDTH:
        return flat
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(value, list):
        parts = [inner + dump(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(parts) + "\n" + pad + "]"
    parts = [f"{inner}{json.dumps(k)}: {dump(v, indent + 1)}" for k, v in value.items()]
    return "{\n" + ",\n".join(parts) + "\n" + pad + "}"


def with_benchmarks(text: str, names: list[str]) -> str:
    """The audit schema's text with ``names`` as benchmark.adapter's enum, the rest of the
    (hand-written) file exactly as it is."""
    adapter = json.loads(text)["$defs"]["benchmark"]["properties"]["adapter"]
    old = json.dumps(adapter["enum"])
    if text.count(old) != 1:
        raise SystemExit(f"{AUDIT}: benchmark.adapter's enum is not written as one line {old}")
    return text.replace(old, json.dumps(list(names)))


def with_stages(text: str) -> str:
    """The audit schema's text with the section of every audit stage it does not describe added
    to its properties (``curate.audit.config.audit_schema``); unchanged when it describes them all."""
    from curate.audit.config import audit_schema

    written = json.loads(text)["properties"]
    added = {key: value for key, value in audit_schema()["properties"].items() if key not in written}
    end = '\n  },\n  "$defs"'  # where the top-level properties close
    if not added:
        return text
    if text.count(end) != 1:
        raise SystemExit(f"{AUDIT}: its properties do not close once before $defs")
    lines = "".join(f",\n    {json.dumps(key)}: {dump(value, 2)}" for key, value in added.items())
    return text.replace(end, lines + end)


def with_options(text: str, sections: dict[str, list]) -> str:
    """The audit schema's text with each option-table property of ``sections`` as the table
    declares it (one line per property), the rest of the file exactly as it is."""
    from curate.core.options import schema_properties

    defs = json.loads(text)["$defs"]
    for section, table in sections.items():
        written = defs[section]["properties"]
        for name, prop in schema_properties(table).items():
            if name not in written:
                raise SystemExit(f"{AUDIT}: $defs.{section} has no property {name!r}; add it (one line)")
            old = f"{json.dumps(name)}: {json.dumps(written[name])}"
            if text.count(old) != 1:
                raise SystemExit(f"{AUDIT}: $defs.{section}.{name} is not written once as one line {old}")
            text = text.replace(old, f"{json.dumps(name)}: {json.dumps(prop)}")
    return text


def stale() -> list[Path]:
    """The generated files whose text is not what the code makes."""
    return [path for path, text in expected().items() if path.read_text(encoding="utf-8") != text]


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print("usage: python -m curate.schema_files [--check]", file=sys.stderr)
        return 2
    found = stale()
    if argv == ["--check"]:
        for path in found:
            print(f"{path}: stale; run `make schemas`")
        return 1 if found else 0
    from curate.core.atomic import write_text

    texts = expected()
    for path in found:
        write_text(path, texts[path])
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
