"""Annotating a workspace: pick the items still to do, ask the annotator, store one record each.

Every item gets a request key, a hash of what decides the answer (item content, round, prompt
version, annotator, parameters). An item counts as done when it has a valid or refused record
under the current key; everything else (no record, an invalid one, one made under another prompt
or item version) is asked again, so re-running resumes an interrupted run and re-asks only what
failed. Each record is written with its cost-ledger rows in one transaction as soon as its reply
is read, so a killed run loses at most the requests in flight.

Backends: ``anthropic:MODEL`` (Messages API, or Message Batches with ``batch=True``) and
``local:MODEL`` (a causal LM answering by constrained choice).
"""
from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from tqdm import tqdm

from annotate import claude, prices
from annotate.prompts import kind_of, load_prompt, read_answer
from annotate.store import add_batch, add_ledger, add_run, close_batch, ledger_totals, open_annotations, \
    open_batches, write_annotation, LEDGER_TOKENS
from curate.errors import CurateError
from curate.items import canonical_json, sha256_text
from curate.store import Workspace, now

BACKENDS = ("anthropic", "local")


def parse_annotator(spec: str) -> tuple[str, str]:
    backend, _, model = spec.partition(":")
    if backend not in BACKENDS or not model:
        raise CurateError(f"annotator {spec!r}: expected anthropic:MODEL or local:MODEL")
    return backend, model


def request_key(item: dict, round: int, prompt_version: str, annotator: str, params: dict) -> str:
    return sha256_text(canonical_json({"content_hash": item["content_hash"], "round": round,
                                       "prompt_version": prompt_version, "annotator": annotator,
                                       "params": params}))


def done_keys(ws: Workspace, annotator: str, round: int) -> set[str]:
    return {r[0] for r in ws.conn.execute(
        "SELECT request_key FROM annotations WHERE annotator = ? AND round = ? AND status IN ('valid', 'refused')",
        (annotator, round))}


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
    last_error: str | None = None
    retries: int = 0
    bar: tqdm | None = None

    def save(self, item: dict, status: str, result, raw: str | None, snapshot: str | None,
             attempts: list[dict] = (), *, batch: bool = False, model: str | None = None,
             ledgered: int = 0) -> None:
        """One record plus ledger rows for the replies not yet entered (``ledgered`` already are)."""
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
        self.spent += sum(costs[ledgered:])
        self.counts[status] += 1
        self.tick()

    def ledger(self, item: dict, attempt: int, a: dict, *, batch: bool) -> None:
        add_ledger(self.ws, run_id=self.run_id, item_id=item["item_id"], request_key=self.keys[item["item_id"]],
                   attempt=attempt, batch=batch, model_snapshot=a.get("model"), usage=a["usage"], usd=a["usd"])

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
            self.bar.set_postfix(valid=self.counts["valid"], invalid=self.counts["invalid"],
                                 refused=self.counts["refused"], failed=self.counts["failed"],
                                 retries=self.retries, usd=f"{self.spent:.4f}", refresh=False)


def annotate_workspace(root, round: int, annotator: str, *, batch=False, concurrency=4, max_cost=None,
                       dry_run=False, limit=None, show_progress=True, retries: int = 6, backoff: float = 1.0,
                       parse_retries: int = 2, timeout: float = 60.0, key_header: str | None = None,
                       poll_interval: float = 30.0) -> dict:
    """Annotate the items of ``root`` (the first ``limit`` in row order) that have no valid or
    refused record for ``annotator`` in ``round`` under the current request key.

    Returns a summary: counts valid / invalid / refused / failed (transient errors outlasted the
    retries; still pending) / skipped (already done) / remaining (still without a valid or refused
    record), the run's ledger totals, ``stopped`` (why the run ended early, or None) and run_id.
    """
    if round not in (1, 2):
        raise CurateError(f"round must be 1 or 2, not {round}")
    backend, model = parse_annotator(annotator)
    if batch and backend != "anthropic":
        raise CurateError("--batch works with anthropic: annotators only")
    if concurrency < 1:
        raise CurateError("concurrency must be at least 1")
    ws = open_annotations(root)
    try:
        items = ws.items()[:limit] if limit else ws.items()
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
        todo = [it for it in items if keys[it["item_id"]] not in done]
        if dry_run:
            return dry_summary(annotator, round, items, todo, None if backend == "local" else model, batch=batch)
        if backend == "anthropic":
            claude.api_key()  # no key: fail before a run is recorded
        run_id = f"run-{now().replace(':', '').replace('+0000', 'Z')}-{uuid.uuid4().hex[:8]}"
        info = {"backend": backend, "model": model, "params": params,
                "prompt_version": version[kinds[0]] if len(kinds) == 1 else version,
                "batch": batch, "concurrency": concurrency, "max_cost": max_cost, "limit": limit,
                "base_url": os.environ.get("ANTHROPIC_BASE_URL") if backend == "anthropic" else None}
        add_run(ws, run_id=run_id, annotator=annotator, round=round, info=json.loads(claude.redact(json.dumps(info))))
        job = Job(ws, annotator, round, run_id, version, keys)
        job.bar = tqdm(total=len(todo), unit="item", desc=f"round {round} {annotator}", disable=not show_progress)
        try:
            if backend == "local":
                run_local(job, todo, local)
            elif batch:
                run_batches(job, todo, model, max_cost=max_cost, retries=retries, backoff=backoff,
                            parse_retries=parse_retries, timeout=timeout, key_header=key_header,
                            poll_interval=poll_interval)
            else:
                run_messages(job, todo, model, concurrency=concurrency, max_cost=max_cost, retries=retries,
                             backoff=backoff, parse_retries=parse_retries, timeout=timeout, key_header=key_header)
        finally:
            job.bar.close()
        left = sum(1 for it in items if keys[it["item_id"]] not in done_keys(ws, annotator, round))
        return {"run_id": run_id, "annotator": annotator, "round": round, "items": len(items),
                "skipped": len(items) - len(todo), "valid": job.counts["valid"], "invalid": job.counts["invalid"],
                "refused": job.counts["refused"], "failed": job.counts["failed"], "remaining": left,
                "retries": job.retries, "stopped": job.stopped, "last_error": job.last_error,
                "cost": ledger_totals(ws, run_id)}
    finally:
        ws.close()


def dry_summary(annotator, round, items, todo, model, *, batch=False) -> dict:
    """What a run would send, with a cost upper bound (no cache hits, every reply at max_tokens).
    ``model`` None: a local annotator, which costs nothing."""
    tokens = sum(claude.estimate_input_tokens(claude.request_params(model, it, round)) for it in todo) if model else 0
    usd = prices.usd(model, input_tokens=tokens, output_tokens=claude.MAX_TOKENS * len(todo), batch=batch) if model else 0.0
    return {"dry_run": True, "annotator": annotator, "round": round, "items": len(items),
            "skipped": len(items) - len(todo), "to_annotate": len(todo), "input_tokens_estimate": tokens,
            "max_output_tokens": claude.MAX_TOKENS * len(todo) if model else 0, "usd_upper_bound": float(f"{usd:.4f}")}


def upper_cost(model: str, item: dict, round: int, *, batch: bool) -> float:
    tokens = claude.estimate_input_tokens(claude.request_params(model, item, round))
    return prices.usd(model, input_tokens=tokens, output_tokens=claude.MAX_TOKENS, batch=batch)


# --- local ----------------------------------------------------------------------------------

def run_local(job: Job, todo: list[dict], local) -> None:
    for item in todo:
        result, raw = local.annotate(item, job.round)
        job.save(item, "valid", result, raw, local.snapshot)


# --- anthropic: one Messages request per item, bounded concurrency ------------------------------

def run_messages(job: Job, todo: list[dict], model: str, *, concurrency: int, max_cost, retries: int,
                 backoff: float, parse_retries: int, timeout: float, key_header) -> None:
    client = claude.make_client(timeout=timeout, key_header=key_header)
    counters = claude.Counters()
    queue = iter(todo)
    inflight: dict = {}
    reserved: dict = {}

    def refill(pool) -> None:
        while len(inflight) < concurrency and job.stopped is None:
            item = next(queue, None)
            if item is None:
                return
            estimate = upper_cost(model, item, job.round, batch=False)
            if max_cost is not None and job.spent + sum(reserved.values()) + estimate > max_cost:
                job.stopped = f"--max-cost {max_cost} USD reached (spent {job.spent:.4f} USD); re-run to continue"
                return
            future = pool.submit(claude.ask, client, model, item, job.round, retries=retries, backoff=backoff,
                                 parse_retries=parse_retries, counters=counters)
            inflight[future], reserved[future] = item, estimate

    with ThreadPoolExecutor(concurrency) as pool:
        refill(pool)
        while inflight:
            finished, _ = wait(inflight, timeout=1.0, return_when=FIRST_COMPLETED)
            for future in finished:
                item = inflight.pop(future)
                reserved.pop(future)
                try:
                    reply = future.result()
                except claude.Stop as exc:
                    job.stopped = job.stopped or str(exc)
                    continue
                except claude.GaveUp as exc:
                    job.fail(str(exc))
                    continue
                for a in reply.attempts:
                    a["usd"] = prices.usd(model, **a["usage"])
                job.save(item, reply.status, reply.result, reply.raw, reply.model_snapshot, reply.attempts)
            job.show(counters.retrying)
            refill(pool)


# --- anthropic: Message Batches --------------------------------------------------------------

def custom_id(key: str, attempt: int) -> str:
    return f"k{key.split(':')[-1][:40]}-{attempt}"


def run_batches(job: Job, todo: list[dict], model: str, *, max_cost, retries: int, backoff: float,
                parse_retries: int, timeout: float, key_header, poll_interval: float) -> None:
    """Submit the pending items as batches, poll until each ends, store results matched by
    custom_id. Errored / expired / canceled requests and unreadable replies go into the next batch
    (bounded); batches already submitted by a killed run are polled, not submitted again."""
    client = claude.make_client(timeout=timeout, key_header=key_header)
    counters = claude.Counters()
    by_id = {it["item_id"]: it for it in todo}
    pending = open_batches(job.ws, annotator=job.annotator, round=job.round)
    in_flight = {item_id for mapping in pending.values() for item_id, _ in mapping.values()}
    queue = [it for it in todo if it["item_id"] not in in_flight]
    replies: dict[str, list[dict]] = {}
    resubmits: Counter = Counter()
    submitted: Counter = Counter()

    def call(fn):
        return claude.with_retries(fn, retries=retries, backoff=backoff, counters=counters)

    while job.stopped is None:
        if queue:
            take, reserve = [], 0.0
            for item in queue:
                estimate = upper_cost(model, item, job.round, batch=True)
                if max_cost is not None and job.spent + reserve + estimate > max_cost:
                    job.stopped = f"--max-cost {max_cost} USD reached (spent {job.spent:.4f} USD); re-run to continue"
                    break
                take.append(item)
                reserve += estimate
            queue = []
            if take:
                rows = []
                for item in take:
                    submitted[item["item_id"]] += 1
                    rows.append((custom_id(job.keys[item["item_id"]], submitted[item["item_id"]]),
                                 item["item_id"], job.keys[item["item_id"]]))
                requests = [{"custom_id": cid, "params": claude.request_params(model, by_id[iid], job.round)}
                            for cid, iid, _ in rows]
                try:
                    created = call(lambda: client.messages.batches.create(requests=requests))
                except (claude.Stop, claude.GaveUp) as exc:
                    job.stopped = str(exc)
                    break
                add_batch(job.ws, batch_id=created.id, run_id=job.run_id, annotator=job.annotator,
                          round=job.round, requests=rows)
                pending[created.id] = {cid: (iid, key) for cid, iid, key in rows}
        if not pending:
            break
        batch_id, mapping = next(iter(pending.items()))
        try:
            while call(lambda: client.messages.batches.retrieve(batch_id)).processing_status != "ended":
                time.sleep(poll_interval)
            results = call(lambda: list(client.messages.batches.results(batch_id)))
        except (claude.Stop, claude.GaveUp) as exc:
            job.stopped = f"{exc}; batch {batch_id} is kept and polled again on the next run"
            break
        seen = set()
        for res in results:
            if res.custom_id not in mapping:
                continue
            seen.add(res.custom_id)
            item_id, _ = mapping[res.custom_id]
            if item_id not in by_id:  # submitted by an earlier run for an item outside this selection
                by_id.update({it["item_id"]: it for it in job.ws.items() if it["item_id"] not in by_id})
                job.keys.setdefault(item_id, mapping[res.custom_id][1])
            item = by_id[item_id]
            handle_result(job, item, res, model, replies, resubmits, queue, retries, parse_retries)
        for cid, (item_id, _) in mapping.items():  # a request with no result line: ask again
            if cid not in seen and item_id in by_id:
                queue.append(by_id[item_id])
        close_batch(job.ws, batch_id)
        del pending[batch_id]
        job.show(counters.retrying)


def handle_result(job: Job, item: dict, res, model: str, replies: dict, resubmits: Counter, queue: list,
                  retries: int, parse_retries: int) -> None:
    kind = res.result.type
    if kind != "succeeded":
        resubmits[item["item_id"]] += 1
        if resubmits[item["item_id"]] <= retries:
            queue.append(item)
        else:
            job.fail(f"batch request for {item['item_id']} ended {kind} {retries + 1} times")
        return
    message = res.result.message
    blocks = claude.content_blocks(message)
    answer = read_answer(blocks, message.stop_reason, job.round, item)
    usage = claude.usage_of(message)
    attempt = {"content": blocks, "stop_reason": message.stop_reason, "problem": claude.judge(answer),
               "usage": usage, "model": message.model, "usd": prices.usd(model, batch=True, **usage)}
    mine = replies.setdefault(item["item_id"], [])
    mine.append(attempt)
    if answer.status == "unusable" and len(mine) <= parse_retries:
        with job.ws.transaction():
            job.ledger(item, len(mine), attempt, batch=True)
        job.spent += attempt["usd"]
        queue.append(item)
        return
    status = "invalid" if answer.status == "unusable" else answer.status
    reply = claude.Reply(status, answer.result, mine, message.model)
    job.save(item, status, answer.result, reply.raw, message.model, mine, batch=True, ledgered=len(mine) - 1)
