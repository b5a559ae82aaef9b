"""Annotating a workspace: pick the items still to do, ask the annotator, store one record each.

Every item gets a request key, a hash of what decides the answer (item content, round, prompt
version, annotator, parameters); items of identical content share it, so records, "done" and
batch requests go by (item, key), never by key alone. An item counts as done when it has a valid
or refused record under the current key; everything else (no record, an invalid one, one made
under another prompt or item version) is asked again, so re-running resumes an interrupted run
and re-asks only what failed. Each Messages request is in the cost ledger before it is sent
and its reply as soon as it is read (``curate/anthropic_api/spend.py``), the record right after, so a killed
run loses at most the replies in flight, which the ledger still counts as possibly billed; a
reply paid for is entered in the ledger (and counts against ``--max-cost``) even when a re-ask
after it fails.

One run at a time works on one (annotator, round) of a workspace (``curate.core.lock``): a second
would ask for the same pending items and pay for them twice.

``--max-cost`` holds against the worst case: before a request is sent, the most it and its
re-asks could cost (``claude.worst_case_usd``) is reserved; a request that would not fit beside
what was spent, what is reserved for requests in flight and what requests given up on (timeouts)
may have cost is not sent, a retry after a timeout included.

Backends: ``anthropic:MODEL`` (Messages API, or Message Batches with ``batch=True``) and
``local:MODEL`` (a causal LM answering by constrained choice).
"""
from __future__ import annotations

import math
import os
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tqdm import tqdm

from annotate import claude
from annotate.options import DEFAULTS
from annotate.prompts import kind_of, load_prompt, read_answer
from annotate.store import add_batch, add_ledger, add_run, close_batch, ledger_totals, mark_saved, \
    open_annotations, open_batches, saved_results, write_annotation, LEDGER_TOKENS
from curate.anthropic_api import client as api, prices, spend
from curate.core.clock import now
from curate.core.errors import CurateError
from curate.items.canonical import canonical_json, sha256_text
from curate.core.lock import work_lock
from curate.items.store import Workspace
from scoring import model_spec

def parse_annotator(spec: str) -> tuple[str, str]:
    """(backend, model) of an annotator, in every stage's model grammar (``scoring.model_spec``)."""
    return model_spec.parse(spec, "annotator")


def request_key(item: dict, round: int, prompt_version: str, annotator: str, params: dict) -> str:
    return sha256_text(canonical_json({"content_hash": item["content_hash"], "round": round,
                                       "prompt_version": prompt_version, "annotator": annotator,
                                       "params": params}))


def done_keys(ws: Workspace, annotator: str, round: int) -> set[tuple[str, str]]:
    """(item_id, request_key) of the items done: a key alone is shared by items of the same
    content, and one item's record must not count for its twin."""
    return {(r[0], r[1]) for r in ws.conn.execute(
        "SELECT item_id, request_key FROM annotations WHERE annotator = ? AND round = ? "
        "AND status IN ('valid', 'refused')", (annotator, round))}


@dataclass
class Job:
    """Shared state of one run: what to write, where, and the counts for the summary."""
    ws: Workspace
    annotator: str
    round: int
    run_id: str
    prompt_version: dict[str, str]           # item kind -> prompt version
    keys: dict[str, str]                     # item_id -> request key
    counts: Counter = field(default_factory=Counter)
    spent: float = 0.0
    stopped: str | None = None
    over_budget: str | None = None           # why --max-cost kept the next request back
    last_error: str | None = None
    retries: int = 0
    bar: tqdm | None = None
    held: spend.Held | None = None           # how --max-cost holds the run back now (None: it does not)
    batches: bool = False                    # the Message Batches API: the cap holds items, not requests
    told: bool = False                       # why the cap slows the run was said

    def save(self, item: dict, status: str, result, raw: str | None, snapshot: str | None,
             attempts: list[dict] = (), *, batch: bool = False, model: str | None = None,
             ledgered: int = 0, batch_request: tuple[str, str] | None = None) -> None:
        """One record plus ledger rows for the replies not yet entered (``ledgered`` already are);
        ``batch_request`` (batch_id, custom_id): the batch result this is, marked stored."""
        costs = [a.get("usd", 0.0) for a in attempts]
        cost = {k: sum(a["usage"][k] for a in attempts) for k in LEDGER_TOKENS} if attempts else {}
        cost.update(usd=round(sum(costs), 8), replies=len(attempts), batch=batch)
        record = {"annotator": self.annotator, "round": self.round, "item_id": item["item_id"], "status": status,
                  "result": result if status == "valid" else None, "raw": raw, "prompt_version": self.prompt_version[kind_of(item)],
                  "model_snapshot": snapshot, "request_key": self.keys[item["item_id"]],
                  "content_hash": item["content_hash"]}
        with self.ws.transaction():
            write_annotation(self.ws, record, cost=cost, run_id=self.run_id)
            for n, a in enumerate(attempts[ledgered:], start=ledgered + 1):
                self.ledger(item, n, a, batch=batch)
            if batch_request is not None:
                mark_saved(self.ws, *batch_request)
        self.spent += sum(costs[ledgered:])
        self.counts[status] += 1
        self.tick()

    def bill(self, item: dict, attempts: list[dict], *, batch: bool = False,
             batch_request: tuple[str, str] | None = None, first: int = 1) -> None:
        """Ledger rows (and spend) for billed replies that leave no record yet: a reply to be
        asked again, or replies before a re-ask that failed. Paid is paid, whatever comes next."""
        with self.ws.transaction():
            for n, a in enumerate(attempts, start=first):
                self.ledger(item, n, a, batch=batch)
            if batch_request is not None:
                mark_saved(self.ws, *batch_request)
        self.spent += sum(a["usd"] for a in attempts)

    def ledger(self, item: dict, attempt: int, a: dict, *, batch: bool) -> None:
        add_ledger(self.ws, run_id=self.run_id, item_id=item["item_id"], request_key=self.keys[item["item_id"]],
                   attempt=attempt, batch=batch, model_snapshot=a.get("model"), usage=a["usage"], usd=a["usd"])

    @property
    def halted(self) -> bool:
        return self.stopped is not None or self.over_budget is not None

    def fail(self, message: str) -> None:
        self.counts["failed"] += 1
        self.last_error = message
        self.tick()

    def tick(self) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.show()

    def show(self, retrying: int | None = None) -> None:
        """Counts and spend on the progress bar; ``retrying``: retries made so far."""
        if retrying is not None:
            self.retries = retrying
        if self.bar is not None:
            cap = {"cap": self.held.progress(self.batches)} if self.held else {}
            self.bar.set_postfix(valid=self.counts["valid"], invalid=self.counts["invalid"],
                                 refused=self.counts["refused"], failed=self.counts["failed"],
                                 retries=self.retries, usd=f"{self.spent:.4f}", **cap, refresh=False)

    def hold(self, held: spend.Held | None) -> None:
        """The cap holds the run back (``held``) or lets it go again (None): on the progress line,
        and the first time in a line of its own saying why the run slows down."""
        self.held = held
        if self.bar is None or self.bar.disable:
            return
        if held is not None and not self.told:
            self.told = True
            self.bar.write(held.why(self.batches), file=sys.stderr)
        self.show()
        self.bar.refresh()


def annotate_workspace(root, round: int, annotator: str, *, batch=DEFAULTS["batch"],
                       concurrency=DEFAULTS["concurrency"], max_cost=DEFAULTS["max_cost"],
                       dry_run=DEFAULTS["dry_run"], limit=DEFAULTS["limit"], show_progress=True,
                       retries: int = DEFAULTS["retries"], backoff: float = DEFAULTS["backoff"],
                       parse_retries: int = DEFAULTS["parse_retries"], timeout: float = DEFAULTS["timeout"],
                       key_header: str | None = DEFAULTS["key_header"],
                       poll_interval: float = DEFAULTS["poll_interval"]) -> dict:
    """Annotate the items of ``root`` (the first ``limit`` in row order) that have no valid or
    refused record for ``annotator`` in ``round`` under the current request key.

    Returns a summary: counts valid / invalid / refused / failed (transient errors outlasted the
    retries; still pending) / skipped (already done) / remaining (still without a valid or refused
    record), the run's ledger totals, the prompt-cache decision, ``stopped`` (why the run ended
    early, with the run's true spend, or None) and run_id. ``dry_run``: what a run would send and
    its cost bounds (``dry_summary``), nothing sent.
    """
    if round not in (1, 2):
        raise CurateError(f"round must be 1 or 2, not {round}")
    annotator = model_spec.canonical(annotator, "annotator")  # a bare NAME is stored as local:NAME
    backend, model = parse_annotator(annotator)
    if batch and backend != "anthropic":
        raise CurateError("--batch works with anthropic: annotators only")
    if concurrency < 1:
        raise CurateError("concurrency must be at least 1")
    retry = dict(retries=retries, backoff=backoff)
    ws = open_annotations(root)
    try:
        if dry_run:
            work = Work.plan(ws, annotator, round, limit, parse_retries)
            return dry_summary(work, batch=batch, parse_retries=parse_retries, concurrency=concurrency,
                               timeout=timeout, key_header=key_header, show_progress=show_progress, **retry)
        with work_lock(root, f"annotate {annotator} round {round}", command="annotate"):
            work = Work.plan(ws, annotator, round, limit, parse_retries)
            return run(ws, work, batch=batch, concurrency=concurrency, max_cost=max_cost, limit=limit,
                       show_progress=show_progress, parse_retries=parse_retries, timeout=timeout,
                       key_header=key_header, poll_interval=poll_interval, **retry)
    finally:
        ws.close()


@dataclass
class Work:
    """What one (annotator, round) has to do: its items, request keys, and those still to ask."""
    annotator: str
    round: int
    backend: str
    model: str
    version: dict[str, str]          # item kind -> prompt version
    params: dict
    items: list[dict]
    keys: dict[str, str]
    todo: list[dict]
    local: object = None

    @classmethod
    def plan(cls, ws: Workspace, annotator: str, round: int, limit, parse_retries: int) -> "Work":
        backend, model = parse_annotator(annotator)
        items = ws.items()[:limit] if limit else ws.items()
        local = None
        kinds = sorted({kind_of(it) for it in items})
        if backend == "local":
            from annotate.local import LocalAnnotator
            local = LocalAnnotator(model)  # resolves the weights; loads them on first use
            version, params = {k: local.prompt_version(round, k) for k in kinds}, {"snapshot": local.snapshot,
                                                                                    **local.params}
        else:
            prices.price(model)  # unknown model: fail before any request
            version = {k: load_prompt(round, kind=k).version for k in kinds}
            params = {"model": model, "max_tokens": claude.MAX_TOKENS, "tool_choice": "any",
                      "parse_retries": parse_retries}
        keys = {it["item_id"]: request_key(it, round, version[kind_of(it)], annotator, params) for it in items}
        done = done_keys(ws, annotator, round)
        todo = [it for it in items if (it["item_id"], keys[it["item_id"]]) not in done]
        return cls(annotator, round, backend, model, version, params, items, keys, todo, local)


def run(ws: Workspace, work: Work, *, batch, concurrency, max_cost, limit, show_progress, retries, backoff,
        parse_retries, timeout, key_header, poll_interval) -> dict:
    annotator, round, model = work.annotator, work.round, work.model
    client, cache = None, None
    if work.backend == "anthropic":
        client = api.make_client(timeout=timeout, key_header=key_header)  # no key: fail before a run is recorded
        if work.todo:
            cache = cache_decision(client, model, work.todo[0], round, retries=retries, backoff=backoff)
    checked = None  # local: refused before a run is recorded (an item past the context, the engine's self-check)
    if work.backend == "local":
        checked = work.local.check(work.todo, round)
    left = None
    if work.backend == "anthropic":  # requests an earlier run of this work left in flight (kill -9)
        left = spend.settle_left_in_flight(ws, "annotation_ledger", "SELECT run_id FROM annotation_runs WHERE "
                                           "annotator = ? AND round = ?", (annotator, round))
    run_id = f"run-{now().replace(':', '').replace('+0000', 'Z')}-{uuid.uuid4().hex[:8]}"
    versions = work.version
    info = {"backend": work.backend, "model": model, "params": work.params,
            "prompt_version": next(iter(versions.values())) if len(versions) == 1 else versions,
            "batch": batch, "concurrency": concurrency, "max_cost": max_cost, "limit": limit, "cache": cache,
            "base_url": os.environ.get("ANTHROPIC_BASE_URL") if work.backend == "anthropic" else None}
    if checked is not None:
        info["self_check"] = checked
    add_run(ws, run_id=run_id, annotator=annotator, round=round, info=info)
    job = Job(ws, annotator, round, run_id, work.version, work.keys, batches=batch)
    job.bar = tqdm(total=len(work.todo), unit="item", desc=f"round {round} {annotator}", disable=not show_progress)
    marked = bool(cache and cache["marked"])
    interrupted = False
    try:
        if work.backend == "local":
            run_local(job, work.todo, work.local)
        elif batch:
            run_batches(job, work.todo, model, client, cache=marked, max_cost=max_cost, retries=retries,
                        backoff=backoff, parse_retries=parse_retries, poll_interval=poll_interval)
        else:
            run_messages(job, work.todo, model, client, cache=marked, concurrency=concurrency, max_cost=max_cost,
                         retries=retries, backoff=backoff, parse_retries=parse_retries)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        job.bar.close()
        if interrupted and work.backend == "anthropic":  # Ctrl-C: where the run stands, not a bare "Aborted!"
            print(spend.interrupted(max_cost, ledger_totals(ws, run_id), left=len(left_to_do(ws, work)),
                                    held=job.held, batches=batch), file=sys.stderr)
    cost = ledger_totals(ws, run_id)
    rest = left_to_do(ws, work)
    if job.over_budget is not None and job.stopped is None:
        answered = job.counts["valid"] + job.counts["invalid"] + job.counts["refused"]
        most = worst_left(rest, work, cache=marked, batch=batch, parse_retries=parse_retries)
        job.stopped = spend.cap_reached(max_cost, job.over_budget, cost, left=len(rest), done=answered, worst_left=most)
    remaining = len(rest)
    return {"run_id": run_id, "annotator": annotator, "backend": work.backend, "round": round, "items": len(work.items),
            "skipped": len(work.items) - len(work.todo), "valid": job.counts["valid"],
            "invalid": job.counts["invalid"], "refused": job.counts["refused"], "failed": job.counts["failed"],
            "remaining": remaining, "retries": job.retries, "stopped": job.stopped, "last_error": job.last_error,
            "cache": cache, "cost": cost, "left_in_flight": left}


def left_to_do(ws: Workspace, work: Work) -> list[dict]:
    """The items of ``work`` still without a valid or refused record under their current key."""
    done = done_keys(ws, work.annotator, work.round)
    return [it for it in work.items if (it["item_id"], work.keys[it["item_id"]]) not in done]


def worst_left(items: list[dict], work: Work, *, cache: bool, batch: bool, parse_retries: int) -> float:
    """What ``items`` could cost at most, as ``--max-cost`` reserves it: each item's request and
    re-asks (a batch reserves its first ask)."""
    total = 0.0
    for it in items:
        params = claude.request_params(work.model, it, work.round, cache=cache)
        total += claude.worst_case_usd(params, api.input_bound(params), attempts=1 if batch else parse_retries + 1,
                                       batch=batch)
    return total


def cache_decision(client, model: str, item: dict, round: int, **retry) -> dict:
    """Whether to mark the shared prefix for the prompt cache: only when the API would cache it."""
    tokens, method = claude.prefix_tokens(client, model, item, round, counters=api.Counters(), **retry)
    minimum = prices.model_info(model).cache_minimum
    return {"prefix_tokens": tokens, "method": method, "minimum": minimum, "marked": api.cacheable(tokens, model)}


def dry_summary(work: Work, *, batch: bool, parse_retries: int, concurrency: int, timeout: float, key_header,
                show_progress: bool, retries: int, backoff: float) -> dict:
    """What a run would send and what it could cost at most, nothing sent.

    Input tokens come from the endpoint's ``count_tokens`` where it offers one (and a key is
    set), else from ``api.input_bound``; ``input_tokens_method`` says which. Two ceilings:
    ``usd_first_answers`` if every first reply is usable, ``usd_upper_bound`` if every item needs
    all its re-asks; both price every reply at max_tokens and no cache reads, and each request's
    input at the larger of the endpoint's count and the byte bound (``input_tokens_bound``), so
    an endpoint that under-counts cannot lower a ceiling below what ``--max-cost`` reserves. A
    local annotator costs nothing."""
    out = {"dry_run": True, "annotator": work.annotator, "round": work.round, "items": len(work.items),
           "skipped": len(work.items) - len(work.todo), "to_annotate": len(work.todo), "input_tokens": 0,
           "input_tokens_method": None, "max_output_tokens": 0, "usd_first_answers": 0.0, "usd_upper_bound": 0.0,
           "cache": None}
    if work.backend == "local" or not work.todo:
        return out
    client = api.make_client(timeout=timeout, key_header=key_header) if os.environ.get("ANTHROPIC_API_KEY") else None
    retry = dict(retries=retries, backoff=backoff)
    cache = cache_decision(client, work.model, work.todo[0], work.round, **retry)
    params = [claude.request_params(work.model, it, work.round, cache=cache["marked"]) for it in work.todo]
    counted = count_all(client, params, concurrency=concurrency, show_progress=show_progress, **retry)
    method = "count_tokens" if counted is not None else "bound"
    bounds = [api.input_bound(p) for p in params]
    tokens = counted if counted is not None else bounds
    ceiling = [max(n, b) for n, b in zip(tokens, bounds)]
    first = sum(claude.worst_case_usd(p, n, attempts=1, batch=batch) for p, n in zip(params, ceiling))
    every = sum(claude.worst_case_usd(p, n, attempts=parse_retries + 1, batch=batch) for p, n in zip(params, ceiling))
    return {**out, "input_tokens": sum(tokens), "input_tokens_bound": sum(bounds), "input_tokens_method": method,
            "max_output_tokens": claude.MAX_TOKENS * len(params), "usd_first_answers": ceil4(first),
            "usd_upper_bound": ceil4(every), "parse_retries": parse_retries, "cache": cache}


def ceil4(usd: float) -> float:
    """Rounded up to 4 decimals: a ceiling must not shrink when it is printed."""
    return math.ceil(usd * 10_000) / 10_000


def count_all(client, params: list[dict], *, concurrency: int, show_progress: bool, retries: int,
              backoff: float) -> list[int] | None:
    """The endpoint's token count of every request, or None where it does not count (or no client)."""
    if client is None:
        return None
    counters = api.Counters()
    first = api.count_tokens(client, params[0], retries=retries, backoff=backoff, counters=counters)
    if first is None:
        return None
    with ThreadPoolExecutor(concurrency) as pool:
        rest = pool.map(lambda p: api.count_tokens(client, p, retries=retries, backoff=backoff, counters=counters),
                        params[1:])
        counts = [first, *tqdm(rest, total=len(params) - 1, unit="request", desc="counting tokens",
                               disable=not show_progress)]
    if any(n is None for n in counts):
        return None
    return counts


# --- local ----------------------------------------------------------------------------------

def run_local(job: Job, todo: list[dict], local) -> None:
    """Items are scored a batch at a time; each is stored as its batch ends, so a killed run resumes."""
    for item, result, raw in local.annotate_all(todo, job.round):
        job.save(item, "valid", result, raw, local.snapshot)


# --- anthropic: one Messages request per item, bounded concurrency ------------------------------

def run_messages(job: Job, todo: list[dict], model: str, client, *, cache: bool, concurrency: int, max_cost,
                 retries: int, backoff: float, parse_retries: int) -> None:
    """Items ``concurrency`` at a time, each sent once its worst case fits under ``max_cost``
    (``curate.anthropic_api.spend``); each reply is in the ledger before its record is written."""
    counters = api.Counters()
    spending = spend.Spending(job.ws, cap=max_cost, model=model, table="annotation_ledger",
                              add=lambda ws, **row: add_ledger(ws, run_id=job.run_id, batch=False, **row))

    def start(item: dict):
        params = claude.request_params(model, item, job.round, cache=cache)
        bounds = claude.attempt_bounds(params, api.input_bound(params), attempts=parse_retries + 1, batch=False)
        tab = spending.tab(bounds, item_id=item["item_id"], request_key=job.keys[item["item_id"]])
        return tab, lambda: claude.ask(client, params, item, job.round, tab=tab, retries=retries, backoff=backoff,
                                       parse_retries=parse_retries, counters=counters)

    def finish(item: dict, tab: spend.Tab, future) -> None:
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
            job.save(item, reply.status, reply.result, reply.raw, reply.model_snapshot, priced(model, reply.attempts),
                     ledgered=len(reply.attempts))
        job.show(counters.retrying)

    try:
        kept_back = spending.send_all(todo, start, finish, concurrency=concurrency, halted=lambda: job.halted,
                                      waiting=job.hold)
    finally:
        spending.close()
    if kept_back is not None:
        job.over_budget = spend.kept_back(kept_back)


def priced(model: str, attempts: list[dict]) -> list[dict]:
    """``attempts`` with each reply's USD at the Messages API's prices."""
    for a in attempts:
        a["usd"] = prices.usd(model, **a["usage"])
    return attempts


# --- anthropic: Message Batches --------------------------------------------------------------

def custom_id(key: str, item_id: str, attempt: int) -> str:
    """A batch request's id, unique per item: items of the same content share ``key``."""
    return f"k{sha256_text(item_id + chr(0) + key).split(':')[-1][:40]}-{attempt}"


def run_batches(job: Job, todo: list[dict], model: str, client, *, cache: bool, max_cost, retries: int,
                backoff: float, parse_retries: int, poll_interval: float) -> None:
    """Submit the pending items as batches, poll until each ends, store results matched by
    custom_id. Errored / expired / canceled requests and unreadable replies go into the next batch
    (bounded); batches already submitted by a killed run are polled, not submitted again.

    Under --max-cost a batch takes the items whose worst case fits beside what was spent and what
    is reserved for batches still processing; the rest wait for the next batch, which is sent
    once a batch has ended and its true cost is known."""
    counters = api.Counters()
    by_id = {it["item_id"]: it for it in todo}
    pending = open_batches(job.ws, annotator=job.annotator, round=job.round)
    in_flight = {item_id for mapping in pending.values() for item_id, _ in mapping.values()}
    queue = [it for it in todo if it["item_id"] not in in_flight]
    replies: dict[str, list[dict]] = {}
    resubmits: Counter = Counter()
    submitted: Counter = Counter()

    def call(fn):
        return api.with_retries(fn, client=client, retries=retries, backoff=backoff, counters=counters)

    def item(item_id: str) -> dict:
        if item_id not in by_id:  # submitted by an earlier run for an item outside this selection
            by_id.update({it["item_id"]: it for it in job.ws.items() if it["item_id"] not in by_id})
        return by_id[item_id]

    def worst(it: dict) -> float:
        params = claude.request_params(model, it, job.round, cache=cache)
        return claude.worst_case_usd(params, api.input_bound(params), attempts=1, batch=True)

    reserved = {batch_id: sum(worst(item(iid)) for iid, _ in mapping.values()) for batch_id, mapping in pending.items()}
    while job.stopped is None:
        take, wait_list, reserve = [], [], 0.0
        for it in queue:
            cost = worst(it)
            if max_cost is not None and job.spent + sum(reserved.values()) + reserve + cost > max_cost:
                wait_list.append(it)
            else:
                take.append(it)
                reserve += cost
        queue = wait_list
        if max_cost is not None and queue and (take or pending):  # held back beside batches in flight
            held = sum(reserved.values()) + reserve
            job.hold(spend.Held(max_cost, held, max(max_cost - job.spent - held, 0.0), len(pending) + bool(take),
                                len(queue)))
        elif job.held is not None:
            job.hold(None)
        if take:
            rows = []
            for it in take:
                submitted[it["item_id"]] += 1
                rows.append((custom_id(job.keys[it["item_id"]], it["item_id"], submitted[it["item_id"]]),
                             it["item_id"], job.keys[it["item_id"]]))
            requests = [{"custom_id": cid, "params": claude.request_params(model, by_id[iid], job.round, cache=cache)}
                        for cid, iid, _ in rows]
            try:
                created = call(lambda: client.messages.batches.create(requests=requests))
                batch_status(client, created)
            except (api.Stop, api.GaveUp) as exc:
                job.stopped = str(exc)
                break
            add_batch(job.ws, batch_id=created.id, run_id=job.run_id, annotator=job.annotator,
                      round=job.round, requests=rows)
            pending[created.id] = {cid: (iid, key) for cid, iid, key in rows}
            reserved[created.id] = reserve
        if not pending:
            if queue:
                job.over_budget = spend.kept_back(worst(queue[0]))
            break
        batch_id, mapping = next(iter(pending.items()))
        try:
            while batch_status(client, call(lambda: client.messages.batches.retrieve(batch_id))) != "ended":
                time.sleep(poll_interval)
            results = call(lambda: list(client.messages.batches.results(batch_id)))
        except (api.Stop, api.GaveUp) as exc:
            job.stopped = f"{exc}; batch {batch_id} is kept and polled again on the next run"
            break
        seen, saved = set(), saved_results(job.ws, batch_id)
        for res in results:
            if res.custom_id not in mapping:
                continue
            seen.add(res.custom_id)
            item_id, key = mapping[res.custom_id]
            job.keys.setdefault(item_id, key)
            if res.custom_id in saved:  # stored by a run killed before it closed this batch
                requeue_unfinished(job, item_id, key, by_id, queue)
                continue
            handle_result(job, item(item_id), res, model, replies, resubmits, queue, retries, parse_retries, client,
                          (batch_id, res.custom_id))
        for cid, (item_id, _) in mapping.items():  # a request with no result line: ask again
            if cid not in seen and item_id in by_id:
                queue.append(by_id[item_id])
        close_batch(job.ws, batch_id)
        del pending[batch_id]
        reserved.pop(batch_id, None)
        job.show(counters.retrying)


def batch_status(client, batch) -> str:
    """A message batch's processing status; Stop when the reply is not a message batch."""
    status = getattr(batch, "processing_status", None)
    if not isinstance(status, str) or not isinstance(getattr(batch, "id", None), str):
        raise api.not_an_api_reply(client, batch, "a message batch")
    return status


def requeue_unfinished(job: Job, item_id: str, key: str, by_id: dict, queue: list) -> None:
    """A result stored by an earlier run that left its item without a record (an unusable reply
    whose re-ask was never sent): ask again, without storing or billing that result twice."""
    stored = job.ws.conn.execute("SELECT 1 FROM annotations WHERE annotator = ? AND round = ? AND item_id = ? "
                                 "AND request_key = ?", (job.annotator, job.round, item_id, key)).fetchone()
    if not stored and item_id in by_id:
        queue.append(by_id[item_id])


def handle_result(job: Job, item: dict, res, model: str, replies: dict, resubmits: Counter, queue: list,
                  retries: int, parse_retries: int, client, request: tuple[str, str]) -> None:
    kind = res.result.type
    if kind != "succeeded":
        resubmits[item["item_id"]] += 1
        if resubmits[item["item_id"]] <= retries:
            queue.append(item)
        else:
            job.fail(f"batch request for {item['item_id']} ended {kind} {retries + 1} times")
        return
    message = api.checked_message(client, res.result.message)
    blocks = api.content_blocks(message)
    answer = read_answer(blocks, message.stop_reason, job.round, item)
    usage = api.usage_of(message)
    attempt = {"content": blocks, "stop_reason": message.stop_reason, "problem": claude.judge(answer),
               "usage": usage, "model": message.model, "usd": prices.usd(model, batch=True, **usage)}
    mine = replies.setdefault(item["item_id"], [])
    mine.append(attempt)
    if answer.status == "unusable" and len(mine) <= parse_retries:
        job.bill(item, [attempt], batch=True, batch_request=request, first=len(mine))
        queue.append(item)
        return
    status = "invalid" if answer.status == "unusable" else answer.status
    reply = claude.Reply(status, answer.result, mine, message.model)
    job.save(item, status, answer.result, reply.raw, message.model, mine, batch=True, ledgered=len(mine) - 1,
             batch_request=request)
