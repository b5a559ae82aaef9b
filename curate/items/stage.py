"""A stage of the audit as an object, and what every stage repeats, done once here.

A stage (score, text-scores, generate, annotate, ...) is a subclass of ``Stage`` with

- ``name``: the command's name ("score"), which the lock and the errors use;
- ``Options``: its options object, made from its option table by ``curate.core.options.options_class``
  (types, ranges and defaults checked once, on construction: the command and the audit build it
  and pass it whole);
- ``work()``: what one run of it holds while it runs (the lock's name: two runs of the same work
  would both ask for what is pending, and pay twice), or None;
- ``migrate(ws)``: the tables its stores need, put in place in the open workspace (their
  migrations), or nothing;
- ``execute()``: the run itself, in the open workspace ``self.ws``: what is left to do (from
  what the workspace holds), the doing, stored as it goes, and a summary;
- ``from_config(section)``: its options as an audit config's section gives them
  (``curate.core.config_section.Section``): the config keys of its table, and what the audit
  gives from elsewhere (the model of one run, the filter's output folder);
- ``provides(options)``: what a run with ``options`` will store, in the words filter kinds
  declare what they read (``curate.filter.kinds``): the audit's plan is what the workspace
  holds (each store's ``holdings``) and what the planned runs provide, less what they need.

``run()`` is the runner every stage shares: the workspace opened first, and once (a missing or
bad one is one line, before anything loads or is locked; the stage reads and writes through that
one connection, ``self.ws``), the work's lock around ``execute``, and the seconds it took in
the summary. ``progress`` makes its progress bars (counts, ETA; none with
``quiet``), ``run_id`` its run records' ids.
"""
from __future__ import annotations

import time
import uuid
from contextlib import nullcontext
from pathlib import Path
from typing import ClassVar

from curate.core.clock import now
from curate.items.store import Workspace


class Startup:
    """The steps of a start-up on one line (``Stage.startup``): ``say(step)`` names the step now
    running; ``close()`` ends the line (a context manager closes it on leaving)."""

    def __init__(self, bar):
        self.bar, self.steps = bar, 0

    def say(self, step: str) -> None:
        if self.steps:
            self.bar.update(1)
        self.steps += 1
        self.bar.set_postfix_str(step)

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> "Startup":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Stage:
    """One run of a stage on the workspace at ``root`` with ``options`` (its ``Options``)."""
    name: ClassVar[str]
    Options: ClassVar[type]
    timed: ClassVar[bool] = True  # the summary says how many seconds the run took
    ws: Workspace  # the open workspace, while ``run`` runs

    def __init__(self, root, options):
        if not isinstance(options, self.Options):
            raise TypeError(f"{self.name}: options must be {self.Options.__name__}, not {type(options).__name__}")
        self.root, self.options = Path(root), options

    @classmethod
    def with_options(cls, root, **values) -> "Stage":
        """The stage with ``values`` for its options (the rest their defaults), checked."""
        return cls(root, cls.Options(**values))

    @classmethod
    def from_config(cls, section, **values):
        """The options of a run as an audit config's ``section`` gives them: the config keys of
        the stage's table that the section sets (``Section.given``), and ``values``, what the
        audit gives from elsewhere; a refused value names its config key."""
        return section.options(cls.Options, **{**section.given(cls.Options.TABLE), **values})

    @classmethod
    def provides(cls, options) -> set[tuple]:
        """What a run with ``options`` stores that a later stage may read (nothing, here)."""
        return set()

    def work(self) -> str | None:
        """The work a run holds a lock on (None: no lock)."""
        return None

    def locked(self):
        """The lock of ``work()`` (``curate.core.lock.work_lock``), held while the run runs."""
        from curate.core.lock import work_lock

        work = self.work()
        return work_lock(self.root, work, command=self.name) if work else nullcontext()

    def run(self) -> dict:
        """The runner: the workspace opened once (``self.ws`` while the run lasts), ``execute``
        under the work's lock; the summary says how long it took."""
        start = time.perf_counter()
        with self.open() as self.ws, self.locked():
            summary = self.execute()
        return {**summary, "seconds": round(time.perf_counter() - start, 3)} if self.timed else summary

    def open(self) -> Workspace:
        """The workspace at ``root``, with the tables ``migrate`` puts in place (closed again if
        that fails)."""
        ws = Workspace.open(self.root)
        try:
            self.migrate(ws)
        except BaseException:
            ws.close()
            raise
        return ws

    def migrate(self, ws: Workspace) -> None:
        """Put in place the tables the run's stores need (their migrations): none here."""

    def execute(self) -> dict:
        raise NotImplementedError

    def progress(self, total: int, unit: str, desc: str, *, enabled: bool = True):
        """A progress bar with counts and ETA (none with ``quiet``, or where ``enabled`` is false)."""
        from tqdm import tqdm

        return tqdm(total=total, unit=unit, desc=desc, disable=getattr(self.options, "quiet", False) or not enabled,
                    dynamic_ncols=True)

    def startup(self, desc: str, *, enabled: bool = True) -> "Startup":
        """A line saying which start-up step runs and for how long (loading a model, starting a
        worker, the self-check): the seconds before the first progress bar are not silent. None
        with ``quiet``."""
        from tqdm import tqdm

        bar = tqdm(desc=desc, bar_format="{desc}{postfix} [{elapsed}, {rate_fmt}]", dynamic_ncols=True,
                   disable=getattr(self.options, "quiet", False) or not enabled)
        return Startup(bar)

    @staticmethod
    def run_id(prefix: str, *, stamped: bool = False) -> str:
        """A new run record's id: ``prefix:`` and 16 random hex digits, or (``stamped``) ``prefix-``,
        the time and 8."""
        if stamped:
            return f"{prefix}-{now().replace(':', '').replace('+0000', 'Z')}-{uuid.uuid4().hex[:8]}"
        return f"{prefix}:{uuid.uuid4().hex[:16]}"
