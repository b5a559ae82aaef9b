"""`curate text-scores`: the text scores of a workspace scored without `curate score --text-scores`.

Each item's full-mode gold row (``scoring.text``) is scored on its own, with the scoring run's
model loading and refusals and the same self-check; what it stores equals what the full-mode
pass would have stored. Apart from ``scoring.text``, which ``scoring.run`` reads, so that neither
imports the other.
"""
from __future__ import annotations

import time

from scoring import ENGINE_VERSION, heap, prefix_cache
from scoring.encode import build_units
from scoring.engine import architecture, refuse_inexact, refuse_unscorable, runner_for, score_requests
from scoring.logits import input_device
from scoring.models import ModelStage, load, max_length, resolve, tokenizer_hash
from scoring.options import TextScoresOptions
from scoring.text import K, RUN_TEXT, TEXT_VERSION, ask_stats, pending, text_row, text_spec


def text_score_workspace(root, model: str, show_progress: bool = True, **options) -> dict:
    """``TextScores`` of ``root`` with ``model`` and ``options`` (``TextScoresOptions``' names)."""
    return TextScores.with_options(root, model=model, quiet=not show_progress, **options).run()


class TextScores(ModelStage):
    """Store the text scores of every item (the first ``limit``) of the workspace under ``label``
    (default ``model``): each item's full-mode gold row scored on its own, for a workspace scored
    without `curate score --text-scores`. Resumable as that is (``scoring.text.pending``); each
    batch commits on its own."""
    name = "text-scores"
    Options = TextScoresOptions

    def execute(self) -> dict:
        from scoring.self_check import self_check
        from scoring.text_store import open_text_scores

        o = self.options
        ref = resolve(o.model)
        lm, tokenizer = load(ref, dtype=o.dtype, device=o.device, scoring_only=True)
        runner = runner_for(lm)
        key = (ref.weights_hash, tokenizer_hash(tokenizer), o.dtype)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        with open_text_scores(self.root) as ws:
            items = ws.items()[:o.limit] if o.limit else ws.items()
            todo, other = pending(ws, self.label, key, items, replace=o.replace)
            window = max_length(lm, tokenizer)
            units = build_units(tokenizer, [text_spec(i, it) for i, it in enumerate(items) if it["item_id"] in todo],
                                max_length=window, seq_mean=False)
            for unit in units:
                unit.requests[0].prefix_lp = True  # the self-check then covers every predicted token
                ask_stats(unit, 0)
            refuse_unscorable(lm, units, items, window)
            refuse_inexact(lm, units, items)
            plan = [b.units for b in prefix_cache.plan(units, o.batch_tokens)]
            checked = self_check(lm, [u for b in plan for u in b], o.dtype, items=o.self_check,
                                 batch_tokens=o.batch_tokens, pad_id=pad_id,
                                 names=lambda u: f"item {items[u.item_index]['item_id']} (text)")
            run_id = self.record(ws, units, other, key, ref, lm, runner, checked)
            tokens, seconds = self.score(ws, plan, items, lm, runner, pad_id, run_id)
        return {"items": len(items), "computed": len(units), "cached": len(items) - len(units), "tokens": tokens,
                "score_seconds": seconds, "run_id": run_id, "label": self.label, "runner": runner,
                "self_check": checked, "replaced_rows": other}

    def record(self, ws, units, other: int, key, ref, lm, runner, checked) -> str:
        """The run's record (a run that computes nothing records nothing), the label's text scores
        of another source deleted first. Returns the run id."""
        from scoring.store import add_run
        from scoring.run import versions

        o, run_id = self.options, self.run_id("text")
        with ws.transaction():
            if other:
                ws.conn.execute("DELETE FROM text_scores WHERE model = ?", (self.label,))
            if units:
                add_run(ws, run_id=run_id, model=self.label, origin="text", model_hash=key[0], tokenizer_hash=key[1],
                        dtype=o.dtype, device=o.device, engine=ENGINE_VERSION,
                        info={"model": o.model, "path": ref.path, "revision": ref.revision, "text": RUN_TEXT,
                              "text_version": TEXT_VERSION, "k": list(K), "batch_tokens": o.batch_tokens,
                              "limit": o.limit, "runner": runner, "architecture": architecture(lm),
                              "self_check": checked, "versions": versions(), "replaced_rows": other})
        return run_id

    def score(self, ws, plan, items, lm, runner, pad_id: int, run_id: str) -> tuple[int, float]:
        """Each batch scored and committed on its own. Returns (input tokens, seconds)."""
        from scoring.text_store import write_text_scores

        tokens, loop_start = 0, time.perf_counter()
        bar = self.progress(sum(len(b) for b in plan), "item", f"text scores {self.label}")
        for batch in plan:
            results = score_requests(lm, [u.requests[0] for u in batch], pad_id=pad_id, runner=runner,
                                     max_tokens=self.options.batch_tokens)
            heap.release(input_device(lm))
            rows = [text_row(items[u.item_index], u.flags[0], [res], label=self.label, run_id=run_id)
                    for u, res in zip(batch, results)]
            with ws.transaction():
                write_text_scores(ws, rows)
            tokens += sum(u.n_input for u in batch)
            bar.update(len(batch))
            bar.set_postfix_str(f"{tokens / (time.perf_counter() - loop_start):.0f} tok/s")
        bar.close()
        return tokens, round(time.perf_counter() - loop_start, 3)
