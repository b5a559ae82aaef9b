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
from dataclasses import dataclass, replace

from curate.asking.job import Job
from curate.core.errors import CurateError
from curate.items.canonical import canonical_json, sha256_text
from curate.items.stage import Stage
from curate.items.store import Workspace
from generate.options import GenerateOptions
from generate.parse import Parsed, parse_reply
from generate.prompts import load_template, render, shown_options, shuffle_order
from generate.store import (LEDGER, add_run, delete_generations, done_keys, prepare as prepare_tables, settings_label,
                            write_generations)
from scoring import model_spec
from scoring.models import max_length


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
        delete_generations(ws, label, template, settings)


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


@dataclass
class GenerationJob(Job):
    """One generation run's state (``curate.asking.job.Job``), and how it writes a record."""
    label: str = ""
    template: str = ""
    settings: str = ""

    def record(self, unit: Unit, parsed: Parsed, *, raw: str, new_tokens: int | None, finish: str | None,
               replies: list[str]) -> dict:
        """The stored answer of one unit: the reply, how it was read, the option it names."""
        pred = unit.order[parsed.shown - 1] if parsed.shown is not None else None
        return {"model": self.label, "template": self.template, "settings": self.settings, "mode": unit.mode,
                "seed": unit.seed, "item_id": unit.item["item_id"], "order": unit.order, "raw": raw,
                "status": parsed.status, "method": parsed.method, "detail": parsed.detail, "shown": parsed.shown,
                "pred": pred, "new_tokens": new_tokens, "finish": finish, "attempts": len(replies),
                "replies": replies, "request_key": unit.key, "content_hash": unit.item["content_hash"],
                "run_id": self.run_id}

    def store(self, records: list[dict]) -> None:
        with self.ws.transaction():
            write_generations(self.ws, records)
        self.done([r["status"] for r in records])


class Generate(Stage):
    """`curate generate`: ask the model (a local model, or anthropic:MODEL) for every (item, mode,
    seed) of the workspace (the first ``limit`` items) not yet stored under these settings.
    ``temperature`` / ``top_p`` default to greedy decoding for a local model; Claude takes neither
    (see ``generate.claude``). The summary: units, computed, cached, status counts, failed (Claude
    errors that outlasted the retries; still pending), remaining, stopped, cost, seconds.
    ``fewshot`` shows that many worked examples before each question (``worked_example``; its
    answers are kept apart under settings ending ``,k=K``)."""
    name = "generate"
    Options = GenerateOptions

    def __init__(self, root, options):
        backend, name = model_spec.parse(options.model)
        if backend == "anthropic" and (options.temperature is not None or options.top_p is not None):
            raise CurateError("anthropic: the Messages API version the anthropic SDK sends (2026-10-21) accepts no "
                              "temperature or top-p; leave them out (Claude samples with its own defaults)")
        if backend == "local":
            options = replace(options, temperature=0.0 if options.temperature is None else options.temperature,
                              top_p=1.0 if options.top_p is None else options.top_p)
        if options.temperature == 0 and options.top_p != 1:
            raise CurateError("--top-p applies only when sampling (--temperature > 0); temperature 0 is greedy "
                              "decoding")
        super().__init__(root, options)
        self.backend, self.model = backend, name
        self.template = load_template(options.template)
        self.label = options.label or (name if backend == "local" else options.model)  # local:NAME, NAME alike
        self.settings = settings_label(options.temperature, options.top_p, options.max_new_tokens) + (
            f",k={options.fewshot}" if options.fewshot else "")

    def work(self) -> str:
        # Two runs of one label, template and settings would both ask for every pending answer
        # (and pay twice): the second stops at once, before its model loads.
        return f"generate {self.label} {self.template.name} {self.settings}"

    def migrate(self, ws: Workspace) -> None:
        prepare_tables(ws)  # the generation tables, and the answers'

    def execute(self) -> dict:
        ws = self.ws
        o = self.options
        items = ws.items()[:o.limit] if o.limit else ws.items()
        shots, shot_scope = fewshot_examples(ws, items, o.fewshot, o.fewshot_pool)  # before the model loads
        engine, client, identity = self.prepare()
        scope = {"model": self.label, "backend": self.backend, "identity": identity, "template": self.template.name,
                 "template_hash": self.template.hash, "temperature": o.temperature, "top_p": o.top_p,
                 "max_new_tokens": o.max_new_tokens, **shot_scope}
        units = plan(items, o.modes, o.seeds, self.template, scope, shots)
        _check_one_source(ws, units, self.label, self.template.name, self.settings, replace=o.replace)
        left = None
        if self.backend == "anthropic":  # requests an earlier run of this work left in flight (kill -9)
            from curate.anthropic_api import spend
            left = spend.settle_left_in_flight(ws, LEDGER.table, "SELECT run_id FROM generation_runs "
                                               "WHERE model = ? AND template = ? AND settings = ?",
                                               (self.label, self.template.name, self.settings))
        done = done_keys(ws, self.label, self.template.name, self.settings)
        todo = [u for u in units if u.done_key not in done]
        job = self.record_run(ws, identity, engine, shot_scope)
        seconds = self.dispatch(job, units, todo, engine, client)
        return self.summary(ws, job, items, units, todo, left, seconds)

    def prepare(self) -> tuple:
        """(local engine, Claude client, the identity request keys hash): the model loaded, or the
        key, URL and model checked, before anything is asked."""
        o = self.options
        if self.backend == "local":
            from generate.local import LocalGenerator
            engine = LocalGenerator(self.model, dtype=o.dtype, device=o.device)
            return engine, None, engine.identity
        from curate.anthropic_api import client as api, prices
        prices.price(self.model)  # unknown model: fail before anything is asked
        client = api.make_client(timeout=o.timeout, key_header=o.key_header, stage="generate")  # bad key/URL: now
        return None, client, {"model": self.model, "parse_retries": o.parse_retries}

    def record_run(self, ws, identity: dict, engine, shot_scope: dict) -> GenerationJob:
        o = self.options
        run_id = self.run_id("gen", stamped=True)
        info = {"model": o.model, "backend": self.backend, "identity": identity, "template": self.template.name,
                "template_hash": self.template.hash, "settings": {"temperature": o.temperature, "top_p": o.top_p,
                                                                  "max_new_tokens": o.max_new_tokens},
                "seeds": o.seeds, "modes": list(o.modes), "limit": o.limit, "versions": versions(self.backend),
                **shot_scope}
        if self.backend == "local":
            info.update(prompt_format="chat-template" if engine.chat else "plain", device=o.device,
                        batch_size=o.batch_size, sampling="greedy" if o.temperature == 0 else "per-row generators")
        else:
            info.update(prompt_format="messages-api", concurrency=o.concurrency, max_cost=o.max_cost,
                        base_url=os.environ.get("ANTHROPIC_BASE_URL") or None)  # add_run redacts it
        with ws.transaction():
            add_run(ws, run_id=run_id, model=self.label, backend=self.backend, template=self.template.name,
                    settings=self.settings, info=info)
        return GenerationJob(ws, run_id, ("strict", "lenient", "unparsed"), label=self.label,
                             template=self.template.name, settings=self.settings)

    def dispatch(self, job: GenerationJob, units: list[Unit], todo: list[Unit], engine, client) -> float:
        """The backend asks; Ctrl-C says where the run stands (spent, left, the cap), not a bare
        "Aborted!". Returns the seconds it took."""
        o = self.options
        job.bar = self.progress(len(todo), "answer", f"generate {self.label}")
        start = time.perf_counter()
        try:
            if self.backend == "local":
                for records in local_batches(job, todo, engine, o):
                    job.store(records)
            else:
                run_claude(job, todo, self.model, client, o)
        except KeyboardInterrupt:
            if self.backend == "anthropic":
                from curate.anthropic_api import spend
                job.bar.close()
                stored = done_keys(job.ws, self.label, self.template.name, self.settings)
                print(spend.interrupted(o.max_cost, LEDGER.totals(job.ws, job.run_id), unit="answers", held=job.held,
                                        left=sum(1 for u in units if u.done_key not in stored)), file=sys.stderr)
            raise
        finally:
            job.bar.close()
        return time.perf_counter() - start

    def summary(self, ws, job: GenerationJob, items, units, todo, left, seconds: float) -> dict:
        o = self.options
        cost = LEDGER.totals(ws, job.run_id)
        stored = done_keys(ws, self.label, self.template.name, self.settings)
        computed = sum(job.counts[s] for s in ("strict", "lenient", "unparsed"))
        if job.over_budget is not None and job.stopped is None:
            from curate.anthropic_api import spend
            rest = [u for u in units if u.done_key not in stored]
            job.stopped = spend.cap_reached(o.max_cost, job.over_budget, cost, left=len(rest), unit="answers",
                                            done=computed, worst_left=worst_left(rest, self.model, o.max_new_tokens,
                                                                                 o.parse_retries))
        return {"run_id": job.run_id, "model": self.label, "backend": self.backend, "template": self.template.name,
                "settings": self.settings, "items": len(items), "modes": list(o.modes), "seeds": o.seeds,
                "units": len(units), "cached": len(units) - len(todo), "computed": computed,
                **{s: job.counts[s] for s in ("strict", "lenient", "unparsed", "failed")},
                "remaining": sum(1 for u in units if u.done_key not in stored), "stopped": job.stopped,
                "last_error": job.last_error, "cost": cost, "left_in_flight": left,
                "generate_seconds": round(seconds, 3),
                "answers_per_second": round(computed / seconds, 3) if computed and seconds else None}


# --- local: length-sorted batches, one transaction per batch ---------------------------------

def local_batches(job: GenerationJob, todo: list[Unit], engine, o: GenerateOptions):
    """The local model's answers, a length-sorted batch at a time (longest first: the ETA errs
    long), each batch's records together (``GenerationJob.store`` stores each in one transaction)."""
    if not todo:
        return
    encoded = engine.encode([engine.prompt(load_template(job.template), u.instructions, u.user) for u in todo])
    window = max_length(engine.model, engine.tokenizer)
    if o.max_new_tokens >= window:  # the option is at fault, not any item
        raise CurateError(f"--max-new-tokens {o.max_new_tokens} leaves no room for a prompt in the model's window of "
                          f"{window} tokens; a reply needs a few tokens (the default is 8)")
    room = window - o.max_new_tokens
    too_long = [i for i, ids in enumerate(encoded) if len(ids) > room]
    if too_long:
        u = todo[too_long[0]]
        raise CurateError(f"item {u.item['item_id']} ({u.mode} mode): the prompt has {len(encoded[too_long[0]])} "
                          f"tokens, more than the model's {room + o.max_new_tokens} minus --max-new-tokens")
    prefix = engine.shared_prefix(encoded)
    ordered = sorted(range(len(todo)), key=lambda i: (-len(encoded[i]), i))
    for start in range(0, len(ordered), o.batch_size):
        rows = ordered[start:start + o.batch_size]
        outs = engine.generate([encoded[i] for i in rows], temperature=o.temperature, top_p=o.top_p,
                               max_new_tokens=o.max_new_tokens, sample_seeds=[todo[i].sample_seed for i in rows],
                               prefix=prefix)
        yield [job.record(todo[i], parse_reply(out.text, todo[i].options), raw=out.text, new_tokens=out.new_tokens,
                          finish=out.finish, replies=[out.text]) for i, out in zip(rows, outs)]


# --- anthropic: one request per unit, bounded concurrency, spend reserved before sending ----------

def run_claude(job: GenerationJob, todo: list[Unit], model: str, client, o: GenerateOptions) -> None:
    """Units ``concurrency`` at a time through ``curate.asking.claude``, each record stored right
    after its reply."""
    from curate.anthropic_api import client as api, spend
    from curate.asking.claude import send_messages
    from generate import claude

    counters = api.Counters()
    spending = spend.Spending(job.ws, cap=o.max_cost, model=model, table=LEDGER.table,
                              add=lambda ws, **row: LEDGER.add(ws, run_id=job.run_id, **row))

    def start(unit: Unit):
        params = claude.request_params(model, unit.instructions, unit.user, max_new_tokens=o.max_new_tokens)
        tab = spending.tab(claude.attempt_bounds(params, len(unit.order), o.parse_retries),
                           item_id=unit.item["item_id"], request_key=unit.key)
        return tab, lambda: claude.ask(client, params, unit.options, tab=tab, parse_retries=o.parse_retries,
                                       retries=o.retries, backoff=o.backoff, counters=counters)

    def store(unit: Unit, reply) -> None:
        parsed, attempts = reply
        last = attempts[-1]
        job.store([job.record(unit, parsed, raw=last["text"], new_tokens=last["usage"]["output_tokens"],
                              finish=last["stop_reason"], replies=[a["text"] for a in attempts])])

    send_messages(job, todo, spending=spending, start=start, store=store, concurrency=o.concurrency,
                  counters=counters)


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

