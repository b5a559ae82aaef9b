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
from functools import partial

from curate.items import fewshot as shots_of
from curate.items import formulations as forms
from curate.core.errors import CurateError
from curate.items.fewshot_pool import fewshot_plan
from curate.items.canonical import MODES, canonical_json, sha256_text
from curate.items.store import Workspace
from scoring import ENGINE_VERSION, heap, prefix_cache
from scoring.encode import Spec, Unit, build_unit, build_units
from scoring.engine import architecture, exact_length, longest_sequence, runner_for, score_requests
from scoring.logits import input_device
from scoring.models import DTYPES, check_device, load, placement, resolve
from scoring.options import DEFAULTS, SEQ_MEAN, shot_counts, wants_seq_mean
from scoring.self_check import self_check
from scoring.store import (add_run, check_label, label_lock, open_scores, other_sources, read_scores, run_source,
                           write_scores)
from scoring.text import RUN_TEXT, TEXT_VERSION, ask_stats, pending, text_row
from scoring.text_store import open_text_scores, write_text_scores


def tokenizer_hash(tokenizer) -> str:
    """What decides the token ids: the fast tokenizer's full definition and its special tokens."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    body = backend.to_str() if backend is not None else canonical_json(sorted(tokenizer.get_vocab().items()))
    specials = {"bos": tokenizer.bos_token_id, "eos": tokenizer.eos_token_id,
                "added": sorted(map(str, tokenizer.all_special_tokens)), "class": type(tokenizer).__name__}
    return sha256_text(body + canonical_json(specials))


def max_length(model, tokenizer) -> int:
    """lm-eval's rule: the config's context length, else the tokenizer's, else 2048."""
    for attr in ("n_positions", "max_position_embeddings", "n_ctx"):
        value = getattr(model.config, attr, None)
        if value:
            return int(value)
    limit = getattr(tokenizer, "model_max_length", None)
    return int(limit) if limit and limit < 10**9 else 2048


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


def refuse_inexact(model, units: list[Unit], items) -> None:
    """A CurateError naming the first unit with a sequence longer than the engine reproduces
    exactly for this model (``scoring.engine.exact_length``), before anything is scored."""
    limit = exact_length(model)
    for unit in units if limit else []:
        longest = max(longest_sequence(r) for r in unit.requests)
        if longest > limit:
            raise CurateError(
                f"item {items[unit.item_index]['item_id']} ({unit.mode}): a sequence of {longest} tokens, but "
                f"{architecture(model)} rescales its rotary embedding past {limit} tokens by the length of each "
                f"forward pass, which batched scoring cannot reproduce exactly, so items this long are not scored "
                f"with this model")


def refuse_unscorable(model, units: list[Unit], items, window: int) -> None:
    """A CurateError naming the first unit that cannot be scored at all, before anything is
    scored: an option longer than the model's window (no context would be left and positions
    past the window do not exist; lm-eval refuses it too), or a token id the model has no
    embedding for (a tokenizer that does not belong to the model)."""
    rows = model.get_input_embeddings().num_embeddings
    too_long = [(u, j, n) for u in units for j, n in enumerate(u.n_tokens) if n > window]
    if too_long:
        unit, j, n = too_long[0]
        raise CurateError(f"item {items[unit.item_index]['item_id']} ({unit.mode}, {unit.formulation}): option {j} is "
                          f"{n} tokens, longer than the model's window of {window} tokens, so it cannot be scored "
                          f"(lm-eval refuses it too); {len(too_long)} option(s) in all. Score a model with a longer "
                          f"window, or ingest the benchmark without these items")
    for unit in units:
        top = max(max(seq) for r in unit.requests for seq in (r.prefix, *r.conts) if seq)
        if top >= rows:
            raise CurateError(f"item {items[unit.item_index]['item_id']} ({unit.mode}, {unit.formulation}): the "
                              f"tokenizer gives token id {top}, but the model has {rows} token embeddings: the "
                              f"tokenizer does not belong to this model")


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


def versions() -> dict:
    import torch
    import transformers

    import curate
    return {"benchcurate": curate.__version__, "torch": torch.__version__,
            "transformers": transformers.__version__, "python": platform.python_version()}


def score_workspace(root, model: str, modes: list[str], *, dtype: str = DEFAULTS["dtype"],
                    device: str = DEFAULTS["device"], batch_tokens: int = DEFAULTS["batch_tokens"],
                    limit: int | None = DEFAULTS["limit"], show_progress: bool = True,
                    label: str | None = None, seq_mean: str = DEFAULTS["seq_mean"], replace: bool = DEFAULTS["replace"],
                    formulations: list[str] | None = None, self_check_items: int = DEFAULTS["self_check"],
                    max_memory=DEFAULTS["max_memory"], fewshot=DEFAULTS["fewshot"],
                    fewshot_pool: str | None = DEFAULTS["fewshot_pool"],
                    prefix_cache_mb: int = DEFAULTS["prefix_cache_mb"],
                    text_scores: bool = DEFAULTS["text_scores"]) -> dict:
    """Score every option of every item (the first ``limit``) of ``root`` under ``modes`` and
    ``formulations`` (default: the workspace's, lm-eval's choice for its benchmark).

    ``label`` is the model name stored with the scores (default: ``model``); it must not hold
    scores of another model, tokenizer or dtype unless ``replace`` deletes them (all of the
    label's modes) first. ``seq_mean`` (``scoring.options.SEQ_MEAN``) says which rows also get the
    study's whole-sequence mean (it needs every context token's log-probability, so it costs extra
    output-projection work): "0-shot" rows only, "all", or "none" (only lm-eval's numbers).

    ``fewshot`` (shot counts, "0,5" or a list) scores each item after k worked examples as well,
    built as lm-eval builds them (``curate.items.fewshot``), from ``fewshot_pool``
    (``curate.items.fewshot_pool``); scores are stored per shot count.

    Prefixes many rows share (a few-shot header) are computed once and their keys and values
    kept, at most ``prefix_cache_mb`` MB of them (``scoring.prefix_cache``); the others are
    computed in full for every row.

    ``text_scores`` also stores each item's text scores (``scoring.text``), read off its full-mode
    cloze 0-shot gold row in the same forward pass and written in the same transaction as its
    option scores, resumable as `curate text-scores` is (``scoring.text.pending``).

    Before anything is stored, the first ``self_check_items`` units of the plan (the longest rows
    that fit one batch) are also scored by the model's own plain forward
    (``scoring.self_check``); a difference over the dtype's tolerance stops the run.
    ``device="auto"`` places the model over the visible GPUs (``max_memory``: where it may go,
    see ``scoring.models.parse_max_memory``). Returns a summary: items, options, computed and
    cached unit counts (one unit = one item in one mode and formulation), input tokens, seconds,
    run_id, process index/count, the runner and the self-check's result.
    """
    import torch
    from tqdm import tqdm

    modes = list(dict.fromkeys(modes))  # `--modes full,full` scores full once
    try:
        counts = shot_counts(fewshot)
    except ValueError as exc:
        raise CurateError(str(exc)) from None
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise CurateError(f"unknown mode(s) {', '.join(bad) or '(none)'}; known: {', '.join(MODES)}")
    if seq_mean not in SEQ_MEAN:
        raise CurateError(f"seq_mean {seq_mean!r}: choose from {', '.join(SEQ_MEAN)}")
    if dtype not in DTYPES:
        raise CurateError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    for name in formulations or []:
        forms.check(name)
    if batch_tokens < 1:
        raise CurateError("--batch-tokens must be positive")
    if prefix_cache_mb < 0:
        raise CurateError("--prefix-cache-mb must be 0 (no cache) or a number of megabytes")
    if self_check_items < 0:
        raise CurateError("--self-check must be 0 (skip) or a number of items")
    check_device(device)
    start = time.perf_counter()
    rank, world, state = distributed(device)
    if state is not None and device == "cuda":
        device = str(state.device)
    # A missing or bad workspace, or a model that cannot be found, fails before anything is
    # written; the first process creates the score tables while the others wait (two processes
    # must not run one migration), and holds the lock that keeps a second run on this label out
    # (curate.core.lock) until it returns.
    with Workspace.open(root) as early:  # a missing few-shot pool is refused before the model loads
        items = early.items()[:limit] if limit else early.items()
        shots, settings, fewshot_info = fewshot_plan(early, items, counts, fewshot_pool)
    ref = resolve(model)
    lock = label_lock(root, label or model, command="score") if rank == 0 else nullcontext()
    if rank == 0:
        (open_text_scores if text_scores else open_scores)(root).close()
        lock.__enter__()
    if state is not None:
        state.wait_for_everyone()
    try:
        lm, tokenizer = load(ref, dtype=dtype, device=device, scoring_only=True, max_memory=max_memory)
        runner = runner_for(lm)  # an architecture the engine cannot reproduce is refused here
    except BaseException:
        lock.__exit__(None, None, None)
        raise
    label = label or model
    cache_bytes = prefix_cache_mb * 2**20
    key = {"model_hash": ref.weights_hash, "tokenizer_hash": tokenizer_hash(tokenizer), "dtype": dtype,
           "engine": ENGINE_VERSION}
    source = run_source({"origin": "scored", **key})
    limit_len = max_length(lm, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    run_id = shared_run_id(state)
    ws = open_scores(root)
    try:
        formulations = list(formulations or [ws.meta("formulation", "cloze")])
        for name in formulations:
            if not any(item_formulations(it, [name]) for it in items):
                most = max((len(it["options"]) for it in items), default=0)
                raise CurateError(f"formulation {name!r} applies to no item: a rotation letters+rK needs more than K "
                                  f"options, and these items have at most {most}")
        key["fewshot_key"] = fewshot_info.get("fewshot_key")
        mine = [i for i, it in enumerate(items) if it["row_index"] % world == rank]
        # A label holding another source's scores is refused now, or (``replace``) all its rows
        # will be deleted, so none of them counts as done.
        stale = other_sources(ws, label, source)
        if stale and not replace:
            check_label(ws, label, source)
        text_units, text_other = text_plan(ws, items, mine, label, key, modes, formulations, counts,
                                           replace=replace) if text_scores else (set(), 0)
        # The batch plan covers every unit, cached or not, and a batch runs if any of its units
        # is missing: a resumed run recomputes exactly the batches of an uninterrupted one, so
        # its numbers are identical to the last bit, not merely close.
        units, done = [], {}
        for k in counts:
            for mode in modes:
                for i in mine:
                    for f in item_formulations(items[i], formulations):
                        if (mode, f, k) not in done:
                            done[mode, f, k] = set() if stale else cached_item_ids(
                                ws, label, mode, key, seq_mean=wants_seq_mean(seq_mean, k), formulation=f, fewshot=k)
                        units.append((i, mode, f, k, items[i]["item_id"] not in done[mode, f, k]))
        plan, checked = [], {"items": 0, "note": "nothing to compute"}
        missing = {(i, mode, f, k) for i, mode, f, k, todo in units if todo}
        if missing or text_units:
            specs = [unit_spec(i, items[i], mode, f, shots[k][i], settings) for i, mode, f, k, _ in units]
            built = build_units(tokenizer, specs, max_length=limit_len, seq_mean=partial(wants_seq_mean, seq_mean))
            for unit in built:
                if unit_key(unit) in text_units:
                    ask_stats(unit, items[unit.item_index]["gold"])
            plan = [b for b in prefix_cache.plan(built, batch_tokens, model=lm, max_bytes=cache_bytes)
                    if any(unit_key(u) in missing or unit_key(u) in text_units for u in b.units)]
            planned = [u for b in plan for u in b.units]
            refuse_unscorable(lm, planned, items, limit_len)
            refuse_inexact(lm, planned, items)
            checked = self_check(lm, planned, dtype, items=self_check_items, batch_tokens=batch_tokens, pad_id=pad_id,
                                 score=partial(prefix_cache.score_shared_requests, max_bytes=cache_bytes),
                                 names=lambda u: f"item {items[u.item_index]['item_id']} ({u.mode}, {u.formulation}"
                                                 + (f", {u.fewshot}-shot)" if u.fewshot else ")"))
        # Every process checks the label (all refuse alike); with ``replace`` process 0 deletes
        # the label's scores and the others wait for it before they write.
        replaced = 0
        with ws.transaction():
            if rank == 0 or not replace:
                replaced = check_label(ws, label, source, replace=replace)
                if text_other:
                    ws.conn.execute("DELETE FROM text_scores WHERE model = ?", (label,))
            add_run(ws, run_id=run_id, model=label, origin="scored", model_hash=key["model_hash"],
                    tokenizer_hash=key["tokenizer_hash"], dtype=dtype, device=device, engine=ENGINE_VERSION,
                    info={"model": model, "path": ref.path, "revision": ref.revision, "modes": list(modes),
                          "formulations": formulations, "batch_tokens": batch_tokens, "limit": limit,
                          "max_length": limit_len, "seq_mean": seq_mean, "processes": world, "versions": versions(),
                          "replaced_rows": replaced, "architecture": architecture(lm), "runner": runner,
                          "self_check": checked, "device_map": placement(lm), "max_memory": max_memory,
                          "fewshot": counts, **fewshot_info, "prefix_cache_mb": prefix_cache_mb,
                          **({"text_version": TEXT_VERSION, "text": RUN_TEXT} if text_scores else {})})
        if replace and state is not None:
            state.wait_for_everyone()
        tokens, loop_start, loop_cpu = 0, time.perf_counter(), time.process_time()
        computed = len(missing)
        bar = tqdm(total=computed, unit="item", desc=f"scoring {label}", disable=not show_progress or rank != 0,
                   dynamic_ncols=True)
        caches = prefix_cache.Caches(lm, cache_bytes)
        for batch in plan:
            caches.keep_only(batch.prefixes())
            results = prefix_cache.score_with_caches(lm, batch.requests, batch.shared, caches, pad_id=pad_id,
                                                     max_tokens=batch_tokens)
            heap.release(input_device(lm))
            rows, texts, k, fresh = [], [], 0, 0
            for unit in batch.units:
                mine_results, item = results[k:k + len(unit.requests)], items[unit.item_index]
                # A unit stored already keeps its row: rewritten, a --no-seq-mean run would empty
                # its seq_mean, and its numbers are this engine's either way.
                if unit_key(unit) in missing:
                    rows += assemble(unit, mine_results, item, label=label, run_id=run_id)
                    fresh += 1
                if unit_key(unit) in text_units:
                    texts.append(text_row(item, unit.flags[item["gold"]], mine_results, label=label, run_id=run_id))
                k += len(unit.requests)
            with ws.transaction():  # an item's text scores commit with its option scores
                write_scores(ws, rows)
                if texts:
                    write_text_scores(ws, texts)
            tokens += sum(u.n_input for u in batch.units)
            bar.update(fresh)
            bar.set_postfix_str(f"{tokens / (time.perf_counter() - loop_start):.0f} tok/s")
        bar.close()
        if state is not None:
            state.wait_for_everyone()
        return {"items": len(items), "options": sum(len(items[i]["options"]) for i, *_ in units),
                "computed": computed, "cached": len(units) - computed, "text_computed": len(text_units),
                "tokens": tokens, "modes": list(modes),
                "formulations": formulations, "fewshot": counts,
                "seconds": round(time.perf_counter() - start, 3),
                "score_seconds": round(time.perf_counter() - loop_start, 3),
                "score_cpu_seconds": round(time.process_time() - loop_cpu, 3), "run_id": run_id, "label": label,
                "replaced_rows": replaced, "self_check": checked, "runner": runner,
                "prefix_cache": caches.summary(), "process": rank, "processes": world,
                "torch_threads": torch.get_num_threads()}
    finally:
        ws.close()
        lock.__exit__(None, None, None)


def text_plan(ws, items, mine, label: str, key: dict, modes, formulations, counts, *, replace: bool) -> tuple:
    """(keys of the units whose gold row gives text scores this run, stored text rows of another
    source that ``replace`` deletes). The text is the full-mode cloze 0-shot gold row, so the run
    must score that; a label holding another source's text scores is refused (``pending``)."""
    if "full" not in modes or "cloze" not in formulations or 0 not in counts:
        raise CurateError("--text-scores reads each item's text off its full-mode cloze 0-shot row, which this run "
                          "does not score: add full to --modes, cloze to --formulations and 0 to --fewshot, or "
                          "run `curate text-scores` on its own")
    chosen = [items[i] for i in mine]
    todo, other = pending(ws, label, (key["model_hash"], key["tokenizer_hash"], key["dtype"]), chosen,
                          replace=replace)
    return {(i, "full", "cloze", 0) for i in mine if items[i]["item_id"] in todo}, other


def verify_batch_invariance(root, model: str, mode: str, k: int, *, dtype: str = "float32", device: str = "cpu",
                            label: str | None = None, seed: int = 0, formulation: str | None = None) -> dict:
    """Re-score ``k`` random stored items of (label, mode, formulation) one at a time and compare
    with the stored (batched) numbers: the largest absolute differences of logprob_sum and
    seq_mean. ``formulation`` defaults to the workspace's."""
    ref = resolve(model)
    lm, tokenizer = load(ref, dtype=dtype, device=device, scoring_only=True)
    label = label or model
    ws = open_scores(root)
    try:
        formulation = formulation or ws.meta("formulation", "cloze")
        stored = read_scores(ws, models=[label], modes=[mode], formulations=[formulation], fewshots=[0])
        by_id = {it["item_id"]: it for it in ws.items()}
    finally:
        ws.close()
    if stored.empty:
        raise CurateError(f"no stored scores for model {label!r} in mode {mode!r} to verify")
    chosen = random.Random(seed).sample(sorted(stored["item_id"].unique()), min(k, stored["item_id"].nunique()))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    limit_len = max_length(lm, tokenizer)
    worst = {"logprob_sum": 0.0, "seq_mean": 0.0}
    for item_id in chosen:
        item = by_id[item_id]
        spec = unit_spec(0, item, mode, formulation)
        unit = build_unit(tokenizer, 0, mode, spec.context, spec.options, max_length=limit_len,
                          delimiter=spec.delimiter, formulation=formulation)
        alone = assemble(unit, score_requests(lm, unit.requests, pad_id=pad_id), item, label=label, run_id="")
        mine = stored[stored["item_id"] == item_id].sort_values("option_index")
        for row, (_, old) in zip(alone, mine.iterrows()):
            for col in worst:
                if row[col] is not None and old[col] == old[col]:
                    worst[col] = max(worst[col], abs(row[col] - float(old[col])))
    return {"items": len(chosen), "mode": mode, "max_abs_diff": worst}
