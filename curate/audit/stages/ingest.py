"""``benchmark``: the workspace made from the benchmark's data (``curate.items.ingest.Ingest``),
once; an audit run again resumes it, when it was made from the same data with the same settings.
Right after it, what depends on the items is checked again (``curate.audit.plan.after_ingest``)."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from curate.audit.stages import AuditStage, Outcome, Run, line
from curate.core.errors import CurateError, InputError
from curate.items.ingest import Ingest
from curate.items.store import DB_NAME


class Source(NamedTuple):
    """An ingest's options, the adapter it reads the rows with (``named`` as the config names it:
    a built-in benchmark, or generic), and whether its data is a local path (else a Hub id, or a
    built-in's own Hub dataset)."""
    options: object  # IngestOptions
    adapter: object
    named: str
    local: bool


def resolved(source: Source) -> dict:
    """What the ingest reads: the data (a local path or Hub id; a built-in's own without one),
    split, configuration, revision, row limit, delimiter and encoding."""
    from curate.items.adapters import hub_default

    o = source.options
    data, split, config = hub_default(source.adapter, o.data, o.split, o.config)
    return {"data": data, "split": split, "config": config, "revision": o.revision, "limit": o.limit,
            "delimiter": o.delimiter, "encoding": o.encoding}


def resumed_problems(source: Source, config, *, data: bool = True) -> list[tuple[str, str]]:
    """Why the existing workspace cannot be resumed for this benchmark: made with another
    adapter, columns or split, or (``data``: the data may be read) from other data (empty when it
    can, or there is none)."""
    from curate.items.ingest import same_adapter
    from curate.items.store import Workspace

    if not (config.workspace / DB_NAME).is_file():
        return []
    with Workspace.peek(config.workspace) as ws:
        stored, split = ws.meta("adapter", {}), ws.meta("split")
    if not same_adapter(stored, source.adapter) or split != resolved(source)["split"]:
        return [("benchmark", f"{config.workspace}: was ingested with other benchmark settings than {config.file} "
                              f"names (adapter, columns or split); use a new workspace directory")]
    changed = source_changes(config.workspace, resolved(source)) if data else ""
    if changed:
        return [("benchmark", f"{config.workspace}: was ingested from other data than {config.file} names "
                              f"({changed}); use a new workspace directory, or restore the benchmark settings")]
    return []


def source_changes(root: Path, want: dict) -> str:
    """What differs between the data a workspace was made from and the data a config names
    (``resolved``): the row limit, the local data's content (a file moved elsewhere is the same
    data), the Hub dataset, its pinned revision or configuration. Empty when nothing does."""
    from curate.items.sources import local_sha256
    from curate.items.store import Workspace

    with Workspace.peek(root) as ws:
        source, limit = ws.meta("source", {}), ws.meta("limit")
    changes = []
    if limit != want["limit"]:
        changes.append(f"limit {limit} in the workspace, {want['limit']} in the config")
    if source.get("kind") == "local":
        path = Path(want["data"])
        if not path.exists():
            changes.append(f"{path} does not exist")
        elif local_sha256(path, want["split"], want["config"]) != source.get("sha256"):
            changes.append(f"the content of {path} differs from the data the workspace was made from")
    else:
        for key, given in (("repo_id", want["data"]), ("revision", want["revision"]), ("config", want["config"])):
            if source.get(key) != given:
                changes.append(f"{key} {source.get(key)} in the workspace, {given} in the config")
    return "; ".join(changes)


def planned(source: Source, plan):
    """(Items, problems, unchecked) of a workspace not made yet: the rows of a local source (read
    as the ingest reads them) up to ``limit``; of a Hub dataset only the limit is known before it
    is read, and whether the Hub has it (``hub_dataset``; unchecked when it cannot be reached)."""
    from curate.audit.plan import Items
    from curate.items.sources import open_source

    src, limit = resolved(source), source.options.limit
    if Path(src["data"]).exists():
        try:
            rows = len(open_source(src["data"], split=src["split"], config=src["config"], delimiter=src["delimiter"],
                                   encoding=src["encoding"]).rows)
        except InputError as exc:
            return Items(None), [("benchmark.path", str(exc))], []
        n = min(rows, limit or rows)
        return Items(n, True, f"will hold {n} items " + (f"(benchmark.limit {limit})" if n < rows
                                                          else f"(every row of {Path(src['data']).name})")), [], []
    key, found = hub_dataset(src["data"], src["revision"])
    offline = key == "unknown"
    named = "benchmark.hub" if source.options.data else "benchmark.adapter"
    unchecked = [(f"{named} {src['data']!r} ({found})", "whether it can be read")] if offline else []
    problems = [(key, found)] if found and not offline else []
    if limit:
        return Items(limit, False, f"will hold at most {limit} items (benchmark.limit {limit})", offline), problems, \
            unchecked
    return Items(None, offline=offline), problems, unchecked


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


class Step(AuditStage):
    name, section, ORDER, PROVIDES = "ingest", "benchmark", 10, ("formulation",)

    @classmethod
    def check(cls, section: dict, config: dict) -> list[tuple[str, str]]:
        b, problems = section, []
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
        return problems

    @classmethod
    def from_config(cls, section) -> list[Run]:
        from curate.items.adapters import get_adapter
        from curate.items.adapters.columns import adapter_keywords

        data = str(section.input(section["path"])) if "path" in section else section.get("hub")
        adapter = get_adapter(section["adapter"], **adapter_keywords(section.get("columns")))
        return [Run(cls, section.key, Source(Ingest.from_config(section, data=data), adapter, section["adapter"],
                                                 "path" in section))]

    @classmethod
    def provides(cls, run: Run, plan) -> set[tuple]:
        from curate.items.adapters import default_formulation
        return {("formulation", default_formulation(run.options.adapter))}

    @classmethod
    def items(cls, run: Run, plan):
        return plan.once("planned items", lambda: planned(run.options, plan))[0] if plan.sources else None

    @classmethod
    def item_list(cls, run: Run, plan) -> list[dict] | None:
        """The items the ingest will make of a local source, built as it builds them (None for a
        Hub source, or a local one that cannot be read: ``problems`` names why)."""
        from curate.items.ingest import build_items
        from curate.items.sources import open_source

        src = resolved(run.options)
        if not Path(src["data"]).exists():
            return None
        try:
            source = open_source(src["data"], split=src["split"], config=src["config"], delimiter=src["delimiter"],
                                 encoding=src["encoding"])
            return build_items(source.rows, run.options.adapter, split=src["split"], where=src["data"],
                               limit=src["limit"], progress=False)[0]
        except InputError:
            return None

    @classmethod
    def inputs(cls, run: Run, config) -> list[tuple[str, Path]]:
        return [("benchmark.path", Path(run.options.options.data))] if run.options.local else []

    @classmethod
    def outputs(cls, run: Run, config) -> list[tuple[str, Path]]:
        return [("workspace", config.workspace)]

    @classmethod
    def refused(cls, run: Run, key: str, folder: Path, config) -> str | None:
        from curate.items.store import check_new_workspace

        if folder.exists() and not folder.is_dir():
            return f"{folder} is a file; name a folder for the workspace"
        if not (folder / DB_NAME).is_file():  # an existing workspace is resumed
            check_new_workspace(folder)
        return None

    @classmethod
    def problems(cls, run: Run, plan) -> list[tuple[str, str]]:
        """The workspace to resume: readable, and made from this benchmark's data and settings;
        else (``sources``) the data the ingest will read: readable, or on the Hub."""
        if plan.unreadable:
            return [("workspace", plan.unreadable)]
        if (plan.config.workspace / DB_NAME).is_file():
            return resumed_problems(run.options, plan.config, data=plan.sources)
        if not plan.sources:
            return []
        _, problems, unchecked = plan.once("planned items", lambda: planned(run.options, plan))
        plan.unchecked.extend(u for u in unchecked if u not in plan.unchecked)
        return problems

    @classmethod
    def describe(cls, runs: list[Run]) -> list[str]:
        [run] = runs
        o, src = run.options.options, resolved(run.options)
        source = o.data if run.options.local else f"{src['data']}@{o.revision or 'unpinned'}"
        limit = f", first {o.limit}" if o.limit else ""
        return [line("ingest", f"{run.options.named}: {source} (split {src['split']}{limit})")]

    @classmethod
    def run(cls, run: Run, config) -> list[Outcome]:
        from curate.audit.plan import after_ingest

        done = cls.ingest(run, config)
        # a rotation letters+rK needs items with more than K options, and imported scores and answers
        # need files that fit the items (a Hub dataset's are known only now): before anything is spent
        return [done] + [Outcome(stage, "stopped", f"{config.file}, field '{key}': {message}")
                         for stage, key, message in after_ingest(config)]

    @classmethod
    def ingest(cls, run: Run, config) -> Outcome:
        from curate.items.store import Workspace

        if (config.workspace / DB_NAME).is_file():
            with Workspace.open(config.workspace) as ws:
                n = ws.count_items()
            for _, message in resumed_problems(run.options, config):
                raise CurateError(message)
            return Outcome("ingest", "skipped", f"workspace exists ({n} items)", {"items": n})
        Ingest(config.workspace, run.options.options, run.options.adapter).run()
        with Workspace.open(config.workspace) as ws:
            n = ws.count_items()
        return Outcome("ingest", "ran", f"{n} items from {resolved(run.options)['data']}", {"items": n})
