"""The `curate audit` configuration: one YAML file saying what to audit and how.

The file is checked against ``schemas/audit.schema.json`` first, then against the rules a
schema cannot say (exactly one of ``benchmark.path`` / ``benchmark.hub``, ``columns`` only for
the generic adapter, batches only for Claude, a Claude model with a known price, a release needs
a filter). Every problem names the
config file and the dotted path of the bad key, e.g. ``audit.yaml, field 'scoring.modes[1]'``.

Input paths (``benchmark.path``, ``answers.imports[].path``, ``scoring.imports[].dir``,
``filter.rules``) are relative to the config file, so a config travels with its data; output
paths (``workspace``, ``analyze.out``, ``filter.out``, a local or git release target) are relative
to the directory curate runs in. ``load_config`` returns them
resolved to absolute paths.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path


import schemas
from annotate.options import DEFAULTS as ANNOTATE_DEFAULTS
from curate.core import strict_yaml
from curate.items.adapters.columns import adapter_keywords
from curate.core.errors import CurateError, InputError
from curate.filter.options import FILTER
from curate.items.ingest_options import DEFAULTS as INGEST_DEFAULTS
from curate.core.reading import CONFIG_LIMIT, read_text
from scoring import model_spec
from curate.core.options import in_config
from scoring.answer_options import IMPORT_ANSWERS, ImportAnswersOptions
from scoring.options import DEFAULTS as SCORE_DEFAULTS, SCORE

#: The embedded defaults: the offline demo (local SmolLM2 annotator and scorer, demo rules).
DEFAULT_CONFIG = Path(__file__).parents[1] / "demo" / "audit.yaml"


@dataclass(frozen=True)
class Benchmark:
    adapter: str
    path: Path | None
    hub: str | None
    columns: dict  # generic adapter options, keyword names of curate.items.adapters.generic.Generic
    # The rest as `curate init` takes them (curate/items/ingest_options.py: defaults, types, the schema).
    split: str | None = INGEST_DEFAULTS["split"]  # None: the benchmark's own (built-ins), else validation
    config: str | None = INGEST_DEFAULTS["config"]
    revision: str | None = INGEST_DEFAULTS["revision"]
    delimiter: str | None = INGEST_DEFAULTS["delimiter"]
    encoding: str | None = INGEST_DEFAULTS["encoding"]
    limit: int | None = INGEST_DEFAULTS["limit"]

    @property
    def data(self) -> str | None:
        """What ``curate.items.ingest.ingest(data=...)`` takes: the local path or the Hub id (None: a
        built-in benchmark's own Hub id)."""
        return str(self.path) if self.path is not None else self.hub

    def source(self) -> dict:
        """The keyword arguments of ``curate.items.ingest.ingest`` that say what to read."""
        from curate.items.adapters import hub_default
        data, split, config = hub_default(self.make_adapter(), self.data, self.split, self.config)
        return {"data": data, "split": split, "config": config, "revision": self.revision, "limit": self.limit,
                "delimiter": self.delimiter, "encoding": self.encoding}

    def make_adapter(self):
        from curate.items.adapters import get_adapter
        return get_adapter(self.adapter, **self.columns)


@dataclass(frozen=True)
class Annotator:
    annotator: str  # "anthropic:MODEL" or "local:NAME" (a bare NAME in the file is written out so)
    rounds: tuple[int, ...]
    # as `curate annotate` takes them (annotate/options.py: defaults, types, the schema)
    batch: bool = ANNOTATE_DEFAULTS["batch"]
    concurrency: int = ANNOTATE_DEFAULTS["concurrency"]
    max_cost: float | None = ANNOTATE_DEFAULTS["max_cost"]

    @property
    def backend(self) -> str:
        return model_spec.parse(self.annotator)[0]


@dataclass(frozen=True)
class ScoreImport:
    format: str  # study-csv
    dir: Path


@dataclass(frozen=True)
class AnswerImport:
    """One of ``answers.imports``: the files (``path``) and the options `curate import-answers`
    takes (``scoring.answer_options``: format, model, filter)."""
    path: Path
    options: ImportAnswersOptions


@dataclass(frozen=True)
class Scoring:
    models: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    formulations: tuple[str, ...] | None = None  # None: the workspace's own
    imports: tuple[ScoreImport, ...] = ()  # run before the models are scored
    # The rest as `curate score` takes them: the config keys of scoring/options.py's table that the
    # config gives (defaults, types and the schema come from that table).
    given: dict = field(default_factory=dict)

    def options_for(self, model: str):
        """The score stage's options for ``model`` (``scoring.options.ScoreOptions``)."""
        from scoring.options import ScoreOptions
        return ScoreOptions(model=model, modes=list(self.modes), formulations=list(self.formulations or ()) or None,
                            **self.given)

    def __getattr__(self, name: str):
        """A scoring option (``scoring.dtype``) as the score stage will take it: given, else its
        default (the table's)."""
        if name in SCORE_DEFAULTS:
            return self.given.get(name, SCORE_DEFAULTS[name])
        raise AttributeError(name)


@dataclass(frozen=True)
class Release:
    name: str
    version: str
    target_kind: str  # local | git | hub
    target: Path | str  # a Path for local and git, a repo id for hub
    license: str | None = None  # needed when the toolkit does not know the benchmark's license

    @property
    def spec(self) -> str:
        """The target as `curate release --to` and ``make_release`` take it."""
        return {"local": "{}", "git": "git:{}", "hub": "hf:{}"}[self.target_kind].format(self.target)


@dataclass(frozen=True)
class AuditConfig:
    file: Path
    workspace: Path
    benchmark: Benchmark
    annotators: tuple[Annotator, ...] = ()
    scoring: Scoring | None = None
    answer_imports: tuple[AnswerImport, ...] = ()  # run right after the ingest
    analyze_out: Path | None = None
    filter_rules: Path | None = None
    filter_out: Path | None = None
    filter_options: dict = field(default_factory=dict)  # annotator / tokenizer overrides for run_filter
    release: Release | None = None
    raw: dict = field(default_factory=dict, compare=False, repr=False)  # the file as written


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


def config_problems(data: dict) -> list[tuple[str, str]]:
    """Every problem with a parsed config as (dotted key path, message); empty when valid."""
    validator = schemas.validator("audit")
    found = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    problems = [p for error in found for p in _explain(error)]
    return problems or _cross_key_problems(data)


def stage_problems(config: AuditConfig) -> list[tuple[str, str]]:
    """What a stage would refuse only after the stages before it were paid for, as (key,
    message): output folders that clash or cannot take the output (``output_problems``), and a
    release of a benchmark whose license is not known and not given."""
    from curate.release.card import license_for

    problems = output_problems(config)
    benchmark = config.benchmark.make_adapter().name
    if config.release and not license_for(benchmark, config.release.license):
        problems.append(("release.license", f"missing: the license of benchmark {benchmark!r} is not known here, "
                                            f"so the release needs one (a license id such as mit)"))
    return problems


def output_problems(config: AuditConfig) -> list[tuple[str, str]]:
    """Folders the stages write that would collide or that a stage would refuse, as (key,
    message). Every pair of output folders (workspace, analyze.out, filter.out, a local or git
    release target) is compared: two stages writing one folder, or a folder inside another
    stage's output, either way round (each refuses a folder holding what it did not write, so the
    audit would stop half-way, or a release would land in the decisions); only a folder inside the
    workspace's is allowed. Then each folder as its stage checks it before writing: a file where
    a folder is expected (the path itself or a part of it), a folder holding something else
    than that stage's earlier output, a release target that is no git work tree."""
    folders = output_folders(config)
    problems = []
    for i, (key, p) in enumerate(folders):
        for other, q in folders[:i]:
            if p == q:
                problems.append((key, f"the same folder as {other} ({p}); give each stage its own"))
            elif q in p.parents and other != "workspace":  # a report may sit inside the workspace folder
                problems.append((key, f"inside {other} ({q}), which that stage writes; give a folder outside it"))
            elif p in q.parents and key != "workspace":
                problems.append((key, f"holds {other} ({q}), which that stage writes; give a folder outside it"))
    for key, p in folders:
        if (why := _refused_by_stage(config, key, p)) is not None:
            problems.append((key, why))
    return problems


def output_folders(config: AuditConfig) -> list[tuple[str, Path]]:
    """(key, path) of every folder an audit writes (a Hub release writes none here)."""
    folders = [("workspace", config.workspace), ("analyze.out", config.analyze_out), ("filter.out", config.filter_out)]
    if config.release and config.release.target_kind != "hub":
        folders.append((f"release.target.{config.release.target_kind}", config.release.target))
    return [(key, p) for key, p in folders if p is not None]


def _refused_by_stage(config: AuditConfig, key: str, folder: Path) -> str | None:
    """What the stage writing ``folder`` would say when it came to write there (None: nothing),
    with its command-line option named by the config key."""
    from curate.analyses.outdir import check_report_dir
    from curate.core.atomic import check_writable
    from curate.filter.engine import check_out_dir
    from curate.release.targets import VersionExists, parse_target
    from curate.items.store import DB_NAME, check_new_workspace

    try:
        if key == "workspace" and folder.exists() and not folder.is_dir():
            return f"{folder} is a file; name a folder for the workspace"
        if key == "workspace":
            if not (folder / DB_NAME).is_file():  # an existing workspace is resumed
                check_new_workspace(folder)
        elif key == "analyze.out":
            check_report_dir(folder)
        elif key == "filter.out":
            check_out_dir(folder)
        elif folder.exists() or config.release.target_kind == "local":  # a git target must exist: an input
            r = config.release
            try:
                parse_target(r.spec).check_new(r.name, r.version)
            except VersionExists:
                pass  # the release stage checks that it holds these decisions' items
        check_writable(folder)
    except CurateError as exc:
        return str(exc).replace("--out", key).replace("--to", key)
    return None


def missing_inputs(config: AuditConfig) -> list[tuple[str, Path]]:
    """Input paths named by ``config`` that do not exist, as (key, path); a git release target
    is one (the repository is committed to, not made)."""
    imports = config.scoring.imports if config.scoring else ()
    wanted = [("benchmark.path", config.benchmark.path), ("filter.rules", config.filter_rules),
              *((f"scoring.imports[{i}].dir", imp.dir) for i, imp in enumerate(imports)),
              *((f"answers.imports[{i}].path", imp.path) for i, imp in enumerate(config.answer_imports))]
    if config.release and config.release.target_kind == "git":
        wanted.append(("release.target.git", config.release.target))
    return [(key, p) for key, p in wanted if p is not None and not p.exists()]


def build(data: dict, *, file: Path, cwd: Path) -> AuditConfig:
    """An AuditConfig from a config that passed ``config_problems``, defaults filled in."""
    here = file.parent

    def output(p):
        return (cwd / Path(p).expanduser()).resolve()  # "~/ws" is the home folder's ws, as in a shell

    b = data["benchmark"]
    benchmark = Benchmark(
        adapter=b["adapter"], path=(here / b["path"]).resolve() if "path" in b else None,
        hub=b.get("hub"), revision=b.get("revision"), split=b.get("split"),
        limit=b.get("limit"), columns=adapter_keywords(b.get("columns")), config=b.get("config"),
        delimiter=b.get("delimiter"), encoding=b.get("encoding"))
    annotators = tuple(Annotator(_annotator(a["annotator"]), tuple(a["rounds"]), **_given(a, "batch", "concurrency", "max_cost"))
                       for a in data.get("annotators") or [])
    s, f, r = data.get("scoring"), data.get("filter"), data.get("release")
    scoring = None
    if s:
        imports = tuple(ScoreImport(i["format"], (here / i["dir"]).resolve()) for i in s.get("imports") or ())
        given = _given(s, *(o.name for o in in_config(SCORE)))
        if given.get("fewshot_pool") not in (None, "evaluated"):  # a file, relative to the config
            given["fewshot_pool"] = str((here / given["fewshot_pool"]).resolve())
        scoring = Scoring(tuple(s.get("models", ())), tuple(s.get("modes", ())),
                          tuple(s["formulations"]) if "formulations" in s else None, imports=imports, given=given)
    answer_imports = tuple(AnswerImport((here / a["path"]).resolve(),
                                        ImportAnswersOptions(**_given(a, *(o.name for o in in_config(IMPORT_ANSWERS)))))
                           for a in (data.get("answers") or {}).get("imports", ()))
    release = None
    if r:
        [(kind, target)] = r["target"].items()
        release = Release(r["name"], r["version"], kind, target if kind == "hub" else output(target),
                          r.get("license"))
    return AuditConfig(
        file=file, workspace=output(data["workspace"]), benchmark=benchmark, annotators=annotators,
        scoring=scoring, answer_imports=answer_imports,
        analyze_out=output(data["analyze"]["out"]) if data.get("analyze") else None,
        filter_rules=(here / f["rules"]).resolve() if f else None, filter_out=output(f["out"]) if f else None,
        filter_options=_given(f, *(o.name for o in in_config(FILTER))) if f else {},  # as `curate filter` takes them
        release=release, raw=data)


def _given(section: dict, *keys: str) -> dict:
    """The optional keys the config sets; the rest take the dataclass defaults."""
    return {k: section[k] for k in keys if k in section}


def _annotator(spec: str) -> str:
    """An annotator as annotations store it: its backend written out (scoring.model_spec, the
    grammar of every stage); a reviewer's verdicts (human:NAME) are no model and stay as given."""
    return spec if spec.startswith("human:") else model_spec.canonical(spec, "annotator")


def _cross_key_problems(data: dict) -> list[tuple[str, str]]:
    problems = []
    b = data["benchmark"]
    builtin = b["adapter"] not in ("generic", "hellaswag")
    if ("path" in b and "hub" in b) or ("path" not in b and "hub" not in b and not builtin):
        problems.append(("benchmark", "give exactly one of 'path' (a local file or folder) or 'hub' (a Hub dataset id)"))
    # 'config' goes with either: a Hub dataset's configuration, or one per-config subfolder of a
    # local Hub-layout folder (as `curate ingest --config`).
    if "revision" in b and "path" in b:
        problems.append(("benchmark.revision", "a revision pins a Hub dataset; it needs 'hub', not 'path'"))
    for key in ("delimiter", "encoding"):
        if key in b and "path" not in b:
            problems.append((f"benchmark.{key}", f"the {key} of a local file needs 'path'"))
    if b["adapter"] == "generic" and "columns" not in b:
        problems.append(("benchmark.columns", "the generic adapter needs a column mapping (question, choices, answer)"))
    if b["adapter"] != "generic" and "columns" in b:
        problems.append(("benchmark.columns", f"the {b['adapter']} adapter takes no column mapping"))
    seen = {}
    for i, a in enumerate(data.get("annotators") or []):
        backend, name = model_spec.parse(a["annotator"], "annotator")
        if a.get("batch") and backend != "anthropic":
            problems.append((f"annotators[{i}].batch", "the Message Batches API is for anthropic: annotators only"))
        if backend == "anthropic" and (unpriced := _unpriced(name)):
            problems.append((f"annotators[{i}].annotator", unpriced))
        cost = a.get("max_cost")
        if isinstance(cost, float) and not math.isfinite(cost):  # YAML's .nan and .inf pass the schema
            problems.append((f"annotators[{i}].max_cost", f"{cost} is not an amount of US dollars; give a finite number"))
        if (spec := _annotator(a["annotator"])) in seen:
            problems.append((f"annotators[{i}].annotator",
                             f"{a['annotator']!r} is listed twice (also annotators[{seen[spec]}]); give it one entry with all its rounds"))
        seen.setdefault(spec, i)
    wanted = (data.get("filter") or {}).get("annotator")
    named = [a["annotator"] for a in data.get("annotators") or []]
    # A reviewer's verdicts (human:NAME) come from `curate review`, never from a planned stage.
    if wanted and named and _annotator(wanted) not in seen and not wanted.startswith("human:"):
        problems.append(("filter.annotator", f"{wanted!r} is not one of this audit's annotators ({', '.join(named)})"))
    scoring = data.get("scoring")
    if scoring is not None and not scoring.get("models") and not scoring.get("imports"):
        problems.append(("scoring", "give models (with modes) to score, imports to import, or both"))
    problems += _other_backends_settings(scoring or {})
    if "release" in data and "filter" not in data:
        problems.append(("release", "a release is made from the filter's decisions: add a 'filter' section"))
    return problems


def _other_backends_settings(scoring: dict) -> list[tuple[str, str]]:
    """A backend's own setting (``prefix_cache_mb`` of the engine, ``tensor_parallel_size`` of
    vllm, ...) given while the models run on another backend, which would ignore it: refused, as
    `curate score -o` refuses it."""
    backend = scoring.get("backend", "engine")
    return [(f"scoring.{o.name}", f"is a setting of the {o.backend} backend; scoring.backend is {backend}, which "
                                  "would ignore it")
            for o in in_config(SCORE) if o.backend and o.backend != backend and o.name in scoring]


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


def _unpriced(model: str) -> str | None:
    """Why a Claude model cannot be annotated with a cost ledger, or None when its price is known."""
    from curate.anthropic_api.prices import price

    try:
        price(model)
    except CurateError as exc:
        return str(exc)
    return None


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


def describe(config: AuditConfig) -> list[str]:
    """One line per step the config asks for, for a plan or a summary."""
    b = config.benchmark
    src = b.source()  # a built-in without path or hub reads its own Hub id and usual split
    source = str(b.path) if b.path else f"{src['data']}@{b.revision or 'unpinned'}"
    lines = [f"workspace  {config.workspace}",
             f"ingest     {b.adapter}: {source} (split {src['split']}{f', first {b.limit}' if b.limit else ''})"]
    for imp in config.answer_imports:
        o = imp.options
        given = "".join(f", {k} {v}" for k, v in (("model", o.model), ("filter", o.filter)) if v is not None)
        lines.append(f"answers    import {o.format} answers from {imp.path}" + (f" ({given[2:]})" if given else ""))
    for a in config.annotators:
        extras = ["batch API"] * a.batch + [f"concurrency {a.concurrency}"] + \
                 ([f"max ${a.max_cost:g}/round"] if a.max_cost is not None else [])
        lines.append(f"annotate   {a.annotator} round{'s' * (len(a.rounds) > 1)} "
                     f"{', '.join(map(str, a.rounds))} ({', '.join(extras)})")
    if config.scoring:
        s = config.scoring
        for imp in s.imports:
            lines.append(f"score      import {imp.format} scores from {imp.dir}")
        if s.models:
            lines.append(f"score      {', '.join(s.models)} on {', '.join(s.modes)} ({s.dtype}, {s.device})")
    if config.analyze_out:
        lines.append(f"analyze    -> {config.analyze_out}")
    if config.filter_rules:
        extras = "".join(f", {k} {v}" for k, v in config.filter_options.items())
        lines.append(f"filter     {config.filter_rules} -> {config.filter_out}{extras}")
    if config.release:
        r = config.release
        lines.append(f"release    {r.name} {r.version} -> {r.target_kind} {r.target}")
    return lines
