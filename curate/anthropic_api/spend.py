"""What ``--max-cost`` and the cost ledger know while Messages requests are in flight.

Shared by ``curate annotate`` (``annotate.run``) and ``curate generate`` (``generate.run``).

Why each piece is here:

- A request the client gave up on -- it timed out, or the connection dropped after it was sent
  -- may still have been completed, and billed, by the API. It is *possibly billed* at the most
  it can cost (its input bound, ``max_tokens`` out): that amount stays counted against the cap
  (``Budget``), and its ledger row stays, with state ``abandoned``. Asking again needs room of
  its own under the cap, so retries are bounded by the cap as well as by ``--retries``. A
  request that never left (the connection was refused) or that the API answered with an error
  (4xx/5xx: not billed) costs nothing.
- Every request is written to the ledger (state ``in_flight``, at that bound) and committed
  *before* it is sent, and settled when it ends: ``billed`` with the usage the API reported,
  ``abandoned``, or deleted. A process killed (``kill -9``) or stopped by a full disk with
  requests in flight leaves their rows ``in_flight``: the ledger still counts them as possibly
  billed, and the next run of the same work marks them ``abandoned`` and says so.
- The sending threads write those rows through one connection of their own (SQLite connections
  are not shared between threads; this one is used under a lock), so a row is durable before its
  request leaves, whichever thread sends it.
- Near the cap a run slows down: a unit waits until its worst case fits beside what the units
  in flight hold, so fewer go at once (and each message batch is smaller than the last). That
  looks like a stalled run unless it says so: ``Held`` is how the cap stands, for the progress
  line and for one line saying why the run slows; ``cap_reached`` and ``interrupted`` end a run
  with what it spent, what is left, the units left and the cap that would let them all go.
"""
from __future__ import annotations

import math
import sqlite3
import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable

import anthropic

from curate.anthropic_api import prices
from curate.anthropic_api.client import Stop, usage_of
from curate.core.atomic import disk_full
from curate.core.errors import CurateError
from curate.items.store import BUSY_TIMEOUT_S, DB_NAME, Workspace

#: The HTTP library's errors (httpx, or httpx2 in anthropic 2.x, by class name) for a request
#: that never left the machine: no connection was made, so nothing can have been billed.
UNSENT = {"ConnectError", "ConnectTimeout", "PoolTimeout", "UnsupportedProtocol"}


def possibly_billed(exc: BaseException) -> bool:
    """Whether a failed request may have reached the API and been completed there: a timeout
    or a connection lost after sending, not an error reply or a connection never made."""
    return isinstance(exc, anthropic.APIConnectionError) and type(exc.__cause__).__name__ not in UNSENT


class OverBudget(Stop):
    """A request given up on counts as possibly billed, and asking again would not fit the cap."""

    def __init__(self, bound: float):
        super().__init__(f"a request given up on (no reply in time) counts as possibly billed, and asking again "
                         f"could cost up to {bound:.4f} USD")
        self.why = f"asking again after a request given up on could cost up to {bound:.4f} USD"


class Budget:
    """The cap's accounts, shared by the threads: ``spent`` (billed replies), ``possibly``
    (requests given up on, at their bound) and ``reserved`` (the worst case still open for the
    units in flight). Nothing is sent unless the three stay within ``cap`` (None: no cap)."""

    def __init__(self, cap: float | None):
        self.cap, self.spent, self.possibly, self.reserved = cap, 0.0, 0.0, 0.0
        self.lock = threading.Lock()

    def reserve(self, usd: float) -> bool:
        with self.lock:
            if self.cap is not None and self.spent + self.possibly + self.reserved + usd > self.cap:
                return False
            self.reserved += usd
            return True

    def give_up(self, usd: float) -> None:
        """A request's reservation becomes possibly spent: it is never released."""
        with self.lock:
            self.reserved -= usd
            self.possibly += usd

    def settle(self, reserved: float, billed: float) -> None:
        """A unit has ended: what it had reserved is released, what it was billed is spent."""
        with self.lock:
            self.reserved -= reserved
            self.spent += billed

    def left(self) -> float:
        """What is still free under the cap (call only when there is one)."""
        with self.lock:
            return max(self.cap - self.spent - self.possibly - self.reserved, 0.0)


class Ledger:
    """The ledger rows of requests in flight, written from the sending threads. ``add(ws,
    **row)`` is the stage's own ``add_ledger`` (its table and constant columns filled in);
    ``unsettled`` maps each row still ``in_flight`` to its bound."""

    def __init__(self, ws: Workspace, table: str, add: Callable[..., int]):
        conn = sqlite3.connect(ws.root / DB_NAME, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        self.ws, self.table, self.add = Workspace(ws.root, conn), table, add
        self.lock = threading.Lock()
        self.unsettled: dict[int, float] = {}

    def open(self, bound: float, **row) -> int:
        with self.lock, self.ws.transaction():
            rowid = self.add(self.ws, **row, model_snapshot=None, usage={}, usd=bound, state="in_flight")
        self.unsettled[rowid] = bound
        return rowid

    def bill(self, rowid: int, **row) -> None:
        with self.lock, self.ws.transaction() as conn:
            conn.execute(f"DELETE FROM {self.table} WHERE rowid = ?", (rowid,))
            self.add(self.ws, **row)
        self.unsettled.pop(rowid)

    def abandon(self, rowid: int) -> None:
        self._settle(rowid, f"UPDATE {self.table} SET state = 'abandoned' WHERE rowid = ?")

    def drop(self, rowid: int) -> None:
        self._settle(rowid, f"DELETE FROM {self.table} WHERE rowid = ?")

    def _settle(self, rowid: int, sql: str) -> None:
        with self.lock, self.ws.transaction() as conn:
            conn.execute(sql, (rowid,))
        self.unsettled.pop(rowid)

    def close(self) -> None:
        self.ws.close()


class Tab:
    """One unit's requests (its first ask and each re-ask, ``bounds[k]`` the most the k-th can
    cost) against the cap and in the ledger. ``reserved``: what the unit holds of the budget;
    ``billed``: what its replies cost; ``given_up``: its requests abandoned."""

    def __init__(self, budget: Budget, ledger: Ledger, model: str, bounds: list[float], row: dict):
        self.budget, self.ledger, self.model, self.bounds, self.row = budget, ledger, model, bounds, row
        self.reserved, self.billed, self.given_up = sum(bounds), 0.0, 0
        self.owed = False  # the last try was given up on: the next needs room of its own

    def send(self, attempt: int, create: Callable[[], anthropic.types.Message]) -> anthropic.types.Message:
        """``create()`` (one request, the ``attempt``-th of the unit, from 0), its ledger row
        committed before it is sent and settled when it ends."""
        bound = self.bounds[attempt]
        if self.owed:
            if not self.budget.reserve(bound):
                raise OverBudget(bound)
            self.reserved, self.owed = self.reserved + bound, False
        rowid = self.ledger.open(bound, **self.row, attempt=attempt + 1)
        try:
            message = create()
        except Exception as exc:
            if not possibly_billed(exc):
                self.ledger.drop(rowid)
                raise
            self.ledger.abandon(rowid)
            self.budget.give_up(bound)
            self.reserved, self.owed, self.given_up = self.reserved - bound, True, self.given_up + 1
            raise
        usage = usage_of(message)
        usd = prices.usd(self.model, **usage)
        self.ledger.bill(rowid, **self.row, attempt=attempt + 1, model_snapshot=message.model, usage=usage, usd=usd)
        self.billed += usd
        return message


@dataclass(frozen=True)
class Held:
    """How the cap holds a run back: ``reserved`` (USD) by ``in_flight`` requests or batches at
    their worst case, ``left`` free beside them, ``waiting`` units not sent for lack of room."""
    cap: float
    reserved: float
    left: float
    in_flight: int
    waiting: int

    def progress(self, batches: bool = False) -> str:
        """The progress line's words (its ``cap=`` field)."""
        if batches:
            return (f"{self.waiting} items wait: {self.reserved:.4f} USD reserved by batches in flight, "
                    f"{self.left:.4f} left")
        return f"waiting: {self.reserved:.4f} USD reserved by {self.in_flight} requests in flight, {self.left:.4f} left"

    def why(self, batches: bool = False) -> str:
        """Printed once, when the cap first holds the run back: why it slows down from here."""
        if batches:
            return (f"--max-cost {self.cap:g} USD: each batch now takes only the items whose worst case fits beside "
                    f"the batches in flight ({self.reserved:.4f} USD reserved, {self.left:.4f} USD left), so batches "
                    f"shrink as the cap nears; {self.waiting} items wait; a higher --max-cost sends more at once")
        return (f"--max-cost {self.cap:g} USD: requests now wait for room under the cap, each held at its worst case "
                f"until its reply is billed ({self.reserved:.4f} USD by {self.in_flight} requests in flight, "
                f"{self.left:.4f} USD left), so fewer go at once as the cap nears; a higher --max-cost keeps them "
                f"going")


class Spending:
    """One run's budget and in-flight ledger, and the loop that sends its units."""

    def __init__(self, ws: Workspace, *, cap: float | None, model: str, table: str, add: Callable[..., int]):
        self.ws, self.model = ws, model
        self.budget, self.ledger = Budget(cap), Ledger(ws, table, add)

    def tab(self, bounds: list[float], **row) -> Tab:
        return Tab(self.budget, self.ledger, self.model, bounds, row)

    def close(self) -> None:
        self.ledger.close()

    def send_all(self, todo: list, start: Callable, finish: Callable, *, concurrency: int,
                 halted: Callable[[], bool], waiting: Callable[[Held | None], None] = lambda held: None
                 ) -> float | None:
        """Send ``todo``'s units ``concurrency`` at a time. ``start(unit)`` gives (tab, work): the
        unit goes, and ``work()`` runs in a thread, only once ``tab.reserved`` (its worst case)
        fits under the cap; ``finish(unit, tab, future)`` runs here as each ends. A unit that does
        not fit waits for the units in flight to settle (their true cost replaces their
        reservation), and ``waiting`` hears how the cap stands (None once units go again): the
        run slows down then, which its progress line should say. When nothing is in flight the
        unit is returned as its worst case (the run stops there), else None. A write to the
        workspace that fails (a full disk) stops the sending; once the units in flight have
        ended, a CurateError says how many requests may have been billed without their replies
        recorded."""
        queue, inflight = deque(todo), {}
        kept_back, failed, held = None, None, False

        def refill(pool) -> None:
            nonlocal kept_back, held
            while queue and len(inflight) < concurrency and not halted() and failed is None:
                tab, work = start(queue[0])
                if not self.budget.reserve(tab.reserved):
                    kept_back = None if inflight else tab.reserved
                    if inflight:
                        held = True
                        waiting(Held(self.budget.cap, self.budget.reserved, self.budget.left(), len(inflight),
                                     len(queue)))
                    return
                inflight[pool.submit(work)] = (queue.popleft(), tab)
                if held:
                    held = False
                    waiting(None)

        with ThreadPoolExecutor(concurrency) as pool:
            refill(pool)
            while inflight:
                finished, _ = wait(inflight, timeout=1.0, return_when=FIRST_COMPLETED)
                for future in finished:
                    unit, tab = inflight.pop(future)
                    self.budget.settle(tab.reserved, tab.billed)
                    try:
                        finish(unit, tab, future)
                    except (OSError, sqlite3.Error) as exc:
                        if not (isinstance(exc, sqlite3.Error) or disk_full(exc)):
                            raise
                        failed = failed or exc
                refill(pool)
        if failed is not None:
            raise CurateError(self.write_failed(failed))
        return kept_back

    def write_failed(self, exc: BaseException) -> str:
        """Why the run stopped, and what the requests whose rows are still in flight may have cost."""
        why = "no space left on the device" if disk_full(exc) else f"{exc}; a full disk?"
        left = self.ledger.unsettled
        if left:
            billed = (f"{len(left)} requests sent before it may have been billed without their replies being recorded "
                      f"(up to {sum(left.values()):.4f} USD; the ledger holds each as 'in_flight', possibly billed, and "
                      f"the next run marks them 'abandoned')")
        else:
            billed = "every request sent before it is settled in the ledger"
        return (f"writing {self.ws.root / DB_NAME} failed ({why}): the run stopped sending; {billed}; what was "
                f"recorded is kept: fix the cause and run the command again")


def settle_left_in_flight(ws: Workspace, table: str, runs: str, params: tuple) -> dict:
    """Rows left ``in_flight`` by earlier runs of this work (``runs``: a query of their run ids)
    become ``abandoned``: those runs ended (``kill -9``, a full disk) before the replies came,
    so each request may have been billed. Call holding the work's lock. Returns their count and
    the most they can have cost."""
    where = f"state = 'in_flight' AND run_id IN ({runs})"
    with ws.transaction() as conn:
        n, usd = conn.execute(f"SELECT count(*), coalesce(sum(usd), 0) FROM {table} WHERE {where}", params).fetchone()
        conn.execute(f"UPDATE {table} SET state = 'abandoned' WHERE {where}", params)
    return {"requests": n, "usd": round(usd, 6)}


def left_in_flight_note(left: dict) -> str | None:
    """The line a run prints when it found requests an earlier run left in flight."""
    if not left or not left["requests"]:
        return None
    return (f"note: {left['requests']} requests of an earlier run were still in flight when it ended (kill -9, a full "
            f"disk): they may have been billed, up to {left['usd']:.4f} USD, and are in the ledger as 'abandoned'")


def kept_back(worst: float) -> str:
    """Why the cap keeps back a unit whose worst case is ``worst``."""
    return f"the next request could cost up to {worst:.4f} USD in the worst case"


def cap_reached(cap: float, why: str, cost: dict, *, left: int = 0, unit: str = "items", done: int = 0,
                worst_left: float = 0.0) -> str:
    """The stop message of a run the cap ended: ``why``, the run's spend from its ledger and what
    is left of the cap; then the ``left`` units still to do (``done``: answered by this run),
    what they could cost at most (``worst_left``) and at this run's average, and the cap that
    lets all of them go without waiting on it."""
    room = max(cap - cost["usd"] - (cost.get("possibly_billed_usd") or 0), 0.0)
    message = (f"--max-cost {cap:g} USD reached: {why}, which would not fit; this run spent {cost['usd']:.4f} USD, "
               f"{room:.4f} USD of the cap is left{possibly_line(cost)}")
    if not left:
        return message
    each = cost["usd"] / done if done else None
    average = f" (at this run's {each:.4f} USD an {unit.rstrip('s')}, about {each * left:.4f} USD)" if each else ""
    return (f"{message}; {left} {unit} left, whose worst case is {worst_left:.4f} USD{average}; to resume, run the "
            f"same command again with a higher --max-cost: --max-cost {math.ceil(worst_left * 100) / 100:.2f} lets "
            f"every request go without waiting on the cap")


def interrupted(cap: float | None, cost: dict, *, left: int, unit: str = "items", held: Held | None = None,
                batches: bool = False) -> str:
    """The line a run prints when Ctrl-C stops it: its spend, the cap and what held it back, the
    units left, and that the same command resumes."""
    of = f" of its --max-cost {cap:g} USD" if cap is not None else ""
    line = f"interrupted: this run spent {cost['usd']:.4f} USD{of}{possibly_line(cost)}; {left} {unit} left"
    if held is not None:
        where = "batches" if batches else f"{held.in_flight} requests"
        line += (f", {held.waiting} of them are held back by the cap ({held.reserved:.4f} USD reserved by {where} in "
                 f"flight, {held.left:.4f} USD left; a higher --max-cost lets more go at once)")
    again = " (batches in flight are polled again)" if batches else ""
    return f"{line}; run the same command again to resume{again}"


def possibly_line(cost: dict) -> str:
    """The cost line's words for requests given up on, or '' when there were none."""
    if not cost.get("possibly_billed"):
        return ""
    return (f"; {cost['possibly_billed']} requests given up on (timeouts, dropped connections) may also have been "
            f"billed, up to {cost['possibly_billed_usd']:.4f} USD")
