"""Scoring a workspace: what is still to do, in length-sorted batches, committed batch by batch.

A stored score is reused when its content key matches: model hash, tokenizer hash, dtype, the
engine version (``scoring.ENGINE_VERSION``), mode, formulation, shot count (and for k shots the
few-shot pool and settings, ``curate.items.fewshot_pool.pool_key``) and the item's content hash (all
options of an item are written in one transaction, so an item is either complete or absent).
What each (item, mode, formulation) scores comes from ``curate.items.formulations``; its k-shot
context from ``curate.items.fewshot``, as lm-eval builds it. A label holds one
model's scores in one dtype: a run that would store another model, tokenizer or dtype under a
label that has scores is refused unless ``replace`` deletes them first (``store.check_label``).
Each batch commits on its own, so a killed run loses only the batch in flight and a second
identical run computes nothing.

Under ``accelerate launch`` each process scores the items whose row index falls to it
(``row_index % num_processes``) and writes into the same workspace (SQLite serializes the
writers), so data-parallel results merge into one store with no extra step.
"""
from __future__ import annotations

import platform
import random
import time
import uuid
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from curate.core.errors import CurateError
from curate.items import fewshot as shots_of
from curate.items import formulations as forms
from curate.items.fewshot_pool import fewshot_plan
from scoring import prefix_cache
from scoring.backends import Context, open_backend, refuse_stats
from scoring.encode import Spec, Unit, build_unit, build_units
from scoring.models import ModelStage, resolve
from scoring.options import ScoreOptions, shot_counts, wants_seq_mean
from scoring.store import MIGRATIONS as SCORE_TABLES
from scoring.store import add_run, check_label, open_scores, other_sources, read_scores, run_source, write_scores
from scoring.text import RUN_TEXT, TEXT_VERSION, ask_stats, pending, text_row
from scoring.text_store import MIGRATIONS as TEXT_TABLES
from scoring.text_store import write_text_scores


def cached_item_ids(ws, label: str, mode: str, key: dict, *, seq_mean: bool = True,
                    formulation: str = "cloze", fewshot: int = 0) -> set[str]:
    """Items of (label, mode, formulation, fewshot) whose stored scores have this content key (and a
    seq_mean, when one is wanted: a run with --seq-mean none, or a k-shot row of a run with
    --seq-mean 0-shot, leaves it empty). Scores of another engine version, or k-shot scores from
    another few-shot pool (``key["fewshot_key"]``), are not reused."""
    rows = ws.conn.execute(
        "SELECT s.item_id, s.content_hash, r.model_hash, r.tokenizer_hash, r.dtype, r.engine, "
        "coalesce(json_extract(r.info_json, '$.seq_mean'), 1), json_extract(r.info_json, '$.fewshot_key') "
        "FROM scores s JOIN score_runs r USING (run_id) WHERE s.model = ? AND s.mode = ? AND s.formulation = ? "
        "AND s.fewshot = ? GROUP BY s.item_id, s.run_id", (label, mode, formulation, fewshot))
    hashes = {it: h for it, h in ws.conn.execute("SELECT item_id, content_hash FROM items")}
    wanted = (key["model_hash"], key["tokenizer_hash"], key["dtype"], key["engine"])
    pool = key.get("fewshot_key") if fewshot else None
    return {item_id for item_id, content, mh, th, dt, engine, policy, fk in rows
            if content == hashes.get(item_id) and (not seq_mean or _had_seq_mean(policy, fewshot))
            and (mh, th, dt, engine) == wanted
            and (not fewshot or fk == pool)}


def _had_seq_mean(policy, fewshot: int) -> bool:
    """Whether a run's rows of ``fewshot`` shots hold seq_mean: its info's ``seq_mean`` is a
    ``SEQ_MEAN`` policy, or (runs before the policy) true or false for every row."""
    return wants_seq_mean(policy, fewshot) if isinstance(policy, str) else bool(policy)


def batches(units: list[Unit], batch_tokens: int) -> list[list[Unit]]:
    """Longest first (memory peaks show up at once; the ETA errs long), each batch's rows x
    longest row within ``batch_tokens`` (a unit never splits): the run's plan without a prefix
    cache (``scoring.prefix_cache.plan``)."""
    return [b.units for b in prefix_cache.plan(units, batch_tokens)]


def assemble(unit: Unit, results, item: dict, *, label: str, run_id: str) -> list[dict]:
    """Score rows for one unit from its requests' results."""
    n = len(unit.options)
    logprob, greedy, seq_total = [0.0] * n, [False] * n, [None] * n
    for req, res in zip(unit.requests, results):
        for k, j in enumerate(req.options):
            if req.purpose == "ll":
                logprob[j], greedy[j] = res.cont_sums[k], res.cont_greedy[k]
            if req.prefix_lp:
                seq_total[j] = res.prefix_sum + res.cont_sums[k]
    rows = []
    for j, option in enumerate(unit.options):
        predicted = (unit.seq_len[j] - 1) if unit.seq_len else 0
        rows.append({
            "model": label, "mode": unit.mode, "formulation": unit.formulation, "fewshot": unit.fewshot,
            "item_id": item["item_id"],
            "option_index": j,
            "logprob_sum": logprob[j], "n_tokens": unit.n_tokens[j], "n_chars": len(option),
            "n_bytes": len(option.encode("utf-8")), "is_greedy": int(greedy[j]),
            "seq_mean": seq_total[j] / predicted if seq_total[j] is not None and predicted > 0 else None,
            "flags": ",".join(sorted(unit.flags[j])) or None,
            "content_hash": item["content_hash"], "run_id": run_id})
    return rows


def item_formulations(item: dict, wanted) -> list[str]:
    """The formulations of ``wanted`` that apply to ``item``: ``letters+rotations`` stands for
    every cyclic rotation of its lettered list, and a rotation applies to the items with more
    options than it (ARC's 3-option items have no letters+r3)."""
    n, out = len(item["options"]), []
    for name in wanted:
        names = forms.rotations(n) if name == forms.ALL_ROTATIONS else [name]
        out += [f for f in names if forms.parse(f)[1] < n and f not in out]
    return out


def unit_spec(index: int, item: dict, mode: str, formulation: str, shots: list[dict] = (),
              settings: shots_of.Settings | None = None) -> Spec:
    """What ``build_units`` needs to score ``item`` (the ``index``-th) in ``mode`` and
    ``formulation``, after ``shots`` (k worked examples, ``curate.items.fewshot``) when given."""
    s = forms.scored(item, mode, formulation)
    if shots:
        s = shots_of.with_shots(s, item, list(shots), formulation, settings)
    return Spec(index, mode, s.contexts, s.continuations, s.delimiter, formulation, len(shots))


def unit_key(unit) -> tuple:
    return unit.item_index, unit.mode, unit.formulation, unit.fewshot


def distributed(device: str):
    """(process index, process count, accelerate state or None): one process unless started by
    ``accelerate launch --multi_gpu --num_processes N`` (its torchrun launcher; on a machine
    without GPUs ``--device cpu`` makes it real CPU data parallelism over gloo)."""
    import os
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0, 1, None
    from accelerate import PartialState
    state = PartialState(cpu=device == "cpu")
    return state.process_index, state.num_processes, state


def shared_run_id(state) -> str:
    run_id = [f"score:{uuid.uuid4().hex[:16]}"]
    if state is not None:
        from accelerate.utils import broadcast_object_list
        broadcast_object_list(run_id, from_process=0)
    return run_id[0]


def scored_source(key: dict, backend) -> str:
    """The source a label's scored rows come from: the run's identity ``key`` and its backend (a
    label holds one)."""
    return run_source({"origin": "scored", **key, "backend": backend.name})


def versions() -> dict:
    import torch
    import transformers

    import curate
    return {"benchcurate": curate.__version__, "torch": torch.__version__,
            "transformers": transformers.__version__, "python": platform.python_version()}


@dataclass
class Work:
    """What one score run does: the units of its items (every one, stored or not, so a resumed run
    batches exactly as an uninterrupted one), those it computes (``missing``), those whose gold row
    also gives text scores (``texts``), the batches that hold any of them, and the stored rows of
    another source it replaces."""
    items: list[dict]
    units: list[tuple]                   # (item index, mode, formulation, shots, to compute)
    missing: set = field(default_factory=set)
    texts: set = field(default_factory=set)
    text_other: int = 0
    stale: list = field(default_factory=list)
    batches: list = field(default_factory=list)
    checked: dict = field(default_factory=lambda: {"items": 0, "note": "nothing to compute"})


class Score(ModelStage):
    """`curate score`: every option of every item (the first ``limit``) of the workspace under each
    mode, formulation and shot count, by a scoring backend (``scoring.backends``), stored item by
    item, batch by batch. ``label`` (default ``model``) must not hold scores of another model,
    tokenizer or dtype unless ``replace`` deletes them (all of the label's modes) first.

    k-shot contexts are built as lm-eval builds them (``curate.items.fewshot``) from the pool
    ``fewshot_pool`` names (``curate.items.fewshot_pool``). ``seq_mean`` (``scoring.options.SEQ_MEAN``)
    says which rows also get the study's whole-sequence mean. ``text_scores`` also stores each
    item's text scores from its full-mode cloze 0-shot gold row, in the same transaction
    (``scoring.text``). Before anything is stored, the first ``self_check`` units of the plan are
    also scored by the model's own plain forward (``scoring.self_check``). ``device="auto"``
    places the model over the visible GPUs; under ``accelerate launch`` each process scores its
    share of the items (``distributed``)."""
    name = "score"
    Options = ScoreOptions

    def __init__(self, root, options):
        super().__init__(root, options)
        self.rank, self.world, self.state = 0, 1, None
        self.say = lambda step: None  # where start-up steps are said (the run's start-up line)

    @classmethod
    def provides(cls, options) -> set[tuple]:
        """("scores", label, mode, formulation, fewshot, normalization) for what a run with
        ``options`` stores: every mode, formulation (None: the workspace's own; letters+rotations
        stores the letters formulation and each rotation, ``ALL_ROTATIONS`` standing for them)
        and shot count, in every normalization of the columns ``assemble`` writes (``seq_mean``
        on the rows its policy gives it)."""
        from scoring.normalize import INPUTS

        out = set()
        for k in shot_counts(options.fewshot):
            stored = {"logprob_sum", "n_tokens", "n_chars", "n_bytes"} | ({"seq_mean"} if wants_seq_mean(
                options.seq_mean, k) else set())
            norms = [n for n, needed in INPUTS.items() if stored.issuperset(needed)]
            for name in options.formulations or (None,):
                for f in ("letters", forms.ALL_ROTATIONS) if name == forms.ALL_ROTATIONS else (name,):
                    out |= {("scores", options.label or options.model, mode, f, k, n) for mode in options.modes
                            for n in norms}
        return out

    def locked(self):
        return super().locked() if self.rank == 0 else nullcontext()  # process 0 holds it for them all

    def run(self) -> dict:
        self.rank, self.world, self.state = distributed(self.options.device)
        if self.state is not None and self.options.device == "cuda":
            self.options = replace(self.options, device=str(self.state.device))
        return super().run()

    def execute(self) -> dict:
        o, ws = self.options, self.ws
        items = ws.items()[:o.limit] if o.limit else ws.items()
        # a missing few-shot pool or model is refused here, before any table is made or the model loads
        shots, settings, fewshot_info = fewshot_plan(ws, items, o.fewshot, o.fewshot_pool)
        ref = resolve(o.model)
        if self.rank == 0:
            ws.migrate(SCORE_TABLES)
            if o.text_scores:
                ws.migrate(TEXT_TABLES)
        self.wait()
        with self.startup(f"starting {o.model} on the {o.backend} backend", enabled=self.rank == 0) as startup:
            self.say = startup.say
            context = Context(logs=self.root / "logs", say=startup.say, stats=o.text_scores)
            with open_backend(o.backend, ref, o, context) as backend:
                if o.text_scores:
                    refuse_stats(backend, "--text-scores")
                return self.run_on(backend, ref, items, (shots, settings, fewshot_info), startup)

    def run_on(self, backend, ref, items, fewshot, startup) -> dict:
        """The run on the loaded ``backend``: planned, recorded, scored; its summary."""
        o, (shots, settings, fewshot_info) = self.options, fewshot
        key = {**backend.identity(), "fewshot_key": fewshot_info.get("fewshot_key")}
        run_id, ws = shared_run_id(self.state), self.ws
        formulations = self.formulations(ws, items)
        work = self.plan(ws, backend, items, formulations, shots, settings, key)
        startup.close()
        replaced = self.record(ws, work, backend, ref, key, run_id, formulations, fewshot_info)
        if o.replace:
            self.wait()
        tokens, timing = self.score(ws, work, backend, run_id)
        self.wait()
        return {"items": len(items), "options": sum(len(items[i]["options"]) for i, *_ in work.units),
                "computed": len(work.missing), "cached": len(work.units) - len(work.missing),
                "text_computed": len(work.texts), "tokens": tokens, "modes": list(o.modes),
                "formulations": formulations, "fewshot": o.fewshot, **timing, "run_id": run_id, "label": self.label,
                "replaced_rows": replaced, "self_check": work.checked, **backend.summary(), "process": self.rank,
                "processes": self.world, "torch_threads": torch_threads()}

    def wait(self) -> None:
        """Every process waits for the others here (data parallel; one process: nothing)."""
        if self.state is not None:
            self.state.wait_for_everyone()

    def formulations(self, ws, items) -> list[str]:
        """The formulations named (default: the workspace's own), each applying to some item."""
        formulations = list(self.options.formulations or [ws.meta("formulation", "cloze")])
        for name in formulations:
            if not any(item_formulations(it, [name]) for it in items):
                most = max((len(it["options"]) for it in items), default=0)
                raise CurateError(f"formulation {name!r} applies to no item: a rotation letters+rK needs more than K "
                                  f"options, and these items have at most {most}")
        return formulations

    def plan(self, ws, backend, items, formulations, shots, settings, key) -> Work:
        """What is left to do: every unit of this process's items, which are stored under ``key``
        (a label holding another source's scores is refused now, or, with ``replace``, all its rows
        will be deleted, so none counts as done), the batches to run, refused or checked before
        anything is stored."""
        o, source = self.options, scored_source(key, backend)
        mine = [i for i, it in enumerate(items) if it["row_index"] % self.world == self.rank]
        work = Work(items, [], stale=other_sources(ws, self.label, source))
        if work.stale and not o.replace:
            check_label(ws, self.label, source)
        if o.text_scores:
            work.texts, work.text_other = self.text_plan(ws, items, mine, key, formulations)
        done = {}
        for k in o.fewshot:
            for mode in o.modes:
                for i in mine:
                    for f in item_formulations(items[i], formulations):
                        if (mode, f, k) not in done:
                            done[mode, f, k] = set() if work.stale else cached_item_ids(
                                ws, self.label, mode, key, seq_mean=wants_seq_mean(o.seq_mean, k), formulation=f,
                                fewshot=k)
                        work.units.append((i, mode, f, k, items[i]["item_id"] not in done[mode, f, k]))
        work.missing = {(i, mode, f, k) for i, mode, f, k, todo in work.units if todo}
        if work.missing or work.texts:
            self.batch(work, backend, shots, settings)
        return work

    def text_plan(self, ws, items, mine, key: dict, formulations) -> tuple:
        """(keys of the units whose gold row gives text scores this run, stored text rows of another
        source that ``replace`` deletes). The text is the full-mode cloze 0-shot gold row, so the run
        must score that; a label holding another source's text scores is refused (``pending``)."""
        o = self.options
        if "full" not in o.modes or "cloze" not in formulations or 0 not in o.fewshot:
            raise CurateError("--text-scores reads each item's text off its full-mode cloze 0-shot row, which this "
                              "run does not score: add full to --modes, cloze to --formulations and 0 to --fewshot, "
                              "or run `curate text-scores` on its own")
        chosen = [items[i] for i in mine]
        todo, other = pending(ws, self.label, (key["model_hash"], key["tokenizer_hash"], key["dtype"]), chosen,
                              replace=o.replace, engine=key["engine"])
        return {(i, "full", "cloze", 0) for i in mine if items[i]["item_id"] in todo}, other

    def batch(self, work: Work, backend, shots, settings) -> None:
        """The run's batches (the backend's plan over every unit, kept where any unit is to do),
        what no batch can score refused, and the self-check."""
        items, o = work.items, self.options
        self.say(f"tokenizing {len(work.units)} units (an item in one mode)")
        specs = [unit_spec(i, items[i], mode, f, shots[k][i], settings) for i, mode, f, k, _ in work.units]
        built = build_units(backend.tokenizer, specs, max_length=backend.window,
                            seq_mean=partial(wants_seq_mean, o.seq_mean))
        for unit in built:
            if unit_key(unit) in work.texts:
                ask_stats(unit, items[unit.item_index]["gold"])
        work.batches = [b for b in backend.plan(built, items)
                        if any(unit_key(u) in work.missing or unit_key(u) in work.texts for u in b.units)]
        planned = [u for b in work.batches for u in b.units]
        backend.refuse(planned, items)
        if o.self_check:
            self.say(f"self-check: the first {o.self_check} units also scored by the model's own forward")
        work.checked = backend.self_check(
            planned, items=o.self_check, names=lambda u: f"item {items[u.item_index]['item_id']} ({u.mode}, "
                                                         f"{u.formulation}" + (f", {u.fewshot}-shot)" if u.fewshot else ")"))

    def record(self, ws, work: Work, backend, ref, key, run_id, formulations, fewshot_info) -> int:
        """The run's record (every process checks the label alike; with ``replace`` process 0
        deletes the label's scores first). Returns the rows deleted."""
        o, replaced = self.options, 0
        source = scored_source(key, backend)
        with ws.transaction():
            if self.rank == 0 or not o.replace:
                replaced = check_label(ws, self.label, source, replace=o.replace)
                if work.text_other:
                    ws.conn.execute("DELETE FROM text_scores WHERE model = ?", (self.label,))
            add_run(ws, run_id=run_id, model=self.label, origin="scored", model_hash=key["model_hash"],
                    tokenizer_hash=key["tokenizer_hash"], dtype=o.dtype, device=o.device, engine=key["engine"],
                    info={"model": o.model, "path": ref.path, "revision": ref.revision, "modes": list(o.modes),
                          "formulations": formulations, "batch_tokens": o.batch_tokens, "limit": o.limit,
                          "max_length": backend.window, "seq_mean": o.seq_mean, "processes": self.world,
                          "versions": versions(), "replaced_rows": replaced, "backend": backend.name,
                          **backend.info(), "self_check": work.checked, "fewshot": o.fewshot, **fewshot_info,
                          **({"text_version": TEXT_VERSION, "text": RUN_TEXT} if o.text_scores else {})})
        return replaced

    def score(self, ws, work: Work, backend, run_id: str) -> tuple[int, dict]:
        """Each batch scored and committed on its own (an item's text scores with its option
        scores), so a killed run loses only the batch in flight. Returns (input tokens, timings)."""
        items, tokens = work.items, 0
        loop_start, loop_cpu = time.perf_counter(), time.process_time()
        bar = self.progress(len(work.missing), "item", f"scoring {self.label}", enabled=self.rank == 0)
        for batch in work.batches:
            results = backend.score(batch)
            rows, texts, k, fresh = [], [], 0, 0
            for unit in batch.units:
                mine, item = results[k:k + len(unit.requests)], items[unit.item_index]
                # A unit stored already keeps its row: rewritten, a run without seq_mean would empty
                # its seq_mean, and its numbers are this engine's either way.
                if unit_key(unit) in work.missing:
                    rows += assemble(unit, mine, item, label=self.label, run_id=run_id)
                    fresh += 1
                if unit_key(unit) in work.texts:
                    texts.append(text_row(item, unit.flags[item["gold"]], mine, label=self.label, run_id=run_id))
                k += len(unit.requests)
            with ws.transaction():
                write_scores(ws, rows)
                if texts:
                    write_text_scores(ws, texts)
            tokens += sum(u.n_input for u in batch.units)
            bar.update(fresh)
            bar.set_postfix_str(f"{tokens / (time.perf_counter() - loop_start):.0f} tok/s")
        bar.close()
        return tokens, {"score_seconds": round(time.perf_counter() - loop_start, 3),
                        "score_cpu_seconds": round(time.process_time() - loop_cpu, 3)}


def torch_threads() -> int:
    import torch
    return torch.get_num_threads()


def verify_batch_invariance(root, options, mode: str, *, label: str | None = None, seed: int = 0,
                            formulation: str | None = None) -> dict:
    """Re-score ``options.verify_batch_invariance`` random stored items of (label, mode,
    formulation) one at a time by the run's backend (``options``: the run's ``ScoreOptions``) and
    compare with the stored (batched) numbers: the largest absolute differences of logprob_sum
    and seq_mean. ``formulation`` defaults to the workspace's."""
    k, label = options.verify_batch_invariance, label or options.model
    with open_scores(root) as ws:
        formulation = formulation or ws.meta("formulation", "cloze")
        stored = read_scores(ws, models=[label], modes=[mode], formulations=[formulation], fewshots=[0])
        by_id = {it["item_id"]: it for it in ws.items()}
    if stored.empty:
        raise CurateError(f"no stored scores for model {label!r} in mode {mode!r} to verify")
    chosen = random.Random(seed).sample(sorted(stored["item_id"].unique()), min(k, stored["item_id"].nunique()))
    worst = {"logprob_sum": 0.0, "seq_mean": 0.0}
    with open_backend(options.backend, resolve(options.model), options, Context(logs=Path(root) / "logs")) as backend:
        for item_id in chosen:
            item = by_id[item_id]
            spec = unit_spec(0, item, mode, formulation)
            unit = build_unit(backend.tokenizer, 0, mode, spec.context, spec.options, max_length=backend.window,
                              delimiter=spec.delimiter, formulation=formulation)
            alone = assemble(unit, backend.score_requests(unit.requests), item, label=label, run_id="")
            mine = stored[stored["item_id"] == item_id].sort_values("option_index")
            for row, (_, old) in zip(alone, mine.iterrows()):
                for col in worst:
                    if row[col] is not None and old[col] == old[col]:
                        worst[col] = max(worst[col], abs(row[col] - float(old[col])))
    return {"items": len(chosen), "mode": mode, "max_abs_diff": worst}
