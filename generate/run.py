"""Generating answers for a workspace: what is still to do, asked in batches, stored as it comes.

One unit is one (item, mode, seed). Its request key hashes everything that decides the reply:
the item's content, mode, seed, model label and identity (weights, tokenizer, chat template and
dtype for a local model; the model name for Claude), template name and hash, and the decoding
settings. Items of identical content share a key, so "stored" means a record of this unit's
item under its key; a unit stored is never asked again, so a second identical run does
nothing and an interrupted one (even ``kill -9``) resumes: local batches commit one by one, and
each Claude request is in the ledger before it is sent, its reply as soon as it is read and the
record right after (``curate.anthropic_api.spend``).

Backends: a local causal LM (``generate.local``, batched) and ``anthropic:MODEL``
(``generate.claude``, bounded concurrency, ``max_cost`` reserved per request before sending;
a request the client gave up on stays counted as possibly billed).
"""
from __future__ import annotations

import hashlib
import os
import platform
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tqdm import tqdm

from curate.core.clock import now
from curate.core.errors import CurateError
from curate.items.canonical import MODES, canonical_json, sha256_text
from curate.core.lock import work_lock
from generate.options import DEFAULTS
from scoring import model_spec
from generate.parse import Parsed, parse_reply
from generate.prompts import DEFAULT_TEMPLATE, load_template, render, shown_options, shuffle_order
from generate.store import (add_ledger, add_run, done_keys, ledger_totals, open_generations, settings_label,
                            write_generations)

if TYPE_CHECKING:  # the anthropic SDK is imported only for a Claude run
    from curate.anthropic_api import spend


@dataclass
class Unit:
    item: dict
    mode: str
    seed: int
    order: list[int]
    key: str
    instructions: str
    user: str

    @property
    def done_key(self) -> tuple[str, str]:
        """What marks this unit stored (``done_keys``): its item and request key."""
        return self.item["item_id"], self.key

    @property
    def options(self) -> list[str]:
        """The option texts as displayed."""
        return shown_options(self.item["options"], self.order)

    @property
    def sample_seed(self) -> int:
        """The seed of this unit's own sampling generator (used when temperature > 0): the item
        content and the seed only, so every mode and template draws the same random numbers for
        the same (item, seed) and their comparisons stay paired."""
        text = f"{self.item['content_hash']}|{self.seed}"
        return int(hashlib.sha256(text.encode()).hexdigest()[:15], 16)


def parse_model(spec: str) -> tuple[str, str]:
    """('anthropic', MODEL) for anthropic:MODEL, ('local', NAME) for local:NAME or a bare NAME
    (every stage's model grammar: ``scoring.model_spec``)."""
    return model_spec.parse(spec)


def request_key(unit_item: dict, mode: str, seed: int, scope: dict) -> str:
    return sha256_text(canonical_json({"content_hash": unit_item["content_hash"], "mode": mode, "seed": seed,
                                       **scope}))


def plan(items: list[dict], modes: list[str], seeds: list[int], template, scope: dict,
         shots: list[list[dict]] | None = None) -> list[Unit]:
    """Every (item, mode, seed) unit; with ``shots`` (each item's worked examples,
    ``curate.items.fewshot``), the examples come first in the user text."""
    units = []
    for i, item in enumerate(items):
        for mode in modes:
            for seed in seeds:
                order = shuffle_order(item["content_hash"], seed, len(item["options"]))
                instructions, user = render(template, item["prompts"][mode], item["options"], order)
                if shots and shots[i]:
                    user = "\n\n".join([*(worked_example(template, s, seed) for s in shots[i]), user])
                units.append(Unit(item, mode, seed, order, request_key(item, mode, seed, scope), instructions, user))
    return units


def worked_example(template, shot: dict, seed: int) -> str:
    """One few-shot example: the shot's full-mode question in the template, its options shuffled
    as its own unit would be for ``seed``, and the number of its gold option."""
    order = shuffle_order(shot["content_hash"], seed, len(shot["options"]))
    _, user = render(template, shot["prompts"]["full"], shot["options"], order)
    return f"{user}\nAnswer: {order.index(shot['gold']) + 1}"


def fewshot_examples(ws, items: list[dict], k: int, pool: str | None) -> tuple[list[list[dict]] | None, dict]:
    """Each item's k examples, drawn as ``curate score --fewshot`` draws them, and what the
    request keys and the run record say of them (nothing when k is 0)."""
    if not k:
        return None, {}
    from curate.items.fewshot_pool import fewshot_plan
    shots, _, info = fewshot_plan(ws, items, [k], pool)
    return shots[k], {"fewshot": k, "fewshot_key": info["fewshot_key"]}


def record(unit: Unit, *, label: str, template: str, settings: str, run_id: str, parsed: Parsed, raw: str,
           new_tokens: int | None, finish: str | None, replies: list[str]) -> dict:
    pred = unit.order[parsed.shown - 1] if parsed.shown is not None else None
    return {"model": label, "template": template, "settings": settings, "mode": unit.mode, "seed": unit.seed,
            "item_id": unit.item["item_id"], "order": unit.order, "raw": raw, "status": parsed.status,
            "method": parsed.method, "detail": parsed.detail, "shown": parsed.shown, "pred": pred,
            "new_tokens": new_tokens, "finish": finish, "attempts": len(replies), "replies": replies,
            "request_key": unit.key, "content_hash": unit.item["content_hash"], "run_id": run_id}


def _check_one_source(ws, units: list[Unit], label: str, template: str, settings: str, *, replace: bool) -> None:
    """Refuse to store this run's answers under ``label`` where it holds answers to the same
    (item, mode, seed) from another model, dtype or template version (another request key): they
    would be replaced one by one and the label would mix both. With ``replace``, delete the
    label's answers for this template and settings first (call holding the run's lock)."""
    stored = {(r[0], r[1], r[2]): (r[3], r[4]) for r in ws.conn.execute(
        "SELECT item_id, mode, seed, request_key, run_id FROM generations WHERE model = ? AND template = ? "
        "AND settings = ?", (label, template, settings))}
    other = next(((u, stored[key]) for u in units
                  if (key := (u.item["item_id"], u.mode, u.seed)) in stored and stored[key][0] != u.key), None)
    if other is None:
        return
    if not replace:
        unit, (_, run_id) = other
        raise CurateError(
            f"label {label!r} already holds answers ({template}, {settings}) made otherwise than this run would make "
            f"them (another model, dtype, tokenizer or template version; run {run_id}, first: "
            f"{unit.item['item_id']} {unit.mode} seed {unit.seed}). Use another --label to keep both, or --replace "
            f"to delete the stored answers of {label!r} for this template and settings first")
    with ws.transaction():
        ws.conn.execute("DELETE FROM generations WHERE model = ? AND template = ? AND settings = ?",
                        (label, template, settings))


def versions(backend: str) -> dict:
    import curate
    out = {"benchcurate": curate.__version__, "python": platform.python_version()}
    if backend == "local":
        from scoring.run import versions as scoring_versions
        out.update(scoring_versions())
    else:
        import anthropic
        out["anthropic"] = anthropic.__version__
    return out


def generate_workspace(root, model: str, modes: list[str], seeds: int | list[int], *,
                       template: str = DEFAULT_TEMPLATE, temperature: float | None = DEFAULTS["temperature"],
                       top_p: float | None = DEFAULTS["top_p"], max_new_tokens: int = DEFAULTS["max_new_tokens"],
                       limit: int | None = DEFAULTS["limit"], label: str | None = None,
                       batch_size: int = DEFAULTS["batch_size"], dtype: str = DEFAULTS["dtype"],
                       device: str = DEFAULTS["device"], show_progress: bool = True,
                       concurrency: int = DEFAULTS["concurrency"], max_cost: float | None = DEFAULTS["max_cost"],
                       retries: int = DEFAULTS["retries"], backoff: float = DEFAULTS["backoff"],
                       parse_retries: int = DEFAULTS["parse_retries"], timeout: float = DEFAULTS["timeout"],
                       key_header: str | None = DEFAULTS["key_header"], replace: bool = DEFAULTS["replace"],
                       fewshot: int = DEFAULTS["fewshot"], fewshot_pool: str | None = DEFAULTS["fewshot_pool"]) -> dict:
    """Ask ``model`` (a local model, or anthropic:MODEL) for every (item, mode, seed) of ``root``
    (the first ``limit`` items) not yet stored under these settings; ``seeds`` is a count (seeds
    0..N-1) or a list. ``temperature`` / ``top_p`` default to greedy decoding for a local model;
    Claude takes neither (see ``generate.claude``). Returns a summary: units, computed, cached,
    status counts, failed (Claude errors that outlasted the retries; still pending), remaining,
    stopped, cost, seconds. ``fewshot`` shows that many worked examples before each question
    (``worked_example``; its answers are kept apart under settings ending ``,k=K``)."""
    backend, name = parse_model(model)
    seeds = list(range(seeds)) if isinstance(seeds, int) else sorted(set(seeds))
    if backend == "anthropic" and (temperature is not None or top_p is not None):
        raise CurateError("anthropic: the Messages API version the anthropic SDK sends (2026-10-21) accepts no "
                          "temperature or top-p; leave them out (Claude samples with its own defaults)")
    if backend == "local":
        temperature = 0.0 if temperature is None else temperature
        top_p = 1.0 if top_p is None else top_p
    _check(modes, seeds, temperature, top_p, max_new_tokens, batch_size, concurrency, parse_retries)
    tpl = load_template(template)
    label = label or (name if backend == "local" else model)  # local:NAME and NAME store the same answers
    settings = settings_label(temperature, top_p, max_new_tokens) + (f",k={fewshot}" if fewshot else "")
    start = time.perf_counter()
    ws = open_generations(root)  # a bad workspace fails before the model loads
    try:
        # Two runs of one label, template and settings would both ask for every pending answer
        # (and pay twice): the second stops at once, before its model loads.
        with work_lock(root, f"generate {label} {tpl.name} {settings}", command="generate"):
            items = ws.items()[:limit] if limit else ws.items()
            shots, shot_scope = fewshot_examples(ws, items, fewshot, fewshot_pool)  # before the model loads
            if backend == "local":
                from generate.local import LocalGenerator
                engine = LocalGenerator(name, dtype=dtype, device=device)
                identity = engine.identity
            else:
                from curate.anthropic_api import client as api, prices
                prices.price(name)  # unknown model: fail before anything is asked
                # a missing or bad key or URL: one line, now
                client = api.make_client(timeout=timeout, key_header=key_header, stage="generate")
                identity = {"model": name, "parse_retries": parse_retries}
            scope = {"model": label, "backend": backend, "identity": identity, "template": tpl.name,
                     "template_hash": tpl.hash, "temperature": temperature, "top_p": top_p,
                     "max_new_tokens": max_new_tokens, **shot_scope}
            units = plan(items, modes, seeds, tpl, scope, shots)
            _check_one_source(ws, units, label, tpl.name, settings, replace=replace)
            left = None
            if backend == "anthropic":  # requests an earlier run of this work left in flight (kill -9)
                from curate.anthropic_api import spend
                left = spend.settle_left_in_flight(ws, "generation_ledger", "SELECT run_id FROM generation_runs "
                                                   "WHERE model = ? AND template = ? AND settings = ?",
                                                   (label, tpl.name, settings))
            done = done_keys(ws, label, tpl.name, settings)
            todo = [u for u in units if u.done_key not in done]
            run_id = f"gen-{now().replace(':', '').replace('+0000', 'Z')}-{uuid.uuid4().hex[:8]}"
            info = {"model": model, "backend": backend, "identity": identity, "template": tpl.name,
                    "template_hash": tpl.hash, "settings": {"temperature": temperature, "top_p": top_p,
                                                            "max_new_tokens": max_new_tokens},
                    "seeds": seeds, "modes": list(modes), "limit": limit, "versions": versions(backend), **shot_scope}
            if backend == "local":
                info.update(prompt_format="chat-template" if engine.chat else "plain", device=device,
                            batch_size=batch_size, sampling="greedy" if temperature == 0 else "per-row generators")
            else:
                info.update(prompt_format="messages-api", concurrency=concurrency, max_cost=max_cost,
                            base_url=os.environ.get("ANTHROPIC_BASE_URL") or None)  # add_run redacts it
            with ws.transaction():
                add_run(ws, run_id=run_id, model=label, backend=backend, template=tpl.name, settings=settings, info=info)
            job = Job(ws, run_id, label, tpl.name, settings)
            job.bar = tqdm(total=len(todo), unit="answer", desc=f"generate {label}", disable=not show_progress,
                           dynamic_ncols=True)
            loop_start = time.perf_counter()
            interrupted = False
            try:
                if backend == "local":
                    run_local(job, todo, engine, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                              batch_size=batch_size)
                else:
                    run_claude(job, todo, name, client, max_new_tokens=max_new_tokens,
                               concurrency=concurrency, max_cost=max_cost, retries=retries, backoff=backoff,
                               parse_retries=parse_retries)
            except KeyboardInterrupt:
                interrupted = True
                raise
            finally:
                job.bar.close()
                if interrupted and backend == "anthropic":  # Ctrl-C: where the run stands, not a bare "Aborted!"
                    stored = done_keys(ws, label, tpl.name, settings)
                    print(spend.interrupted(max_cost, ledger_totals(ws, run_id), unit="answers", held=job.held,
                                            left=sum(1 for u in units if u.done_key not in stored)), file=sys.stderr)
            loop_seconds = time.perf_counter() - loop_start
            cost = ledger_totals(ws, run_id)
            stored = done_keys(ws, label, tpl.name, settings)
            computed = sum(job.counts[s] for s in ("strict", "lenient", "unparsed"))
            if job.over_budget is not None and job.stopped is None:
                rest = [u for u in units if u.done_key not in stored]
                job.stopped = spend.cap_reached(max_cost, job.over_budget, cost, left=len(rest), unit="answers",
                                                done=computed, worst_left=worst_left(rest, name, max_new_tokens,
                                                                                     parse_retries))
            return {"run_id": run_id, "model": label, "backend": backend, "template": tpl.name, "settings": settings,
                    "items": len(items), "modes": list(modes), "seeds": seeds, "units": len(units),
                    "cached": len(units) - len(todo), "computed": computed,
                    **{s: job.counts[s] for s in ("strict", "lenient", "unparsed", "failed")},
                    "remaining": sum(1 for u in units if u.done_key not in stored), "stopped": job.stopped,
                    "last_error": job.last_error, "cost": cost, "left_in_flight": left,
                    "seconds": round(time.perf_counter() - start, 3), "generate_seconds": round(loop_seconds, 3),
                    "answers_per_second": round(computed / loop_seconds, 3) if computed and loop_seconds else None}
    finally:
        ws.close()


def _check(modes, seeds, temperature, top_p, max_new_tokens, batch_size, concurrency, parse_retries) -> None:
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise CurateError(f"unknown mode(s) {', '.join(bad) or '(none)'}; known: {', '.join(MODES)}")
    if not seeds or min(seeds) < 0:
        raise CurateError("seeds: give a positive count (seeds 0..N-1) or non-negative seeds")
    if temperature is not None and (temperature < 0 or not 0 < top_p <= 1):
        raise CurateError(f"temperature must be >= 0 and top-p in (0, 1], not {temperature} and {top_p}")
    if temperature == 0 and top_p != 1:
        raise CurateError("--top-p applies only when sampling (--temperature > 0); temperature 0 is greedy decoding")
    for name, value in (("max-new-tokens", max_new_tokens), ("batch-size", batch_size), ("concurrency", concurrency)):
        if value < 1:
            raise CurateError(f"--{name} must be at least 1")
    if parse_retries < 0:
        raise CurateError("--parse-retries must be >= 0")


@dataclass
class Job:
    """Where one run writes, and its counts for the progress bar and the summary."""
    ws: object
    run_id: str
    label: str
    template: str
    settings: str
    bar: tqdm | None = None
    stopped: str | None = None
    over_budget: str | None = None     # why --max-cost kept the next request back
    last_error: str | None = None
    spent: float = 0.0
    held: spend.Held | None = None     # how --max-cost holds the run back now (None: it does not)
    told: bool = False                 # why the cap slows the run was said

    def __post_init__(self):
        self.counts: Counter = Counter()

    def record(self, unit: Unit, parsed: Parsed, **kw) -> dict:
        return record(unit, label=self.label, template=self.template, settings=self.settings, run_id=self.run_id,
                      parsed=parsed, **kw)

    def fail(self, message: str) -> None:
        self.last_error = message
        self.counts["failed"] += 1
        self.show(1)

    def saved(self, records: list[dict]) -> None:
        self.counts.update(r["status"] for r in records)
        self.show(len(records))

    def show(self, done: int) -> None:
        if self.bar is not None:
            self.bar.update(done)
            self.bar.set_postfix(strict=self.counts["strict"], lenient=self.counts["lenient"],
                                 unparsed=self.counts["unparsed"], failed=self.counts["failed"],
                                 **({"usd": f"{self.spent:.4f}"} if self.spent else {}),
                                 **({"cap": self.held.progress()} if self.held else {}), refresh=False)

    def hold(self, held: spend.Held | None) -> None:
        """The cap holds the run back (``held``) or lets it go again (None): on the progress line,
        and the first time in a line of its own saying why the run slows down."""
        self.held = held
        if self.bar is None or self.bar.disable:
            return
        if held is not None and not self.told:
            self.told = True
            self.bar.write(held.why(), file=sys.stderr)
        self.show(0)
        self.bar.refresh()


# --- local: length-sorted batches, one transaction per batch ---------------------------------

def run_local(job: Job, todo: list[Unit], engine, *, temperature: float, top_p: float, max_new_tokens: int,
              batch_size: int) -> None:
    from scoring.models import max_length

    if not todo:
        return
    encoded = engine.encode([engine.prompt(load_template(job.template), u.instructions, u.user) for u in todo])
    window = max_length(engine.model, engine.tokenizer)
    if max_new_tokens >= window:  # the option is at fault, not any item
        raise CurateError(f"--max-new-tokens {max_new_tokens} leaves no room for a prompt in the model's window of "
                          f"{window} tokens; a reply needs a few tokens (the default is 8)")
    room = window - max_new_tokens
    too_long = [i for i, ids in enumerate(encoded) if len(ids) > room]
    if too_long:
        u = todo[too_long[0]]
        raise CurateError(f"item {u.item['item_id']} ({u.mode} mode): the prompt has {len(encoded[too_long[0]])} "
                          f"tokens, more than the model's {room + max_new_tokens} minus --max-new-tokens")
    prefix = engine.shared_prefix(encoded)
    ordered = sorted(range(len(todo)), key=lambda i: (-len(encoded[i]), i))  # longest first: ETA errs long
    for start in range(0, len(ordered), batch_size):
        rows = ordered[start:start + batch_size]
        outs = engine.generate([encoded[i] for i in rows], temperature=temperature, top_p=top_p,
                               max_new_tokens=max_new_tokens, sample_seeds=[todo[i].sample_seed for i in rows],
                               prefix=prefix)
        records = [job.record(todo[i], parse_reply(out.text, todo[i].options), raw=out.text,
                              new_tokens=out.new_tokens, finish=out.finish, replies=[out.text])
                   for i, out in zip(rows, outs)]
        with job.ws.transaction():
            write_generations(job.ws, records)
        job.saved(records)


# --- anthropic: one request per unit, bounded concurrency, spend reserved before sending ----------

def run_claude(job: Job, todo: list[Unit], model: str, client, *, max_new_tokens: int,
               concurrency: int, max_cost, retries: int, backoff: float, parse_retries: int) -> None:
    """Units ``concurrency`` at a time, each sent once its worst case fits under ``max_cost``
    (``curate.anthropic_api.spend``: every request is in the ledger before it is sent, and every reply paid
    for as soon as it is read, even when a re-ask after it fails); each record right after."""
    from curate.anthropic_api import client as api, spend
    from generate import claude

    counters = api.Counters()
    spending = spend.Spending(job.ws, cap=max_cost, model=model, table="generation_ledger",
                              add=lambda ws, **row: add_ledger(ws, run_id=job.run_id, **row))

    def start(unit: Unit):
        params = claude.request_params(model, unit.instructions, unit.user, max_new_tokens=max_new_tokens)
        tab = spending.tab(claude.attempt_bounds(params, len(unit.order), parse_retries),
                           item_id=unit.item["item_id"], request_key=unit.key)
        return tab, lambda: claude.ask(client, params, unit.options, tab=tab, parse_retries=parse_retries,
                                       retries=retries, backoff=backoff, counters=counters)

    def finish(unit: Unit, tab: spend.Tab, future) -> None:
        job.spent += tab.billed
        try:
            parsed, attempts = future.result()
        except spend.OverBudget as exc:
            job.over_budget = job.over_budget or exc.why
            return
        except api.Stop as exc:
            job.stopped = job.stopped or str(exc)
            return
        except api.GaveUp as exc:
            job.fail(str(exc))
            return
        last = attempts[-1]
        rec = job.record(unit, parsed, raw=last["text"], new_tokens=last["usage"]["output_tokens"],
                         finish=last["stop_reason"], replies=[a["text"] for a in attempts])
        with job.ws.transaction():
            write_generations(job.ws, [rec])
        job.saved([rec])

    try:
        kept_back = spending.send_all(todo, start, finish, concurrency=concurrency,
                                      halted=lambda: job.stopped is not None or job.over_budget is not None,
                                      waiting=job.hold)
    finally:
        spending.close()
    if kept_back is not None:
        job.over_budget = spend.kept_back(kept_back)


def worst_left(units: list[Unit], model: str, max_new_tokens: int, parse_retries: int) -> float:
    """What ``units`` could cost at most, as ``--max-cost`` reserves it (each request and re-ask)."""
    from generate import claude

    return sum(claude.worst_case_usd(claude.request_params(model, u.instructions, u.user, max_new_tokens=max_new_tokens),
                                     len(u.order), parse_retries)
               for u in units)


def summary_line(s: dict) -> str:
    parts = ", ".join(f"{k} {s[k]}" for k in ("strict", "lenient", "unparsed", "failed"))
    return (f"{s['run_id']}: {s['model']} [{s['template']}, {s['settings']}] {s['computed']} answers generated "
            f"({parts}), {s['cached']} cached, remaining {s['remaining']}")

