"""`curate text-scores`: the text scores of a workspace scored without `curate score --text-scores`.

Each item's full-mode gold row (``scoring.text``) is scored on its own, with the scoring run's
model loading, batch plan and refusals (``scoring.run``) and the same self-check; what it stores
equals what the full-mode pass would have stored. Apart from ``scoring.text``, which
``scoring.run`` reads, so that neither imports the other.
"""
from __future__ import annotations

import time
import uuid

from curate.core.errors import CurateError
from scoring import ENGINE_VERSION, heap
from scoring.encode import build_units
from scoring.engine import architecture, runner_for, score_requests
from scoring.logits import input_device
from scoring.options import DEFAULTS
from scoring.run import batches, max_length, refuse_inexact, refuse_unscorable, tokenizer_hash, versions
from scoring.text import K, RUN_TEXT, TEXT_VERSION, ask_stats, pending, text_row, text_spec


def text_score_workspace(root, model: str, *, dtype: str = DEFAULTS["dtype"], device: str = DEFAULTS["device"],
                         batch_tokens: int = DEFAULTS["batch_tokens"], limit: int | None = DEFAULTS["limit"],
                         label: str | None = None, replace: bool = DEFAULTS["replace"], show_progress: bool = True,
                         self_check_items: int = DEFAULTS["self_check"]) -> dict:
    """Store the text scores of every item (the first ``limit``) of ``root`` under ``label``
    (default ``model``): each item's full-mode gold row scored on its own, for a workspace scored
    without `curate score --text-scores`. Resumable as that is (``pending``); each batch commits on
    its own. Returns a summary (items, computed, cached, tokens, seconds)."""
    from tqdm import tqdm

    from curate.core.lock import work_lock
    from curate.items.store import Workspace
    from scoring.models import DTYPES, check_device, load, resolve
    from scoring.self_check import self_check
    from scoring.store import add_run
    from scoring.text_store import open_text_scores, write_text_scores

    if dtype not in DTYPES:
        raise CurateError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    if batch_tokens < 1:
        raise CurateError("--batch-tokens must be positive")
    check_device(device)
    start = time.perf_counter()
    Workspace.open(root).close()
    ref = resolve(model)
    label = label or model
    with work_lock(root, f"text-scores {label}", command="text-scores"):
        lm, tokenizer = load(ref, dtype=dtype, device=device, scoring_only=True)
        runner = runner_for(lm)
        key = (ref.weights_hash, tokenizer_hash(tokenizer), dtype)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        ws = open_text_scores(root)
        try:
            items = ws.items()[:limit] if limit else ws.items()
            todo, other = pending(ws, label, key, items, replace=replace)
            window = max_length(lm, tokenizer)
            units = build_units(tokenizer, [text_spec(i, it) for i, it in enumerate(items) if it["item_id"] in todo],
                                max_length=window, seq_mean=False)
            for unit in units:
                unit.requests[0].prefix_lp = True  # the self-check then covers every predicted token
                ask_stats(unit, 0)
            refuse_unscorable(lm, units, items, window)
            refuse_inexact(lm, units, items)
            plan = batches(units, batch_tokens)
            checked = self_check(lm, [u for b in plan for u in b], dtype, items=self_check_items,
                                 batch_tokens=batch_tokens, pad_id=pad_id,
                                 names=lambda u: f"item {items[u.item_index]['item_id']} (text)")
            run_id = f"text:{uuid.uuid4().hex[:16]}"
            with ws.transaction():  # a run that computes nothing records nothing
                if other:
                    ws.conn.execute("DELETE FROM text_scores WHERE model = ?", (label,))
                if units:
                    add_run(ws, run_id=run_id, model=label, origin="text", model_hash=key[0], tokenizer_hash=key[1],
                            dtype=dtype, device=device, engine=ENGINE_VERSION,
                            info={"model": model, "path": ref.path, "revision": ref.revision, "text": RUN_TEXT,
                                  "text_version": TEXT_VERSION, "k": list(K), "batch_tokens": batch_tokens,
                                  "limit": limit, "runner": runner, "architecture": architecture(lm),
                                  "self_check": checked, "versions": versions(), "replaced_rows": other})
            tokens, loop_start = 0, time.perf_counter()
            bar = tqdm(total=len(units), unit="item", desc=f"text scores {label}", disable=not show_progress,
                       dynamic_ncols=True)
            for batch in plan:
                results = score_requests(lm, [u.requests[0] for u in batch], pad_id=pad_id, runner=runner,
                                         max_tokens=batch_tokens)
                heap.release(input_device(lm))
                rows = [text_row(items[u.item_index], u.flags[0], [res], label=label, run_id=run_id)
                        for u, res in zip(batch, results)]
                with ws.transaction():
                    write_text_scores(ws, rows)
                tokens += sum(u.n_input for u in batch)
                bar.update(len(batch))
                bar.set_postfix_str(f"{tokens / (time.perf_counter() - loop_start):.0f} tok/s")
            bar.close()
        finally:
            ws.close()
    return {"items": len(items), "computed": len(units), "cached": len(items) - len(units), "tokens": tokens,
            "seconds": round(time.perf_counter() - start, 3),
            "score_seconds": round(time.perf_counter() - loop_start, 3),
            "run_id": run_id, "label": label, "runner": runner, "self_check": checked, "replaced_rows": other}
