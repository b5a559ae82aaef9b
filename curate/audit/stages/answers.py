"""``answers.imports``: answers without probabilities imported right after the ingest, each as
`curate import-answers` imports it (``scoring.answer_imports``); an import whose answers the
workspace already holds, as the files give them, stores nothing (skipped).

The plan reads each import's files whole, as the import reads them, against the items (nothing
is stored): the models they hold are what it provides. Before the ingest of a Hub source the
items are not known: the models are those its ``model`` names, else not known, and the plan
accepts any model's answers from it until the audit reads them right after its ingest."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from curate.audit.stages import AuditStage, Outcome, Run, line
from curate.core.errors import CurateError
from scoring.answer_options import ImportAnswersOptions


@dataclass(frozen=True)
class AnswerImport:
    """One of ``answers.imports``: the files (``path``) and the options `curate import-answers`
    takes (``scoring.answer_options``: format, model, filter)."""
    path: Path
    options: ImportAnswersOptions


@dataclass(frozen=True)
class AnswersRead:
    """One import as the plan knows it: ``key`` (``answers.imports[0]``), the models it stores
    (None: not known yet) and ``problem``, (config key, why) when its files cannot be read as
    answers to the items."""
    key: str
    models: frozenset | None
    problem: tuple[str, str] | None = None


def read_imports(runs: list[Run], items: list[dict] | None) -> list[AnswersRead]:
    """Each import of ``runs`` read whole against ``items`` (nothing is stored); without items (a
    Hub source not yet ingested) the files are not read."""
    from scoring.answer_imports import read_files
    from scoring.answer_imports._match import Items
    from scoring.answer_options import reading

    found, matched = [], Items(items) if items is not None else None
    for run in runs:
        imp = run.options
        o = imp.options
        if matched is None:
            found.append(AnswersRead(run.key, frozenset([o.model]) if o.model else None))
            continue
        try:
            frame, _ = read_files(o.format, [imp.path], matched, **reading(o))
        except CurateError as exc:
            found.append(AnswersRead(run.key, None, _problem(run.key, str(exc))))
            continue
        found.append(AnswersRead(run.key, frozenset(frame["model"])))
    return found


def _problem(key: str, message: str) -> tuple[str, str]:
    """A format's refusal as the config's: the option it names written as the import's key (and
    without "nothing was imported": a check imports nothing)."""
    message = message.removesuffix("; nothing was imported")
    field = "filter" if message.startswith("--filter") else "path"
    for option in ("filter", "format", "model", "item_as", "choice_as", "encoding", "delimiter"):
        message = message.replace(f"--{option.replace('_', '-')}", option)
    return f"{key}.{field}", message


class Step(AuditStage):
    name, section, ORDER, PROVIDES, from_items = "answers", "answers", 20, ("answers",), True

    @classmethod
    def from_config(cls, section) -> list[Run]:
        return [Run(cls, entry.key, AnswerImport(entry.input(entry["path"]),
                                                  entry.options(ImportAnswersOptions, **entry.given(
                                                      ImportAnswersOptions.TABLE))))
                for entry in section.entries("imports")]

    @classmethod
    def read(cls, run: Run, plan) -> AnswersRead:
        """The import read against the plan's items, once per plan."""
        runs = plan.config.runs_of(cls.name)
        found = plan.once("answers read", lambda: read_imports(runs, plan.item_list if plan.files else None))
        return found[runs.index(run)]

    @classmethod
    def provides(cls, run: Run, plan) -> set[tuple]:
        models = cls.read(run, plan).models
        return {("answers", None)} if models is None else {("answers", model) for model in models}

    @classmethod
    def fits(cls, run: Run, plan) -> list[tuple[str, str]]:
        read = cls.read(run, plan)
        if read.problem is None and read.models is None and plan.items.offline and plan.files:
            note = ("answers.imports", "whether their files are answers to the items the ingest makes (the audit "
                                       "reads them right after its ingest)")
            if note not in plan.unchecked:
                plan.unchecked.append(note)
        return [read.problem] if read.problem else []

    @classmethod
    def inputs(cls, run: Run, config) -> list[tuple[str, Path]]:
        return [(f"{run.key}.path", run.options.path)]

    @classmethod
    def describe(cls, runs: list[Run]) -> list[str]:
        out = []
        for run in runs:
            o = run.options.options
            given = "".join(f", {k} {v}" for k, v in (("model", o.model), ("filter", o.filter)) if v is not None)
            out.append(line("answers", f"import {o.format} answers from {run.options.path}"
                                       + (f" ({given[2:]})" if given else "")))
        return out

    @classmethod
    def run(cls, run: Run, config) -> list[Outcome]:
        from scoring.answer_imports import import_answers
        from scoring.answer_options import reading

        start, imp = time.perf_counter(), run.options
        o = imp.options
        summary = import_answers(config.workspace, o.format, [imp.path], keep_unchanged=True, **reading(o))
        if not any(s["stored"] for s in summary):
            return [Outcome("answers", "skipped", f"{o.format} answers from {imp.path} already imported",
                            seconds=time.perf_counter() - start)]
        total, unread = sum(s["answers"] for s in summary), sum(s["unreadable"] for s in summary)
        return [Outcome("answers", "ran", f"imported {total} answers of {len(summary)} model"
                        f"{'s' * (len(summary) != 1)} ({unread} unreadable) from {imp.path} ({o.format})",
                        {"imported": summary}, time.perf_counter() - start)]
