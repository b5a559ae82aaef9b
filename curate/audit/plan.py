"""Will an audit have everything its filter rules read? Checked before anything is spent.

The filter stage comes after annotation and scoring, so an input it lacks (an annotator's round,
a model's scores in some mode and normalization, a tokenizer that cannot be loaded) would only
show up once both were paid for. ``plan_problems`` compares what the rules read with what the
planned stages will provide -- annotators and their rounds, scored models x modes x shot counts,
imported score files (read by name only, and lm-eval's results files for their shot counts), the
models whose answers ``answers.imports`` stores (``read_answer_imports``) --
plus what the workspace already holds, every shot count, when it exists, and
names each gap with the config key that would fill it. It also checks that every model the audit
loads (scorers, local annotators, tokenizers) can be found. ``before_spending`` adds what else
would stop an audit after it had paid for Claude's rounds: a placeholder left in the config, a
key the environment lacks, score imports whose rows cannot be the items the ingest makes, answer
imports that cannot be read as answers to them, a Hub source the Hub does not have; what needs an
unreachable Hub it lists as unchecked.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from curate.audit.config import AuditConfig
from curate.items.formulations import ALL_ROTATIONS
from curate.items.store import DB_NAME
from scoring.options import DEFAULTS as SCORE_DEFAULTS, shot_counts, wants_seq_mean

SEQ_MEAN_DEFAULT = SCORE_DEFAULTS["seq_mean"]  # the audit scores with curate score's default

#: What `curate score` stores for every option (see scoring/normalize.py).
SCORED = ("sum", "token", "char", "byte", "seq_mean")
#: Stored score columns -> the normalizations they give.
COLUMNS = {"logprob_sum": ("sum",), "n_tokens": ("token",), "n_chars": ("char",), "n_bytes": ("byte",),
           "seq_mean": ("seq_mean",), "study_sum": ("study_sum",), "study_byte_mean": ("study_byte_mean",)}


@dataclass
class Supply:
    """What will be in the workspace after the planned stages, and where each part comes from.
    Scores are keyed by formulation and shot count too; ``ALL_ROTATIONS`` stands for a model's
    rotated letters."""
    annotations: dict[tuple[str, int], str] = field(default_factory=dict)              # (annotator, round) -> source
    # (model, mode, formulation, fewshot) -> {norm: source}
    scores: dict[tuple[str, str, str, int], dict[str, str]] = field(default_factory=dict)
    generations: set[tuple[str, str]] = field(default_factory=set)                     # (model, mode), stored only
    answers: dict[str, str] = field(default_factory=dict)                              # model -> source
    answers_unknown: list[str] = field(default_factory=list)  # imports whose models are not known before the ingest

    def add_scores(self, model: str, mode: str, formulation: str, normalizations, source: str,
                   fewshot: int = 0) -> None:
        # Scoring letters+rotations stores the letters formulation and each rotation of it.
        for f in ("letters", ALL_ROTATIONS) if formulation == ALL_ROTATIONS else (formulation,):
            for n in normalizations:
                self.scores.setdefault((model, mode, f, int(fewshot)), {}).setdefault(n, source)

    def shot_models(self, models, mode: str, formulation: str) -> dict[int, set[str]]:
        """Shot count -> which of ``models`` will have scores in ``mode`` and ``formulation``:
        what item validity's rule picks a shot count from."""
        out: dict[int, set[str]] = {}
        for (model, m, f, k) in self.scores:
            if model in models and m == mode and f == formulation:
                out.setdefault(k, set()).add(model)
        return out


def default_formulation_of(cfg: AuditConfig) -> str:
    """The formulation scores are in when neither the rules nor the scoring section name one."""
    from curate.items.adapters import default_formulation
    return default_formulation(cfg.benchmark.make_adapter())


def supply(cfg: AuditConfig, answers: list[AnswersRead] | None = None) -> Supply:
    """What the workspace will hold; ``answers``: the answers imports as read
    (``read_answer_imports``; default: read here against the items ``answer_items`` gives)."""
    from scoring.imports import get

    out = stored(cfg.workspace / DB_NAME)
    if answers is None:
        answers = read_answer_imports(cfg, answer_items(cfg)) if cfg.answer_imports else []
    for read in answers:
        if read.models is None:
            out.answers_unknown.append(read.key)
        for model in sorted(read.models or ()):
            out.answers.setdefault(model, read.key)
    for i, a in enumerate(cfg.annotators):
        for rnd in a.rounds:
            out.annotations.setdefault((a.annotator, rnd), f"annotators[{i}]")
    if cfg.scoring:
        for i, imp in enumerate(cfg.scoring.imports):
            supplied = get(imp.format).supplies([imp.dir], default_formulation_of(cfg))
            shots = import_shot_counts(imp.format, imp.dir)
            for (model, mode, formulation), normalizations in supplied.items():
                for k in shots.get(model, (0,)):
                    out.add_scores(model, mode, formulation, normalizations, f"scoring.imports[{i}]", k)
        for model in cfg.scoring.models:
            for mode in cfg.scoring.modes:
                for formulation in cfg.scoring.formulations or (default_formulation_of(cfg),):
                    for k in shot_counts(cfg.scoring.fewshot):
                        out.add_scores(model, mode, formulation, SCORED if wants_seq_mean(SEQ_MEAN_DEFAULT, k)
                                       else tuple(n for n in SCORED if n != "seq_mean"), "scoring.models", k)
    return out


def import_shot_counts(fmt: str, path) -> dict[str, set[int]]:
    """Model -> the shot counts an import will store them at: lm-eval sample logs record each
    task's ``num_fewshot`` in the results file beside them; the other formats are 0-shot."""
    if fmt != "lm-eval-samples":
        return {}
    from scoring.imports import lm_eval_samples as lm

    out: dict[str, set[int]] = {}
    for run in lm.find_runs([path]):
        results = run.info()
        for sample in run.samples:
            task = lm.SAMPLES.match(sample.name).group("task")
            out.setdefault(lm.model_label(results, run.results), set()).add(lm.shots(results, task, run.results))
    return out


def stored(db: Path) -> Supply:
    """What an existing workspace already holds (read-only; nothing is created or migrated)."""
    out = Supply()
    if not db.is_file():
        return out
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "annotations" in tables:
            for annotator, rnd in conn.execute("SELECT DISTINCT annotator, round FROM annotations"):
                out.annotations[(annotator, rnd)] = "the workspace"
        if "scores" in tables:
            counts = ", ".join(f"count({c})" for c in COLUMNS)
            columns = {r[1] for r in conn.execute("PRAGMA table_info(scores)")}
            formulation = "formulation" if "formulation" in columns else "'cloze'"  # before formulations: cloze
            fewshot = "fewshot" if "fewshot" in columns else "0"  # before the shot axis: 0-shot
            for model, mode, form, k, total, *have in conn.execute(
                    f"SELECT model, mode, {formulation}, {fewshot}, count(*), {counts} FROM scores "
                    "GROUP BY 1, 2, 3, 4"):
                norms = [n for column, n_have in zip(COLUMNS, have) if n_have == total for n in COLUMNS[column]]
                out.add_scores(model, mode, ALL_ROTATIONS if form.startswith("letters+r") else form, norms,
                               "the workspace", k)
        if "generations" in tables:
            out.generations.update(conn.execute("SELECT DISTINCT model, mode FROM generations"))
        for table in ("answers", "generations"):  # generated answers are copied into answers when read
            if table in tables:
                for (model,) in conn.execute(f"SELECT DISTINCT model FROM {table}"):
                    out.answers.setdefault(model, "the workspace")
    except sqlite3.DatabaseError:
        pass  # an unreadable workspace is reported by the stage that opens it
    finally:
        conn.close()
    return out


# --- answers imports ---------------------------------------------------------------------------

@dataclass(frozen=True)
class AnswersRead:
    """One of ``answers.imports`` as the plan knows it: ``key`` (``answers.imports[0]``), the
    models it stores (None: not known yet, see ``read_answer_imports``) and ``problem``, (config
    key, why) when its files cannot be read as answers to the items."""
    key: str
    models: frozenset | None
    problem: tuple[str, str] | None = None


def answer_items(cfg: AuditConfig, *, sources: bool = True) -> list[dict] | None:
    """The items the answers imports are read against: those the workspace holds (the audit
    resumes it), else (``sources``) those the ingest will make of a local source, built as the
    ingest builds them. None for a Hub source not yet ingested, or a local one that cannot be
    read (``planned_items`` names why)."""
    from curate.core.errors import InputError
    from curate.items.ingest import build_items
    from curate.items.sources import open_source

    held = stored_item_list(cfg.workspace / DB_NAME)
    if held or not sources:
        return held
    b = cfg.benchmark
    src = b.source()
    if not Path(src["data"]).exists():
        return None
    try:
        source = open_source(src["data"], split=src["split"], config=src["config"], delimiter=src["delimiter"],
                             encoding=src["encoding"])
        return build_items(source.rows, b.make_adapter(), split=src["split"], where=src["data"], limit=b.limit,
                           progress=False)[0]
    except InputError:
        return None


def read_answer_imports(cfg: AuditConfig, items: list[dict] | None) -> list[AnswersRead]:
    """Each of ``answers.imports`` read whole, as `curate import-answers` reads it, against
    ``items`` (nothing is stored): the models its files name, or why they cannot be imported.
    Without ``items`` (a Hub source not yet ingested) the files are not read: the models are
    those the import's ``model`` names, else not known (None), and the plan accepts any model's
    answers from them; the audit reads them right after its ingest (``answers_fit_problems``)."""
    from curate.core.errors import CurateError
    from scoring.answer_imports import read_files
    from scoring.answer_imports._match import Items
    from scoring.answer_options import reading

    found, matched = [], Items(items) if items is not None else None
    for i, imp in enumerate(cfg.answer_imports):
        key, o = f"answers.imports[{i}]", imp.options
        if matched is None:
            found.append(AnswersRead(key, frozenset([o.model]) if o.model else None))
            continue
        try:
            frame, _ = read_files(o.format, [imp.path], matched, **reading(o))
        except CurateError as exc:
            found.append(AnswersRead(key, None, _answers_problem(key, str(exc))))
            continue
        found.append(AnswersRead(key, frozenset(frame["model"])))
    return found


def _answers_problem(key: str, message: str) -> tuple[str, str]:
    """A format's refusal as the config's: the option it names written as the import's key (and
    without "nothing was imported": a check imports nothing)."""
    message = message.removesuffix("; nothing was imported")
    field = "filter" if message.startswith("--filter") else "path"
    for option in ("filter", "format", "model", "item_as", "choice_as", "encoding", "delimiter"):
        message = message.replace(f"--{option.replace('_', '-')}", option)
    return f"{key}.{field}", message


def answers_fit_problems(cfg: AuditConfig) -> list[tuple[str, str]]:
    """Right after the ingest, the items now known: each answers import read against them, and
    the answers the rules read that neither the workspace nor an import holds (before the ingest
    of a Hub source, the imports' models were not known)."""
    from curate.filter.rules import load_rules

    if not cfg.answer_imports:
        return []
    answers = read_answer_imports(cfg, answer_items(cfg, sources=False))
    problems = [read.problem for read in answers if read.problem]
    if problems or not cfg.filter_rules:
        return problems
    have = supply(cfg, answers)
    rules = load_rules(cfg.filter_rules, **cfg.filter_options)
    return [p for (kind, what), where in _reading_stages(cfg, rules, default_formulation_of(cfg)).items()
            if kind == "answers"
            for p in [_answers_gap(where, what[0], have)] if p]


def stored_item_list(db: Path) -> list[dict] | None:
    """The items an existing workspace holds, in row order (None: none yet); read-only."""
    if not db.is_file():
        return None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [json.loads(r[0]) for r in conn.execute("SELECT item_json FROM items ORDER BY row_index")] or None
    except (sqlite3.DatabaseError, ValueError):
        return None  # the stage that opens it says what is wrong
    finally:
        conn.close()


def most_options(db: Path) -> int | None:
    """The most options any stored item has (None: no workspace or no items yet); read-only."""
    return _read_one(db, "SELECT max(json_array_length(item_json, '$.options')) FROM items")


def _read_one(db: Path, query: str):
    """The one value ``query`` gives on an existing workspace, read-only; None without a workspace,
    without its table yet, or unreadable (the stage that opens it says so)."""
    if not db.is_file():
        return None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(query).fetchone()[0]
    except sqlite3.DatabaseError:
        return None
    finally:
        conn.close()


# --- what the rules read --------------------------------------------------------------------

@dataclass(frozen=True)
class Need:
    stage: str
    kind: str      # annotation | scores | generations | answers | tokenizer
    what: tuple    # (annotator, rounds) | (model, mode, normalization, formulation) | (model, mode) | (model,) | (tokenizer,)


def needs(rules: dict, default_formulation: str = "cloze") -> list[Need]:
    """What the rules read, as each condition kind declares it (``curate.filter.kinds``); a
    score read in no named formulation is in ``default_formulation``."""
    from curate.filter.conditions import needs as condition_needs

    return [Need(stage["name"], kind, what) for stage in rules["stages"]
            for kind, what in condition_needs(stage["when"], default_formulation=default_formulation)]


# --- models and tokenizers that must be found -------------------------------------------------

def unresolvable(name: str, use: str) -> str | None:
    """Why the model or tokenizer ``name`` cannot be found (None when it can): a built-in name,
    a local folder or GGUF file, or a Hub id already in the local cache or, when the Hub is
    reachable, on the Hub."""
    from curate.core.errors import CurateError
    from scoring.models import BUILTINS, builtin_gguf

    if name in BUILTINS:
        try:
            builtin_gguf(name)
        except CurateError as exc:
            return str(exc)
        return None
    path = Path(name).expanduser()
    if path.exists() or path.suffix == ".gguf" or path.is_absolute() or name.startswith((".", "~")):
        if path.is_file() and path.suffix == ".gguf":
            return None
        if path.is_dir():
            wanted = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
            if use == "tokenizer" and not any((path / f).is_file() for f in wanted):
                return f"the folder {path} holds no tokenizer files ({', '.join(wanted)})"
            if use == "model" and not (path / "config.json").is_file():
                return f"the folder {path} holds no config.json"
            return None
        return f"no such file or folder: {path}"
    return _hub_problem(name)


def _hub_problem(repo_id: str) -> str | None:
    from huggingface_hub import HfApi, constants, try_to_load_from_cache

    try:
        if any(isinstance(try_to_load_from_cache(repo_id, f), str) for f in ("config.json", "tokenizer_config.json")):
            return None
    except Exception as exc:  # not even a valid repo id
        return f"not a built-in name, a local path or a Hub model id ({type(exc).__name__})"
    if constants.HF_HUB_OFFLINE:
        return "a Hub id that is not in the local Hugging Face cache, and the Hub is offline (HF_HUB_OFFLINE)"
    try:
        HfApi().model_info(repo_id)
    except Exception as exc:  # gated without a token, misspelled, no network: say which
        return f"the Hub cannot give it: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


# --- the check ----------------------------------------------------------------------------------

def plan_problems(cfg: AuditConfig, answers: list[AnswersRead] | None = None) -> list[tuple[str, str]]:
    """Every input the config's stages need but will not have, as (config key, message).
    ``answers``: the answers imports as read (``read_answer_imports``; default: read here).

    Needs the input files to exist (``curate.audit.config.missing_inputs`` first)."""
    from curate.filter.rules import load_rules

    problems = []
    for i, a in enumerate(cfg.annotators):
        if a.backend == "local" and (why := unresolvable(a.annotator.split(":", 1)[1], "model")):
            problems.append((f"annotators[{i}].annotator", f"model cannot be found: {why}"))
    for i, model in enumerate(cfg.scoring.models if cfg.scoring else ()):
        if why := unresolvable(model, "model"):
            problems.append((f"scoring.models[{i}]", f"{model!r} cannot be found: {why}"))
    problems += scoring_fit_problems(cfg)
    if not cfg.filter_rules:
        return problems
    rules = load_rules(cfg.filter_rules, **cfg.filter_options)
    have, default = supply(cfg, answers), default_formulation_of(cfg)
    for (kind, what), where in _reading_stages(cfg, rules, default).items():
        if kind == "annotation":
            annotator, rounds = what
            if not any((annotator, r) in have.annotations for r in rounds):
                key = "filter.annotator" if "annotator" in cfg.filter_options else "annotators"
                named = " or ".join(f"round {r}" for r in rounds)
                problems.append((key, f"{where} read {annotator}'s {named} records, which no planned annotator "
                                      f"provides (planned: {_listing(have.annotations)})"))
        elif kind == "scores":
            model, mode, norm, formulation, fewshot = _score_need(what, have)
            if norm not in have.scores.get((model, mode, formulation, fewshot), {}):
                form = "" if formulation == default else f" in the {formulation} formulation"
                shots = f"{fewshot}-shot " if fewshot else ""
                problems.append(("scoring", f"{where} read {mode}-mode {shots}{norm} scores{form} of model {model!r}, "
                                            f"which no planned stage provides "
                                            f"({_scores_listing(have, model, default)})"))
        elif kind == "generations":
            if what not in have.generations:
                problems.append(("filter.rules", f"{where} read {what[0]!r}'s generated answers in {what[1]} mode, "
                                                 f"which the workspace does not hold and an audit does not make "
                                                 f"(run `curate generate` first)"))
        elif kind == "answers":
            if gap := _answers_gap(where, what[0], have):
                problems.append(gap)
        elif why := unresolvable(what[0], "tokenizer"):
            key = "filter.tokenizer" if "tokenizer" in cfg.filter_options else "filter.rules"
            problems.append((key, f"{where} count tokens with {what[0]!r}, which cannot be found: {why}"))
    return problems


def _reading_stages(cfg: AuditConfig, rules: dict, default: str) -> dict[tuple[str, tuple], str]:
    """Each input the rules read, (kind, what), with the stages reading it ("stages 'a', 'b' of
    rules.yaml"): one problem per missing input, naming every stage that reads it."""
    stages: dict[tuple[str, tuple], list[str]] = {}
    for need in needs(rules, default):
        stages.setdefault((need.kind, need.what), []).append(need.stage)
    return {key: (f"stage{'s' * (len(names) > 1)} {', '.join(map(repr, dict.fromkeys(names)))} of "
                  f"{cfg.filter_rules.name}") for key, names in stages.items()}


def _answers_gap(where: str, model: str, have: Supply) -> tuple[str, str] | None:
    """The problem, keyed ``answers``, when no planned stage provides ``model``'s stored answers;
    None when the workspace holds them, an import stores them, or an import's models are not
    known before the ingest (then the audit checks right after it)."""
    if model in have.answers or have.answers_unknown:
        return None
    return ("answers", f"{where} read the stored answers of {model!r}, which the workspace does not hold and no "
                       f"planned answers import provides ({_answers_listing(have)})")


def scoring_fit_problems(cfg: AuditConfig) -> list[tuple[str, str]]:
    """Scoring settings that cannot be served: a device this machine lacks, and a rotation
    (``letters+rK``) that no item has more than K options for. The options are known once the
    workspace holds its items, so the audit checks again right after its ingest stage."""
    from curate.core.errors import CurateError
    from curate.items.formulations import parse
    from scoring.models import check_device

    if not cfg.scoring or not cfg.scoring.models:
        return []
    problems = []
    try:
        check_device(cfg.scoring.device)
    except CurateError as exc:
        problems.append(("scoring.device", str(exc).replace("--device", "device")))
    most = most_options(cfg.workspace / DB_NAME) if cfg.scoring.formulations else None
    for name in cfg.scoring.formulations or ():
        if most is not None and name != ALL_ROTATIONS and parse(name)[1] >= most:
            problems.append(("scoring.formulations", f"{name} applies to no item: a rotation letters+rK needs more "
                                                     f"than K options, and the workspace's items have at most {most}"))
    return problems


# --- what would stop a run after money was spent ---------------------------------------------

@dataclass
class Check:
    """What ``before_spending`` found: ``problems`` as (config key, message), and ``unchecked``:
    (what, why it is not known) for what needs a Hub that cannot be reached from here."""
    problems: list[tuple[str, str]] = field(default_factory=list)
    unchecked: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Items:
    """How many items the workspace will hold after the ingest: ``count`` exactly, or at most
    that many (``exact`` False: a limit on a Hub source not read here), or not known (None);
    ``why`` says so after "the workspace" ("will hold 300 items (benchmark.limit 300)");
    ``offline``: the source is a Hub dataset that cannot be reached from here."""
    count: int | None
    exact: bool = False
    why: str = ""
    offline: bool = False


def before_spending(cfg: AuditConfig, *, files: bool = True, sources: bool = True) -> Check:
    """Everything known now that would stop an audit once it had paid for something: a
    placeholder left in the config (``<COMMIT-SHA>``), a key a stage needs and the environment
    lacks, then (``files``: the input files exist) ``plan_problems``, and (``sources``) the
    benchmark's source and the score imports whose rows cannot be the items the ingest makes. A
    Hub source that cannot be reached is ``unchecked``, with what depends on it."""
    from curate.audit.config import placeholders

    check = Check(placeholders(cfg.raw) + key_problems(cfg))
    answers = []
    if files and cfg.answer_imports:  # read once, for the plan and for what they hold
        answers = read_answer_imports(cfg, answer_items(cfg, sources=sources))
    if files:
        check.problems += plan_problems(cfg, answers)
    if files and sources:
        items = planned_items(cfg, check)
        check.problems += import_fit_problems(cfg, items, check) + [read.problem for read in answers if read.problem]
        if items.offline and any(read.models is None and not read.problem for read in answers):
            check.unchecked.append(("answers.imports", "whether their files are answers to the items the ingest "
                                                       "makes (the audit reads them right after its ingest)"))
    return check


def key_problems(cfg: AuditConfig) -> list[tuple[str, str]]:
    """The keys the planned stages read from the environment, where missing or unusable: Claude's
    (``ANTHROPIC_API_KEY``, checked as an annotation run checks it before its first request) and
    the Hub token a release to the Hub publishes with."""
    from curate.anthropic_api.client import make_client
    from curate.core.errors import CurateError

    problems = []
    claude = [i for i, a in enumerate(cfg.annotators) if a.backend == "anthropic"]
    if claude:
        try:
            make_client()
        except CurateError as exc:
            problems += [(f"annotators[{i}].annotator", str(exc)) for i in claude]
    if cfg.release and cfg.release.target_kind == "hub":
        from huggingface_hub import get_token
        if not get_token():
            problems.append(("release.target.hub", "publishing to the Hub needs a token: set HF_TOKEN (or run "
                                                   "`hf auth login`); none is set"))
    return problems


def planned_items(cfg: AuditConfig, check: Check) -> Items:
    """How many items the ingest will make: what an existing workspace holds (the audit resumes
    it), the rows of a local source (read as the ingest reads them) up to ``benchmark.limit``; of a
    Hub dataset only the limit is known before it is read. A local source that cannot be read,
    and a Hub dataset or revision the Hub does not have, are problems in ``check``; a Hub that
    cannot be reached is unchecked there."""
    from curate.core.errors import InputError
    from curate.items.sources import open_source

    b = cfg.benchmark
    held = stored_items(cfg.workspace / DB_NAME)
    if held:
        return Items(held, True, f"holds {held} items (it exists: the audit resumes it)")
    src = b.source()
    if Path(src["data"]).exists():
        try:
            rows = len(open_source(src["data"], split=src["split"], config=src["config"], delimiter=src["delimiter"],
                                   encoding=src["encoding"]).rows)
        except InputError as exc:
            check.problems.append(("benchmark.path", str(exc)))
            return Items(None)
        n = min(rows, b.limit or rows)
        return Items(n, True, f"will hold {n} items " + (f"(benchmark.limit {b.limit})" if n < rows
                                                          else f"(every row of {Path(src['data']).name})"))
    key, found = hub_dataset(src["data"], src["revision"])
    offline = key == "unknown"
    if offline:
        check.unchecked.append((f"{'benchmark.hub' if b.hub else 'benchmark.adapter'} {src['data']!r} ({found})",
                                "whether it can be read"))
    elif found:
        check.problems.append((key, found))
    if b.limit:
        return Items(b.limit, False, f"will hold at most {b.limit} items (benchmark.limit {b.limit})", offline)
    return Items(None, offline=offline)


def hub_dataset(repo_id: str, revision: str | None) -> tuple[str, str | None]:
    """(config key, why not) when the Hub says it has no dataset ``repo_id`` at ``revision``;
    ("unknown", why) when the Hub cannot be asked from here (offline, no network); ("", None)
    when it has it. A placeholder revision is not asked for: ``placeholders`` names it."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    from curate.audit.config import PLACEHOLDER

    if constants.HF_HUB_OFFLINE:
        return "unknown", "HF_HUB_OFFLINE is set"
    if revision and PLACEHOLDER.search(revision):
        return "", None
    try:
        HfApi().dataset_info(repo_id, revision=revision, timeout=10)
    except RevisionNotFoundError:
        return "benchmark.revision", f"the Hub has no revision {revision!r} of {repo_id}"
    except GatedRepoError:
        return "benchmark.hub", f"{repo_id} is gated on the Hub and no token given here has access to it"
    except RepositoryNotFoundError:
        return "benchmark.hub", f"the Hub has no dataset {repo_id} (or it is private, and no token here has access)"
    except Exception as exc:  # no network, a proxy, a server error: not known from here
        first = str(exc).splitlines()[0] if str(exc) else ""
        return "unknown", f"the Hub cannot be reached: {type(exc).__name__}: {first}"
    return "", None


def import_fit_problems(cfg: AuditConfig, items: Items | None = None, check: Check | None = None
                        ) -> list[tuple[str, str]]:
    """Score imports whose files cannot be the workspace's items (a study CSV holds one row per
    item; an lm-eval sample matches an item of its own), given how many items there will be
    (``items``; default: what the workspace holds once ingested). Where that is not known
    before the ingest, the audit checks again right after its ingest, before anything is spent;
    with the source offline, ``check`` lists the import as unchecked too."""
    from scoring.imports import get

    if items is None:
        held = stored_items(cfg.workspace / DB_NAME)
        items = Items(held, True, f"holds {held} items") if held else Items(None)
    problems = []
    for i, imp in enumerate(cfg.scoring.imports if cfg.scoring else ()):
        fmt, key = get(imp.format), f"scoring.imports[{i}].dir"
        if not hasattr(fmt, "misfits"):
            continue
        if items.count is not None and (bad := fmt.misfits([imp.dir], items.count, items.exact)):
            more = f" (and {len(bad) - 1} more files)" if len(bad) > 1 else ""
            problems.append((key, f"cannot match the items: {bad[0]}{more}, but the workspace {items.why}"))
        elif not items.exact and items.offline and check is not None:
            check.unchecked.append((key, "whether its files match the items the ingest makes (the audit counts "
                                         "them right after its ingest, before anything is spent)"))
    return problems


def stored_items(db: Path) -> int | None:
    """How many items an existing workspace holds (None: none yet); read-only."""
    return _read_one(db, "SELECT count(*) FROM items") or None


def plan_summary(cfg: AuditConfig) -> str:
    """One line: what the rules read, all of which the plan provides (call when no problems)."""
    from curate.filter.rules import load_rules

    if not cfg.filter_rules:
        return "plan complete: no filter, so nothing the rules read is needed"
    found = needs(load_rules(cfg.filter_rules, **cfg.filter_options), default_formulation_of(cfg))
    rounds = {(n.what[0], r) for n in found if n.kind == "annotation" for r in n.what[1]}
    scores = {n.what for n in found if n.kind == "scores"}
    tokenizers = {n.what for n in found if n.kind == "tokenizer"}
    generations = {n.what for n in found if n.kind == "generations"}
    answers = {n.what for n in found if n.kind == "answers"}
    return (f"plan complete: every input the rules read will exist after the planned stages (annotator rounds: "
            f"{len(rounds)}; model x mode x normalization: {len(scores)}; tokenizers: {len(tokenizers)}"
            + (f"; generated model x mode: {len(generations)}" if generations else "")
            + (f"; models' stored answers: {len(answers)}" if answers else "") + ")")


def _score_need(what: tuple, have: Supply) -> tuple:
    """(model, mode, normalization, formulation, shot count) of a scores need: a kind that names
    no shot count reads 0-shot scores; item validity (``ByRule``) the shot count its rule picks
    from what the plan supplies, as it will from what the workspace then holds."""
    from curate.validity.item_options import ByRule
    from curate.validity.item_table import pick_fewshot

    model, mode, norm, formulation, *rest = what
    fewshot = rest[0] if rest else 0
    if isinstance(fewshot, ByRule):
        fewshot = pick_fewshot(have.shot_models(fewshot.models, mode, formulation))
    return model, mode, norm, formulation, fewshot


def _answers_listing(have: Supply) -> str:
    """Which models' answers each import stores and the workspace holds."""
    by_source: dict[str, list[str]] = {}
    for model, source in have.answers.items():
        by_source.setdefault(source, []).append(model)
    held = by_source.pop("the workspace", [])
    if not by_source and not held:
        return "nothing holds or imports answers"
    parts = [f"{source} imports {', '.join(map(repr, sorted(models)))}" for source, models in sorted(by_source.items())]
    return "; ".join(parts + [f"the workspace holds {', '.join(map(repr, sorted(held))) if held else 'none'}"])


def _listing(pairs) -> str:
    return ", ".join(f"{a} round {r}" for a, r in sorted(pairs)) or "none"


def _scores_listing(have: Supply, model: str, default: str) -> str:
    modes = {mode + ("" if form == default else f" {form}") + (f" {k}-shot" if k else ""): sorted(norms)
             for (m, mode, form, k), norms in have.scores.items() if m == model}
    if not modes:
        return f"nothing scores or imports {model!r}"
    return f"{model!r} will have " + "; ".join(f"{mode}: {', '.join(n)}" for mode, n in sorted(modes.items()))
