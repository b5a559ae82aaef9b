"""The Claude runner of annotation and generation: units ``concurrency`` at a time, each sent once
its worst case fits under ``--max-cost`` (``curate.anthropic_api.spend``: every request is in the
ledger before it is sent, and every reply paid for as soon as it is read, even when a re-ask after
it fails); each record stored right after its reply."""
from __future__ import annotations

from typing import Callable

from curate.anthropic_api import client as api
from curate.anthropic_api import spend
from curate.asking.job import Job


def send_messages(job: Job, todo: list, *, spending: spend.Spending, start: Callable, store: Callable,
                  concurrency: int, counters: api.Counters) -> None:
    """``start(unit) -> (tab, call)`` builds a unit's request (``call`` asks, with its re-asks);
    ``store(unit, reply)`` stores what came back. A unit given up on counts as failed (still
    pending); a stop or the cap ends the run, saying why (``job.stopped``, ``job.over_budget``)."""
    def finish(unit, tab: spend.Tab, future) -> None:
        job.spent += tab.billed  # its replies are in the ledger already, even when a re-ask failed
        try:
            reply = future.result()
        except spend.OverBudget as exc:
            job.over_budget = job.over_budget or exc.why
        except api.Stop as exc:
            job.stopped = job.stopped or str(exc)
        except api.GaveUp as exc:
            job.fail(str(exc))
        else:
            store(unit, reply)
        job.show(counters.retrying)

    try:
        kept_back = spending.send_all(todo, start, finish, concurrency=concurrency, halted=lambda: job.halted,
                                      waiting=job.hold)
    finally:
        spending.close()
    if kept_back is not None:
        job.over_budget = spend.kept_back(kept_back)
