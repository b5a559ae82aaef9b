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
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import NamedTuple

from tqdm import tqdm

from annotate import claude
from annotate.options import AnnotateOptions
from annotate.prompts import kind_of, load_prompt, read_answer
from annotate.store import LEDGER, MIGRATIONS, add_batch, add_run, close_batch, mark_saved, open_batches, \
    saved_results, write_annotation
from curate.anthropic_api import client as api, prices, spend
from curate.asking.claude import send_messages
from curate.asking.job import Job
from curate.asking.ledger import LEDGER_TOKENS
from curate.core.errors import CurateError
from curate.items.canonical import canonical_json, sha256_text
from curate.items.stage import Stage
from curate.items.store import Workspace
from scoring import model_spec

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


class LocalReply(NamedTuple):
    """A local model's answer as ``AnnotationJob.save`` stores it (no attempts to bill)."""
    status: str
    result: dict | None
    raw: str
    model_snapshot: str | None
    attempts: tuple = ()


@dataclass
class AnnotationJob(Job):
    """One annotation run's state (``curate.asking.job.Job``), and how it stores a record and its
    replies' ledger rows."""
    annotator: str = ""
    round: int = 1
    prompt_version: dict = None              # item kind -> prompt version
    keys: dict = None                        # item_id -> request key

    def save(self, item: dict, reply, *, batch: bool = False, ledgered: int = 0,
             batch_request: tuple[str, str] | None = None) -> None:
        """One record of ``reply`` (``annotate.claude.Reply``: status, result, raw text, model
        snapshot, priced attempts) plus ledger rows for the replies not yet entered (``ledgered``
        already are); ``batch_request`` (batch_id, custom_id): the batch result this is, marked stored."""
        status, result, raw, snapshot, attempts = (reply.status, reply.result, reply.raw, reply.model_snapshot,
                                                    reply.attempts)
        costs = [a.get("usd", 0.0) for a in attempts]
        cost = {k: sum(a["usage"][k] for a in attempts) for k in LEDGER_TOKENS} if attempts else {}
        cost.update(usd=round(sum(costs), 8), replies=len(attempts), batch=batch)
        record = {"annotator": self.annotator, "round": self.round, "item_id": item["item_id"], "status": status,
                  "result": result if status == "valid" else None, "raw": raw,
                  "prompt_version": self.prompt_version[kind_of(item)], "model_snapshot": snapshot,
                  "request_key": self.keys[item["item_id"]], "content_hash": item["content_hash"]}
        with self.ws.transaction():
            write_annotation(self.ws, record, cost=cost, run_id=self.run_id)
            for n, a in enumerate(attempts[ledgered:], start=ledgered + 1):
                self.ledger(item, n, a, batch=batch)
            if batch_request is not None:
                mark_saved(self.ws, *batch_request)
        self.spent += sum(costs[ledgered:])
        self.done([status])

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
        LEDGER.add(self.ws, run_id=self.run_id, item_id=item["item_id"], request_key=self.keys[item["item_id"]],
                   attempt=attempt, batch=batch, model_snapshot=a.get("model"), usage=a["usage"], usd=a["usd"])


class Annotate(Stage):
    """`curate annotate`: the items (the first ``limit`` in row order) that have no valid or
    refused record for the annotator in the round under the current request key, asked and stored
    one record each. The summary: counts valid / invalid / refused / failed (transient errors
    outlasted the retries; still pending) / skipped (already done) / remaining (still without a
    valid or refused record), the run's ledger totals, the prompt-cache decision, ``stopped`` (why
    the run ended early, with the run's true spend, or None) and run_id. ``dry_run``: what a run
    would send and its cost bounds (``dry_summary``), nothing sent."""
    name = "annotate"
    Options = AnnotateOptions

    def __init__(self, root, options):
        # a bare NAME is stored as local:NAME
        options = replace(options, annotator=model_spec.canonical(options.annotator, "annotator"))
        super().__init__(root, options)
        self.backend, self.model = model_spec.parse(options.annotator, "annotator")
        if options.batch and self.backend != "anthropic":
            raise CurateError("--batch works with anthropic: annotators only")

    @classmethod
    def provides(cls, options) -> set[tuple]:
        """The round's records of the annotator (none for a dry run), as the filter's kinds read them."""
        return set() if options.dry_run else {
            ("annotation", model_spec.canonical(options.annotator, "annotator"), options.round)}

    def work(self) -> str | None:
        o = self.options
        return None if o.dry_run else f"annotate {o.annotator} round {o.round}"

    def migrate(self, ws: Workspace) -> None:
        ws.migrate(MIGRATIONS)  # the annotation tables

    def execute(self) -> dict:
        o = self.options
        ws = self.ws
        work = Work.plan(ws, o.annotator, o.round, o.limit, o.parse_retries)
        if o.dry_run:
            return dry_summary(work, o)
        try:
            return self.annotate(ws, work)
        finally:
            if work.local is not None:
                work.local.close()  # the scoring backend it opened, also on an error

    def annotate(self, ws: Workspace, work: "Work") -> dict:
        o = self.options
        client, cache, checked, left = self.prepare(ws, work)
        run_id = self.run_id("run", stamped=True)
        info = {"backend": work.backend, "model": work.model, "params": work.params,
                "prompt_version": next(iter(work.version.values())) if len(work.version) == 1 else work.version,
                "batch": o.batch, "concurrency": o.concurrency, "max_cost": o.max_cost, "limit": o.limit,
                "cache": cache, "base_url": os.environ.get("ANTHROPIC_BASE_URL") if work.backend == "anthropic" else None,
                **({"self_check": checked} if checked is not None else {})}
        add_run(ws, run_id=run_id, annotator=o.annotator, round=o.round, info=info)
        job = AnnotationJob(ws, run_id, ("valid", "invalid", "refused"), batches=o.batch, annotator=o.annotator,
                            round=o.round, prompt_version=work.version, keys=work.keys)
        job.bar = self.progress(len(work.todo), "item", f"round {o.round} {o.annotator}")
        self.dispatch(job, work, client, bool(cache and cache["marked"]))
        return self.summary(ws, job, work, cache, left, bool(cache and cache["marked"]))

    def prepare(self, ws: Workspace, work: "Work") -> tuple:
        """What is refused before a run is recorded (no key, an item past a local model's context,
        the scoring backend's self-check), the prompt-cache decision, and the requests an earlier run of
        this work left in flight (kill -9), settled: (client, cache, checked, left)."""
        o = self.options
        client = cache = checked = left = None
        if work.backend == "anthropic":
            client = api.make_client(timeout=o.timeout, key_header=o.key_header, stage="annotate")
            if work.todo:
                cache = cache_decision(client, work.model, work.todo[0], o.round, retries=o.retries, backoff=o.backoff)
            left = spend.settle_left_in_flight(ws, LEDGER.table, "SELECT run_id FROM annotation_runs WHERE "
                                               "annotator = ? AND round = ?", (o.annotator, o.round))
        else:
            checked = work.local.check(work.todo, o.round)
        return client, cache, checked, left

    def dispatch(self, job: AnnotationJob, work: "Work", client, cache: bool) -> None:
        """The backend asks: a local model, Claude's Messages API, or its Message Batches API.
        Ctrl-C says where the run stands (spent, left, the cap), not a bare "Aborted!"."""
        o = self.options
        try:
            if work.backend == "local":
                for item, result, raw in work.local.annotate_all(work.todo, o.round):  # each stored as it comes
                    job.save(item, LocalReply("valid", result, raw, work.local.snapshot))
            elif o.batch:
                BatchRun(job, work.todo, work.model, client, cache=cache, options=o).run()
            else:
                run_messages(job, work.todo, work.model, client, cache=cache, options=o)
        except KeyboardInterrupt:
            if work.backend == "anthropic":
                job.bar.close()
                print(spend.interrupted(o.max_cost, LEDGER.totals(job.ws, job.run_id), left=len(left_to_do(job.ws, work)),
                                        held=job.held, batches=o.batch), file=sys.stderr)
            raise
        finally:
            job.bar.close()

    def summary(self, ws: Workspace, job: AnnotationJob, work: "Work", cache, left, marked: bool) -> dict:
        o = self.options
        cost = LEDGER.totals(ws, job.run_id)
        rest = left_to_do(ws, work)
        if job.over_budget is not None and job.stopped is None:
            answered = job.counts["valid"] + job.counts["invalid"] + job.counts["refused"]
            most = worst_left(rest, work, cache=marked, batch=o.batch, parse_retries=o.parse_retries)
            job.stopped = spend.cap_reached(o.max_cost, job.over_budget, cost, left=len(rest), done=answered,
                                            worst_left=most)
        return {"run_id": job.run_id, "annotator": o.annotator, "backend": work.backend, "round": o.round,
                "items": len(work.items), "skipped": len(work.items) - len(work.todo), "valid": job.counts["valid"],
                "invalid": job.counts["invalid"], "refused": job.counts["refused"], "failed": job.counts["failed"],
                "remaining": len(rest), "retries": job.retries, "stopped": job.stopped, "last_error": job.last_error,
                "cache": cache, "cost": cost, "left_in_flight": left}


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
        backend, model = model_spec.parse(annotator, "annotator")
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


def dry_summary(work: Work, o: AnnotateOptions) -> dict:
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
    client = api.make_client(timeout=o.timeout, key_header=o.key_header) if os.environ.get("ANTHROPIC_API_KEY") else None
    return {**out, **cost_ceilings(work.model, work.todo, work.round, o, client)}


def cost_ceilings(model: str, items: list[dict], round: int, o: AnnotateOptions, client=None) -> dict:
    """``dry_summary``'s tokens and ceilings of asking Claude ``model`` about ``items`` in
    ``round`` with ``o``'s batch and re-asks: input tokens counted by the endpoint with a
    ``client``, else bounded from the requests' bytes (``api.input_bound``: no key, no network)."""
    batch, parse_retries = o.batch, o.parse_retries
    retry = dict(retries=o.retries, backoff=o.backoff)
    cache = cache_decision(client, model, items[0], round, **retry)
    params = [claude.request_params(model, it, round, cache=cache["marked"]) for it in items]
    counted = count_all(client, params, concurrency=o.concurrency, show_progress=not o.quiet, **retry)
    method = "count_tokens" if counted is not None else "bound"
    bounds = [api.input_bound(p) for p in params]
    tokens = counted if counted is not None else bounds
    ceiling = [max(n, b) for n, b in zip(tokens, bounds)]
    first = sum(claude.worst_case_usd(p, n, attempts=1, batch=batch) for p, n in zip(params, ceiling))
    every = sum(claude.worst_case_usd(p, n, attempts=parse_retries + 1, batch=batch) for p, n in zip(params, ceiling))
    return {"input_tokens": sum(tokens), "input_tokens_bound": sum(bounds), "input_tokens_method": method,
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


# --- anthropic: one Messages request per item, bounded concurrency ------------------------------

def run_messages(job: AnnotationJob, todo: list[dict], model: str, client, *, cache: bool,
                 options: AnnotateOptions) -> None:
    """Items ``concurrency`` at a time, each sent once its worst case fits under ``max_cost``
    (``curate.asking.claude``); each reply is in the ledger before its record is written."""
    o, counters = options, api.Counters()
    spending = spend.Spending(job.ws, cap=o.max_cost, model=model, table=LEDGER.table,
                              add=lambda ws, **row: LEDGER.add(ws, run_id=job.run_id, batch=False, **row))

    def start(item: dict):
        params = claude.request_params(model, item, job.round, cache=cache)
        bounds = claude.attempt_bounds(params, api.input_bound(params), attempts=o.parse_retries + 1, batch=False)
        tab = spending.tab(bounds, item_id=item["item_id"], request_key=job.keys[item["item_id"]])
        return tab, lambda: claude.ask(client, params, item, job.round, tab=tab, options=o, counters=counters)

    def store(item: dict, reply) -> None:
        job.save(item, replace(reply, attempts=priced(model, reply.attempts)), ledgered=len(reply.attempts))

    send_messages(job, todo, spending=spending, start=start, store=store, concurrency=o.concurrency,
                  counters=counters)


def priced(model: str, attempts: list[dict]) -> list[dict]:
    """``attempts`` with each reply's USD at the Messages API's prices."""
    for a in attempts:
        a["usd"] = prices.usd(model, **a["usage"])
    return attempts


# --- anthropic: Message Batches --------------------------------------------------------------

def custom_id(key: str, item_id: str, attempt: int) -> str:
    """A batch request's id, unique per item: items of the same content share ``key``."""
    return f"k{sha256_text(item_id + chr(0) + key).split(':')[-1][:40]}-{attempt}"


class BatchRun:
    """Submit the pending items as batches, poll until each ends, store results matched by
    custom_id. Errored / expired / canceled requests and unreadable replies go into the next batch
    (bounded); batches already submitted by a killed run are polled, not submitted again.

    Under --max-cost a batch takes the items whose worst case fits beside what was spent and what
    is reserved for batches still processing; the rest wait for the next batch, which is sent
    once a batch has ended and its true cost is known."""

    def __init__(self, job: AnnotationJob, todo: list[dict], model: str, client, *, cache: bool,
                 options: AnnotateOptions):
        self.job, self.model, self.client, self.cache, self.o = job, model, client, cache, options
        self.counters = api.Counters()
        self.by_id = {it["item_id"]: it for it in todo}
        self.pending = open_batches(job.ws, annotator=job.annotator, round=job.round)
        in_flight = {item_id for mapping in self.pending.values() for item_id, _ in mapping.values()}
        self.queue = [it for it in todo if it["item_id"] not in in_flight]
        self.replies: dict[str, list[dict]] = {}
        self.resubmits: Counter = Counter()
        self.submitted: Counter = Counter()
        self.reserved = {batch_id: sum(self.worst(self.item(iid)) for iid, _ in mapping.values())
                         for batch_id, mapping in self.pending.items()}

    def call(self, fn):
        return api.with_retries(fn, client=self.client, retries=self.o.retries, backoff=self.o.backoff,
                                counters=self.counters)

    def item(self, item_id: str) -> dict:
        if item_id not in self.by_id:  # submitted by an earlier run for an item outside this selection
            self.by_id.update({it["item_id"]: it for it in self.job.ws.items() if it["item_id"] not in self.by_id})
        return self.by_id[item_id]

    def worst(self, it: dict) -> float:
        params = claude.request_params(self.model, it, self.job.round, cache=self.cache)
        return claude.worst_case_usd(params, api.input_bound(params), attempts=1, batch=True)

    def run(self) -> None:
        job = self.job
        while job.stopped is None:
            take, reserve = self.fitting()
            if take and not self.submit(take, reserve):
                break
            if not self.pending:
                if self.queue:
                    job.over_budget = spend.kept_back(self.worst(self.queue[0]))
                break
            batch_id, mapping = next(iter(self.pending.items()))
            if not self.collect(batch_id, mapping):
                break
            job.show(self.counters.retrying)

    def fitting(self) -> tuple[list[dict], float]:
        """The queued items the next batch takes (those whose worst case fits the cap beside what is
        spent and reserved), and what they reserve; the cap's hold on the rest, said."""
        cap, job = self.o.max_cost, self.job
        take, wait_list, reserve = [], [], 0.0
        for it in self.queue:
            cost = self.worst(it)
            if cap is not None and job.spent + sum(self.reserved.values()) + reserve + cost > cap:
                wait_list.append(it)
            else:
                take.append(it)
                reserve += cost
        self.queue = wait_list
        if cap is not None and self.queue and (take or self.pending):  # held back beside batches in flight
            held = sum(self.reserved.values()) + reserve
            job.hold(spend.Held(cap, held, max(cap - job.spent - held, 0.0), len(self.pending) + bool(take),
                                len(self.queue)))
        elif job.held is not None:
            job.hold(None)
        return take, reserve

    def submit(self, take: list[dict], reserve: float) -> bool:
        """One batch of ``take``, recorded as in flight; False when the API stopped the run."""
        job = self.job
        rows = []
        for it in take:
            self.submitted[it["item_id"]] += 1
            rows.append((custom_id(job.keys[it["item_id"]], it["item_id"], self.submitted[it["item_id"]]),
                         it["item_id"], job.keys[it["item_id"]]))
        requests = [{"custom_id": cid, "params": claude.request_params(self.model, self.by_id[iid], job.round,
                                                                       cache=self.cache)} for cid, iid, _ in rows]
        try:
            created = self.call(lambda: self.client.messages.batches.create(requests=requests))
            batch_status(self.client, created)
        except (api.Stop, api.GaveUp) as exc:
            job.stopped = str(exc)
            return False
        add_batch(job.ws, batch_id=created.id, run_id=job.run_id, annotator=job.annotator, round=job.round,
                  requests=rows)
        self.pending[created.id] = {cid: (iid, key) for cid, iid, key in rows}
        self.reserved[created.id] = reserve
        return True

    def collect(self, batch_id: str, mapping: dict) -> bool:
        """Poll one batch until it ends and store its results; False when the API stopped the run
        (the batch is kept and polled again on the next run)."""
        job, client = self.job, self.client
        try:
            while batch_status(client, self.call(lambda: client.messages.batches.retrieve(batch_id))) != "ended":
                time.sleep(self.o.poll_interval)
            results = self.call(lambda: list(client.messages.batches.results(batch_id)))
        except (api.Stop, api.GaveUp) as exc:
            job.stopped = f"{exc}; batch {batch_id} is kept and polled again on the next run"
            return False
        seen, saved = set(), saved_results(job.ws, batch_id)
        for res in results:
            if res.custom_id not in mapping:
                continue
            seen.add(res.custom_id)
            item_id, key = mapping[res.custom_id]
            job.keys.setdefault(item_id, key)
            if res.custom_id in saved:  # stored by a run killed before it closed this batch
                requeue_unfinished(job, item_id, key, self.by_id, self.queue)
                continue
            self.result(self.item(item_id), res, (batch_id, res.custom_id))
        for cid, (item_id, _) in mapping.items():  # a request with no result line: ask again
            if cid not in seen and item_id in self.by_id:
                self.queue.append(self.by_id[item_id])
        close_batch(job.ws, batch_id)
        del self.pending[batch_id]
        self.reserved.pop(batch_id, None)
        return True



    def result(self, item: dict, res, request: tuple[str, str]) -> None:
        """One batch result: stored, billed and asked again (an unusable reply), or resubmitted
        (a request that did not succeed), within the run's retries."""
        job, model, o = self.job, self.model, self.o
        kind = res.result.type
        if kind != "succeeded":
            self.resubmits[item["item_id"]] += 1
            if self.resubmits[item["item_id"]] <= o.retries:
                self.queue.append(item)
            else:
                job.fail(f"batch request for {item['item_id']} ended {kind} {o.retries + 1} times")
            return
        message = api.checked_message(self.client, res.result.message)
        blocks = api.content_blocks(message)
        answer = read_answer(blocks, message.stop_reason, job.round, item)
        usage = api.usage_of(message)
        attempt = {"content": blocks, "stop_reason": message.stop_reason, "problem": claude.judge(answer),
                   "usage": usage, "model": message.model, "usd": prices.usd(model, batch=True, **usage)}
        mine = self.replies.setdefault(item["item_id"], [])
        mine.append(attempt)
        if answer.status == "unusable" and len(mine) <= o.parse_retries:
            job.bill(item, [attempt], batch=True, batch_request=request, first=len(mine))
            self.queue.append(item)
            return
        status = "invalid" if answer.status == "unusable" else answer.status
        reply = claude.Reply(status, answer.result, mine, message.model)
        job.save(item, reply, batch=True, ledgered=len(mine) - 1, batch_request=request)

def batch_status(client, batch) -> str:
    """A message batch's processing status; Stop when the reply is not a message batch."""
    status = getattr(batch, "processing_status", None)
    if not isinstance(status, str) or not isinstance(getattr(batch, "id", None), str):
        raise api.not_an_api_reply(client, batch, "a message batch")
    return status


def requeue_unfinished(job: AnnotationJob, item_id: str, key: str, by_id: dict, queue: list) -> None:
    """A result stored by an earlier run that left its item without a record (an unusable reply
    whose re-ask was never sent): ask again, without storing or billing that result twice."""
    stored = job.ws.conn.execute("SELECT 1 FROM annotations WHERE annotator = ? AND round = ? AND item_id = ? "
                                 "AND request_key = ?", (job.annotator, job.round, item_id, key)).fetchone()
    if not stored and item_id in by_id:
        queue.append(by_id[item_id])

