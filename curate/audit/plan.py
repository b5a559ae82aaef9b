"""The audit's plan: what the workspace holds, plus what the planned runs provide, less what every
run needs. Checked before anything is spent.

Every store says what it holds (``holdings(ws)`` in ``STORES``: items, scores, annotations,
generations, answers), every run what it will provide (``AuditStage.provides``) and what it
reads (``AuditStage.needs``: the filter's rules, as each condition kind declares it), all as
facts in one vocabulary (``curate.items.store.Holdings``). ``Plan.gaps`` names each need nothing
holds or provides, with the config key that would fill it (the section of the stage that
provides that kind of fact). ``before_spending`` adds what else would stop an audit after it had
paid for Claude's rounds, each stage saying what would stop it (``problems``: a key the
environment lacks, a model that cannot be found, a Hub source the Hub does not have) and what
depends on the items (``fits``: score and answer imports that cannot be the items the ingest
makes); what needs an unreachable Hub it lists as unchecked.
"""
from __future__ import annotations

import hashlib
import json
from contextlib import closing
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Callable

from annotate import store as annotations
from curate.audit.config import AuditConfig, placeholders
from curate.audit.needs import gap
from curate.audit.stages import Need, ordered
from curate.core.errors import CurateError
from curate.items import store as items_store
from curate.items.duplicates import store as duplicates
from curate.items.formulations import ALL_ROTATIONS
from generate import store as generations
from scoring import answers, store as scores

#: The stores of a workspace, in the order the workspace's state is hashed.
STORES: tuple[ModuleType, ...] = (items_store, scores, annotations, generations, answers, duplicates)


def workspace_state(root: Path) -> str:
    """A hash that changes whenever items, scores, annotations, generations or stored answers in
    the workspace change: each store's ``Holdings.state`` in turn (annotations record by record
    with their answers and write times, so a human verdict edited in place changes it too)."""
    h = hashlib.sha256()
    with closing(items_store.Workspace.peek(root)) as ws:
        for store in STORES:
            state = store.holdings(ws).state
            if state is None:
                continue  # a store that adds nothing (no stored answers) keeps the state it had before it counted
            for row in state:
                h.update(json.dumps(tuple(row), default=str).encode())
            h.update(b"\n")
    return "sha256:" + h.hexdigest()


class Supply:
    """What the workspace will hold after the planned runs: each fact with where it comes from
    ("the workspace", or the config key of the run providing it)."""

    def __init__(self):
        self.facts: dict[tuple, str] = {}

    def add(self, fact: tuple, source: str) -> None:
        self.facts.setdefault(fact, source)

    @property
    def annotations(self) -> dict[tuple[str, int], str]:
        return {(a, r): s for (kind, *rest), s in self.facts.items() if kind == "annotation" for a, r in [rest]}

    @property
    def scores(self) -> dict[tuple[str, str, str, int], dict[str, str]]:
        """(model, mode, formulation, fewshot) -> {normalization: source}."""
        out: dict[tuple, dict[str, str]] = {}
        for (kind, *rest), source in self.facts.items():
            if kind == "scores":
                out.setdefault(tuple(rest[:4]), {}).setdefault(rest[4], source)
        return out

    @property
    def generations(self) -> set[tuple[str, str]]:
        return {tuple(rest) for kind, *rest in self.facts if kind == "generations"}

    @property
    def answers(self) -> dict[str, str]:
        return {rest[0]: s for (kind, *rest), s in self.facts.items() if kind == "answers" and rest[0] is not None}

    @property
    def answers_unknown(self) -> list[str]:
        """The imports whose models are not known before the ingest (their fact is ("answers", None))."""
        return [s for fact, s in self.facts.items() if fact == ("answers", None)]

    def shot_models(self, models, mode: str, formulation: str) -> dict[int, set[str]]:
        """Shot count -> which of ``models`` will have scores in ``mode`` and ``formulation``:
        what item validity's rule picks a shot count from."""
        out: dict[int, set[str]] = {}
        for (model, m, f, k) in self.scores:
            if model in models and m == mode and f == formulation:
                out.setdefault(k, set()).add(model)
        return out


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


@dataclass
class Plan:
    """The plan of ``config``: ``files``: its input files exist and may be read; ``sources``: the
    benchmark's data may be read too (its rows, a Hub dataset); ``resumed``: the workspace, if
    any, is one the audit resumes (not one its ingest just made); ``online``: a server a stage
    needs may be asked. Stages note here what they cannot check from here (``unchecked``:
    (what, why))."""
    config: AuditConfig
    files: bool = True
    sources: bool = True
    resumed: bool = True
    online: bool = True  # a server a stage needs may be asked (a dry run asks nothing)
    unchecked: list[tuple[str, str]] = field(default_factory=list)
    cache: dict = field(default_factory=dict)

    def once(self, key, compute: Callable):
        """``compute()``, computed once per plan (a stage's reading of files)."""
        if key not in self.cache:
            self.cache[key] = compute()
        return self.cache[key]

    def _read(self, read: Callable, empty):
        """``read(ws)`` of the existing workspace, opened read-only (nothing created or upgraded);
        ``empty`` without one, or when it cannot be read (``unreadable`` says why)."""
        try:
            ws = items_store.Workspace.peek(self.config.workspace)
            if ws is None:
                return empty
            with closing(ws):
                return read(ws)
        except CurateError as exc:  # the ingest stage refuses it in these words
            self.cache["unreadable"] = str(exc)
            return empty

    @cached_property
    def held(self) -> set[tuple]:
        """Every fact the workspace's stores hold (``holdings``)."""
        return self._read(lambda ws: {fact for store in STORES for fact in store.holdings(ws).facts}, set())

    @property
    def unreadable(self) -> str | None:
        """Why the existing workspace cannot be read (None: it can, or there is none)."""
        self._read(lambda ws: ws.count_items(), None)
        return self.cache.get("unreadable")

    @cached_property
    def held_items(self) -> list[dict] | None:
        """The items the workspace holds, in row order (None: no workspace or no items yet)."""
        return self._read(lambda ws: ws.items(), None) or None

    @cached_property
    def items(self) -> Items:
        """How many items there will be: what the workspace holds, else what the stage that makes
        them (``items``) says."""
        if held := self._read(lambda ws: ws.count_items(), None):
            return Items(held, True, f"holds {held} items" + " (it exists: the audit resumes it)" * self.resumed)
        return next((found for run in self.config.runs if (found := run.stage.items(run, self)) is not None),
                    Items(None))

    @cached_property
    def item_list(self) -> list[dict] | None:
        """The items as they will be: the workspace's, else (``sources``) those the stage that
        makes them builds from a local source; None when not known before the ingest."""
        if self.held_items or not self.sources:
            return self.held_items
        return next((found for run in self.config.runs if (found := run.stage.item_list(run, self)) is not None),
                    None)

    @cached_property
    def most_options(self) -> int | None:
        """The most options a held item has (None: no items held yet)."""
        return max((len(item["options"]) for item in self.held_items), default=None) if self.held_items else None

    @cached_property
    def default_formulation(self) -> str:
        """The formulation scores are in when neither the rules nor the scoring name one: what
        the ingest provides, else what the workspace holds, else cloze."""
        found = [fact[1] for run in self.config.runs if "formulation" in run.stage.PROVIDES
                 for fact in run.stage.provides(run, self) if fact[0] == "formulation"] \
            + [fact[1] for fact in self.held if fact[0] == "formulation"]
        return found[0] if found else "cloze"

    @cached_property
    def supply(self) -> Supply:
        """Held + provided. A held rotation (letters+rK) counts as the model's rotated letters."""
        out = Supply()
        for kind, *rest in sorted(self.held, key=repr):
            if kind == "scores" and str(rest[2]).startswith("letters+r"):
                rest[2] = ALL_ROTATIONS
            out.add((kind, *rest), "the workspace")
        for run in self.config.runs:
            for fact in sorted(run.stage.provides(run, self), key=repr):
                out.add(fact, run.key)
        return out

    @cached_property
    def needs(self) -> list[Need]:
        return [need for run in self.config.runs for need in run.stage.needs(run, self)]

    def provider(self, kind: str) -> str | None:
        """The config section of the (first) stage that provides facts of ``kind``."""
        return next((stage.section for stage in ordered() if kind in stage.PROVIDES), None)


# --- the check ----------------------------------------------------------------------------------

def gaps(plan: Plan) -> list[tuple[str, str]]:
    """Each need that nothing holds or provides, as (config key, message)."""
    return [found for _, found in _gaps(plan)]


def _gaps(plan: Plan) -> list[tuple[Need, tuple[str, str]]]:
    return [(need, found) for need in plan.needs if (found := gap(need, plan)) is not None]


def plan_problems(config: AuditConfig, plan: Plan | None = None) -> list[tuple[str, str]]:
    """Every input the config's runs need but will not have (``gaps``), and what a run would
    refuse before anything runs (``problems``: a model not found, a device this machine lacks, a
    workspace made from other data), as (config key, message). Needs the input files to exist
    (``missing_inputs`` first); what depends on the items is ``before_spending``'s."""
    plan = plan or Plan(config, sources=False)
    return list(dict.fromkeys([p for run in config.runs for p in run.stage.problems(run, plan)] + gaps(plan)))


@dataclass
class Check:
    """What ``before_spending`` found: ``problems`` as (config key, message), and ``unchecked``:
    (what, why it is not known) for what needs a Hub that cannot be reached from here."""
    problems: list[tuple[str, str]] = field(default_factory=list)
    unchecked: list[tuple[str, str]] = field(default_factory=list)


def before_spending(config: AuditConfig, *, files: bool = True, sources: bool = True, environment: bool = True,
                    online: bool = True) -> Check:
    """Everything known now that would stop an audit once it had paid for something: a
    placeholder left in the config (``<COMMIT-SHA>``), a key the environment lacks
    (``AuditStage.environment``), then what each run would refuse (``problems``: a model not
    found, a source that cannot be read, with ``files`` and ``sources`` saying what may be read),
    and with the input files what depends on the items (``fits``) and each need nothing provides
    (``gaps``): ``plan_problems``. A Hub source that cannot be reached is ``unchecked``, with
    what depends on it. ``environment`` False leaves out the keys, ``online`` False every server
    (a dry run)."""
    plan = Plan(config, files=files, sources=files and sources, online=online)
    found = placeholders(config.raw) + [p for run in config.runs if environment for p in run.stage.environment(run)]
    if files:
        found += plan_problems(config, plan) + [p for run in config.runs for p in run.stage.fits(run, plan)]
    else:
        found += [p for run in config.runs for p in run.stage.problems(run, plan)]
    return Check(list(dict.fromkeys(found)), list(dict.fromkeys(plan.unchecked)))


def after_ingest(config: AuditConfig) -> list[tuple[str, str, str]]:
    """Right after the ingest, the items now known: what each later run would refuse for them
    (``fits``), else the needs of the kinds that stages provide from the items (``from_items``:
    the answers imports' models) that no run provides, as (stage name, config key, message)."""
    plan = Plan(config, resumed=False)
    found = [(run.stage.name, key, message) for run in config.runs for key, message in run.stage.fits(run, plan)]
    if found:
        return found
    late = {kind: stage.name for stage in ordered() if stage.from_items for kind in stage.PROVIDES}
    return [(late[need.kind], key, message) for need, (key, message) in _gaps(plan) if need.kind in late]


def plan_summary(config: AuditConfig) -> str:
    """One line: what the runs read, all of which the plan provides (call when no problems)."""
    plan = Plan(config, sources=False)
    if not any(run.stage.reads for run in config.runs):
        return "plan complete: no filter, so nothing the rules read is needed"
    found = plan.needs
    rounds = {(n.what[0], r) for n in found if n.kind == "annotation" for r in n.what[1]}
    counts = {kind: len({n.what for n in found if n.kind == kind}) for kind in ("scores", "tokenizer", "generations",
                                                                                   "answers")}
    return (f"plan complete: every input the rules read will exist after the planned stages (annotator rounds: "
            f"{len(rounds)}; model x mode x normalization: {counts['scores']}; tokenizers: {counts['tokenizer']}"
            + (f"; generated model x mode: {counts['generations']}" if counts["generations"] else "")
            + (f"; models' stored answers: {counts['answers']}" if counts["answers"] else "") + ")")
