"""The stages of `curate audit`, one file each, run in the order of their ``ORDER``.

A stage of the audit is one file, ``curate/audit/stages/NAME.py``, defining ``Step``: a subclass
of ``AuditStage`` (below) that names its config ``section`` and its ``ORDER``, and says

- ``from_config(section)``: the runs the section asks for (``Run``: one per model, per
  annotator round, per import ...), each with its options object, usually the workspace stage's
  own (``Score.from_config``: ``curate.items.stage.Stage``);
- ``provides(run, plan)``: what the run will store, as facts in the words of
  ``curate.items.store.Holdings`` (``("annotation", annotator, round)``, ...), and ``needs(run,
  plan)``: what it reads (``Need``). The plan (``curate.audit.plan``) is what the workspace
  holds and the planned runs provide, less what every run needs;
- ``run(run, config)``: the run itself, as ``Outcome``s (ran, skipped or stopped);
- optionally ``check(section)`` (what the schema cannot say about the section as written),
  ``inputs`` and ``outputs`` (the files it reads, the folders it writes) with ``refused`` (why it
  would not write a folder), ``settled`` (what it refuses from the config alone),
  ``environment`` (a key it needs and the environment lacks), ``problems`` (what would stop it
  once others had spent money, checked before anything runs), ``fits`` (what depends on the
  items: checked again right after the ingest), ``items`` and ``item_list`` (the items it will
  make), ``describe`` (its lines of the plan), ``dry_run`` (what it would send and cost) and
  ``summary`` (its lines of the closing summary).

The section's schema is in ``schemas/audit.schema.json``; a stage whose section the file does not
describe gives it as ``SCHEMA``, and `make schemas` writes it there (``curate/schema_files.py``).
Modules starting with ``_`` are helpers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from curate.core.registry import Registry

#: The audit's stages (``curate.core.registry``), each a module with its ``Step``.
STAGES = Registry(__name__, what="audit stage", required=("Step",))


@dataclass(frozen=True)
class Run:
    """One run of an audit stage: the stage, the config key of what it runs (``annotators[0]``,
    ``scoring.models[1]``: errors name it) and its options."""
    stage: type["AuditStage"]
    key: str
    options: Any


@dataclass
class Outcome:
    """What one run did: 'ran' (new work), 'skipped' (nothing to do) or 'stopped'; ``seconds``
    when it timed itself (each annotation round, each scorer)."""
    stage: str
    status: str
    detail: str
    data: dict = field(default_factory=dict)
    seconds: float | None = None


@dataclass(frozen=True)
class Need:
    """Something a run of the audit stage ``stage`` reads: a fact ``kind`` and ``what`` (as
    filter kinds declare it), who reads it (``reader``: "stage 'x' of rules.yaml"), and the config
    key to name when it is missing (``key``; None: the section of the stage that provides that
    kind, else ``fallback``, the reader's own)."""
    kind: str
    what: tuple
    reader: str
    stage: str
    key: str | None = None
    fallback: str = ""


class AuditStage:
    """What the audit knows of one stage; every method has a default but ``from_config`` and
    ``run``. Methods are class methods: a stage holds no state between runs."""
    name: ClassVar[str]        # how the plan and the outcomes name it ("score")
    section: ClassVar[str]     # its config key ("scoring"); the stage runs only where the config has it
    ORDER: ClassVar[int]       # where it runs among the others
    PROVIDES: ClassVar[tuple[str, ...]] = ()  # the fact kinds it stores (a missing one names its section)
    SCHEMA: ClassVar[dict | None] = None      # its section's JSON Schema, when the schema file has none
    reads: ClassVar[bool] = False             # it reads what other stages store (the plan's summary counts it)
    from_items: ClassVar[bool] = False        # what it provides is known only with the items (rechecked after the ingest)

    @classmethod
    def check(cls, section: dict, config: dict) -> list[tuple[str, str]]:
        """What the schema cannot say about the ``section`` as written (``config``: the file)."""
        return []

    @classmethod
    def from_config(cls, section) -> list[Run]:
        raise NotImplementedError

    @classmethod
    def provides(cls, run: Run, plan) -> set[tuple]:
        return set()

    @classmethod
    def needs(cls, run: Run, plan) -> list[Need]:
        return []

    @classmethod
    def items(cls, run: Run, plan):
        """How many items the run will make (``curate.audit.plan.Items``); None: it makes none."""
        return None

    @classmethod
    def item_list(cls, run: Run, plan) -> list[dict] | None:
        """The items the run will make, where they can be known before it runs."""
        return None

    @classmethod
    def inputs(cls, run: Run, config) -> list[tuple[str, Path]]:
        """(config key, path) of each file or folder it reads: they must exist."""
        return []

    @classmethod
    def outputs(cls, run: Run, config) -> list[tuple[str, Path]]:
        """(config key, folder) of each folder it writes."""
        return []

    @classmethod
    def refused(cls, run: Run, key: str, folder: Path, config) -> str | None:
        """Why the stage would not write ``folder`` (one of its ``outputs``) when it came to it."""
        return None

    @classmethod
    def settled(cls, run: Run, config) -> list[tuple[str, str]]:
        """What it would refuse, known from the config alone."""
        return []

    @classmethod
    def environment(cls, run: Run) -> list[tuple[str, str]]:
        """What it needs from the environment and lacks (an API key, a token)."""
        return []

    @classmethod
    def problems(cls, run: Run, plan) -> list[tuple[str, str]]:
        """What would stop it after other stages had spent money, known before anything runs."""
        return []

    @classmethod
    def fits(cls, run: Run, plan) -> list[tuple[str, str]]:
        """What would stop it that depends on the items: checked before anything runs as far
        as they are known, and again right after the ingest."""
        return []

    @classmethod
    def describe(cls, runs: list[Run]) -> list[str]:
        return []

    @classmethod
    def dry_run(cls, runs: list[Run], plan) -> list[str]:
        """What its runs would send and cost, for `curate audit --dry-run` (no key, no network)."""
        return []

    @classmethod
    def summary(cls, runs: list[Run], outcomes: list[Outcome], config) -> list[str]:
        return []

    @classmethod
    def run(cls, run: Run, config) -> list[Outcome]:
        raise NotImplementedError


def ordered() -> list[type[AuditStage]]:
    """Every stage of the audit, in the order it runs."""
    return sorted((module.Step for module in STAGES.modules.values()), key=lambda stage: stage.ORDER)


def line(stage: str, text: str) -> str:
    """One line of the plan or the summary: the stage's name in a column, then ``text``."""
    return f"{stage:<11}{text}"
