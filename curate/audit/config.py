"""The `curate audit` configuration: one YAML file saying what to audit and how.

The file is checked against the audit schema first (``audit_schema``: ``schemas/audit.schema.json``
and the sections of stages it does not describe), then against what a schema cannot say, each
stage checking its own section (``AuditStage.check``: exactly one of ``benchmark.path`` /
``benchmark.hub``, batches only for Claude, a release needs a filter, ...). Every problem names
the config file and the dotted path of the bad key, e.g. ``audit.yaml, field 'scoring.modes[1]'``.

Each section then becomes its stage's runs, each with its options object (``AuditStage.from_config``,
through ``curate.core.config_section.Section``): input paths (``benchmark.path``,
``answers.imports[].path``, ``scoring.imports[].dir``, ``filter.rules``) are relative to the
config file, so a config travels with its data; output paths (``workspace``, ``analyze.out``,
``filter.out``, a local or git release target) are relative to the directory curate runs in.
``check-config`` and the plan print both resolved, as absolute paths.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import schemas
from curate.audit.stages import Run, line, ordered
from curate.core import strict_yaml
from curate.core.config_section import Section
from curate.core.errors import CurateError, InputError
from curate.core.reading import CONFIG_LIMIT, read_text

#: The embedded defaults: the offline demo (local SmolLM2 annotator and scorer, demo rules).
DEFAULT_CONFIG = Path(__file__).parents[1] / "demo" / "audit.yaml"


@dataclass(frozen=True)
class AuditConfig:
    """A checked config: its ``file``, the ``workspace`` every stage works in, and the ``runs`` of
    its stages in the order they run, each with its options."""
    file: Path
    workspace: Path
    runs: tuple[Run, ...] = ()
    raw: dict = field(default_factory=dict, compare=False, repr=False)  # the file as written

    def runs_of(self, stage: str) -> list[Run]:
        """The runs of the stage called ``stage`` ("score")."""
        return [run for run in self.runs if run.stage.name == stage]

    def options(self, stage: str) -> list:
        """The options of each run of the stage called ``stage``."""
        return [run.options for run in self.runs_of(stage)]

    def stages(self) -> list[tuple[type, list[Run]]]:
        """Each stage that runs, with its runs, in order."""
        out: list[tuple[type, list[Run]]] = []
        for run in self.runs:
            if not out or out[-1][0] is not run.stage:
                out.append((run.stage, []))
            out[-1][1].append(run)
        return out


def load_config(path: str | Path | None = None, *, cwd: str | Path | None = None,
                check_files: bool = True) -> AuditConfig:
    """The audit config in ``path`` (default: the embedded demo config), validated and resolved.

    Raises InputError naming the file and the bad key. With ``check_files`` the input files
    (benchmark data, rules) must exist, so a long audit cannot fail on a typo an hour in.
    """
    path = Path(path) if path is not None else DEFAULT_CONFIG
    data = read_yaml(path)
    problems = config_problems(data)
    if problems:
        key, message = problems[0]
        more = f" (and {len(problems) - 1} more problem{'s' * (len(problems) > 2)})" if len(problems) > 1 else ""
        raise InputError(message + more, path=str(path), field=key)
    config = build(data, file=path.resolve(), cwd=Path(cwd) if cwd else Path.cwd())
    clash = stage_problems(config)
    if clash:
        raise InputError(clash[0][1], path=str(path), field=clash[0][0])
    if check_files:
        missing = missing_inputs(config)
        if missing:
            key, where = missing[0]
            raise InputError(f"no such file or folder: {where}", path=str(path), field=key)
    return config


def read_yaml(path: Path) -> dict:
    """The YAML mapping in ``path``; syntax errors and repeated keys are named with their line."""
    text = read_text(path, CONFIG_LIMIT, "an audit config", missing="config file not found")
    data = strict_yaml.load_named(text, str(path))
    if not isinstance(data, dict):
        raise InputError(f"expected a YAML mapping of settings, got {type(data).__name__}", path=str(path))
    return data


def audit_schema() -> dict:
    """The audit schema: the schema file, with the section of each stage it does not describe
    (``AuditStage.SCHEMA``) added; `make schemas` writes the same into the file."""
    schema = schemas.load("audit")
    added = {stage.section: stage.SCHEMA for stage in ordered()
             if stage.SCHEMA is not None and stage.section not in schema["properties"]}
    return {**schema, "properties": {**schema["properties"], **added}} if added else schema


def config_problems(data: dict) -> list[tuple[str, str]]:
    """Every problem with a parsed config as (dotted key path, message); empty when valid."""
    validator = schemas.compiled(audit_schema())
    found = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    problems = [p for error in found for p in _explain(error)]
    return problems or [p for stage in ordered() if stage.section in data
                        for p in stage.check(data[stage.section], data)]


def build(data: dict, *, file: Path, cwd: Path) -> AuditConfig:
    """An AuditConfig from a config that passed ``config_problems``: each section as its
    stage's runs (a refused option value is an InputError naming its key)."""
    root = Section(data, "", file, cwd, data)
    runs = [run for stage in ordered() if data.get(stage.section) is not None
            for run in stage.from_config(root.at(stage.section))]
    return AuditConfig(file=file, workspace=root.output(data["workspace"]), runs=tuple(runs), raw=data)


def stage_problems(config: AuditConfig) -> list[tuple[str, str]]:
    """What a stage would refuse only after the stages before it were paid for, as (key,
    message): output folders that clash or cannot take the output (``output_problems``), and what
    a stage refuses from the config alone (a release of a benchmark whose license is not known)."""
    return output_problems(config) + [p for run in config.runs for p in run.stage.settled(run, config)]


def output_problems(config: AuditConfig) -> list[tuple[str, str]]:
    """Folders the stages write that would collide or that a stage would refuse, as (key,
    message). Every pair of output folders (the stages' ``outputs``: workspace, filter.out,
    analyze.out, a local or git release target) is compared: two stages writing one folder, or a
    folder inside another stage's output, either way round (each refuses a folder holding what
    it did not write, so the audit would stop half-way, or a release would land in the
    decisions); only a folder inside the workspace's is allowed. Then each folder as its stage
    checks it before writing (``AuditStage.refused``)."""
    folders = [(run, key, p) for run in config.runs for key, p in run.stage.outputs(run, config)]
    problems = []
    for i, (_, key, p) in enumerate(folders):
        for _, other, q in folders[:i]:
            if p == q:
                problems.append((key, f"the same folder as {other} ({p}); give each stage its own"))
            elif q in p.parents and other != "workspace":  # a report may sit inside the workspace folder
                problems.append((key, f"inside {other} ({q}), which that stage writes; give a folder outside it"))
            elif p in q.parents and key != "workspace":
                problems.append((key, f"holds {other} ({q}), which that stage writes; give a folder outside it"))
    return problems + [(key, why) for run, key, p in folders
                       if (why := _refused(run, key, p, config)) is not None]


def _refused(run: Run, key: str, folder: Path, config: AuditConfig) -> str | None:
    """What the stage writing ``folder`` would say when it came to write there (None: nothing),
    with its command-line option named by the config key."""
    from curate.core.atomic import check_writable

    try:
        why = run.stage.refused(run, key, folder, config)
        if why is None:
            check_writable(folder)
    except CurateError as exc:
        why = str(exc)
    return None if why is None else why.replace("--out", key).replace("--to", key)


def missing_inputs(config: AuditConfig) -> list[tuple[str, Path]]:
    """Input paths named by ``config`` that do not exist, as (key, path)."""
    return [(key, p) for run in config.runs for key, p in run.stage.inputs(run, config) if not p.exists()]


def describe(config: AuditConfig) -> list[str]:
    """One line per step the config asks for, in the order they run, for a plan or a summary."""
    return [line("workspace", str(config.workspace))] + [
        text for stage, runs in config.stages() for text in stage.describe(runs)]


#: A value left as the examples write what the user must fill in: ``<COMMIT-SHA>``.
PLACEHOLDER = re.compile(r"<[A-Za-z][A-Za-z0-9 _.-]*>")


def placeholders(data, where=()) -> list[tuple[str, str]]:
    """(key, message) for every value of the config as written that still holds a placeholder
    such as ``<COMMIT-SHA>``: the schema takes it as a string, and the stage that reads it
    (here the ingest of a Hub dataset at that revision) would fail only when it ran."""
    if isinstance(data, dict):
        return [p for key, value in data.items() for p in placeholders(value, (*where, key))]
    if isinstance(data, list):
        return [p for i, value in enumerate(data) for p in placeholders(value, (*where, i))]
    if isinstance(data, str) and (found := PLACEHOLDER.search(data)):
        return [(_key_path(where), f"{data!r} is a placeholder: replace {found.group()} with the real value")]
    return []


def _key_path(parts) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _explain(error) -> list[tuple[str, str]]:
    """One jsonschema error as (key path, message) pairs a config author can act on."""
    where = list(error.absolute_path)
    schema = error.schema
    if error.validator == "additionalProperties":
        allowed = ", ".join(schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(schema.get("properties", {})))
        return [(_key_path(where + [k]), f"unknown key; expected one of: {allowed}") for k in extra]
    if error.validator == "required":
        missing = error.message.split("'")[1]
        return [(_key_path(where + [missing]), "missing (required)")]
    if error.validator in ("minProperties", "maxProperties") and "local" in schema.get("properties", {}):
        return [(_key_path(where), f"give exactly one of: {', '.join(schema['properties'])}")]
    message = error.message
    if error.validator == "pattern" and schema.get("description"):
        message = f"{error.instance!r} is not valid here: {schema['description']}"
    elif error.validator == "pattern":
        message = f"{error.instance!r} is not valid here (expected to match {error.validator_value})"
    return [(_key_path(where) or "<root>", message)]
