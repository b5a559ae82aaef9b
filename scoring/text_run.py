"""`curate text-scores`: the text scores of a workspace scored without `curate score --text-scores`.

Each item's full-mode gold row (``scoring.text``) is scored on its own by a scoring backend
(``--backend``: the engine, or vLLM's worker; a backend that gives no per-token statistics is
refused in one line), with its refusals and its self-check; what it stores equals what the
full-mode pass would have stored. Apart from ``scoring.text``, which ``scoring.run`` reads, so
that neither imports the other.
"""
from __future__ import annotations

import time

from scoring.backends import Context, open_backend, refuse_stats
from scoring.encode import build_units
from scoring.models import ModelStage, resolve
from scoring.options import TextScoresOptions
from scoring.store import MIGRATIONS as SCORE_TABLES
from scoring.text import K, RUN_TEXT, TEXT_VERSION, ask_stats, pending, text_row, text_spec
from scoring.text_store import MIGRATIONS as TEXT_TABLES


class TextScores(ModelStage):
    """Store the text scores of every item (the first ``limit``) of the workspace under ``label``
    (default ``model``): each item's full-mode gold row scored on its own, for a workspace scored
    without `curate score --text-scores`. Resumable as that is (``scoring.text.pending``); each
    batch commits on its own."""
    name = "text-scores"
    Options = TextScoresOptions

    def execute(self) -> dict:
        o = self.options
        ref = resolve(o.model)
        with self.startup(f"starting {o.model} on the {o.backend} backend") as startup:
            context = Context(logs=self.root / "logs", say=startup.say, stats=True)
            with open_backend(o.backend, ref, o, context) as backend:
                refuse_stats(backend, "`curate text-scores`")
                return self.run_on(backend, ref, startup)

    def run_on(self, backend, ref, startup) -> dict:
        """The run on the loaded ``backend``: what is left, refused or checked, recorded, scored."""
        o, identity, info, ws = self.options, backend.identity(), backend.info(), self.ws
        ws.migrate(SCORE_TABLES)  # the runs' table, made once the model has loaded
        ws.migrate(TEXT_TABLES)
        key = (identity["model_hash"], identity["tokenizer_hash"], identity["dtype"])
        items = ws.items()[:o.limit] if o.limit else ws.items()
        todo, other = pending(ws, self.label, key, items, replace=o.replace, engine=identity["engine"])
        units = build_units(backend.tokenizer, [text_spec(i, it) for i, it in enumerate(items)
                                                if it["item_id"] in todo],
                            max_length=backend.window, seq_mean=False)
        for unit in units:
            unit.requests[0].prefix_lp = True  # the self-check then covers every predicted token
            ask_stats(unit, 0)
        backend.refuse(units, items)
        plan = backend.plan(units, items)
        if o.self_check and units:
            startup.say(f"self-check: the first {o.self_check} texts also scored by the model's own forward")
        checked = backend.self_check([u for b in plan for u in b.units], items=o.self_check,
                                     names=lambda u: f"item {items[u.item_index]['item_id']} (text)")
        startup.close()
        run_id = self.record(ws, units, other, identity, ref, info, checked)
        tokens, seconds = self.score(ws, plan, items, backend, run_id)
        return {"items": len(items), "computed": len(units), "cached": len(items) - len(units), "tokens": tokens,
                "score_seconds": seconds, "run_id": run_id, "label": self.label,
                "runner": info.get("runner", backend.name), "backend": backend.name,
                "self_check": checked, "replaced_rows": other}

    def record(self, ws, units, other: int, identity: dict, ref, info: dict, checked) -> str:
        """The run's record (a run that computes nothing records nothing), the label's text scores
        of another source deleted first. Returns the run id."""
        from scoring.store import add_run
        from scoring.run import versions

        o, run_id = self.options, self.run_id("text")
        with ws.transaction():
            if other:
                ws.conn.execute("DELETE FROM text_scores WHERE model = ?", (self.label,))
            if units:
                add_run(ws, run_id=run_id, model=self.label, origin="text", model_hash=identity["model_hash"],
                        tokenizer_hash=identity["tokenizer_hash"], dtype=o.dtype, device=o.device,
                        engine=identity["engine"],
                        info={"model": o.model, "path": ref.path, "revision": ref.revision, "text": RUN_TEXT,
                              "text_version": TEXT_VERSION, "k": list(K), "batch_tokens": o.batch_tokens,
                              "limit": o.limit, "backend": o.backend, **info, "self_check": checked,
                              "versions": versions(), "replaced_rows": other})
        return run_id

    def score(self, ws, plan, items, backend, run_id: str) -> tuple[int, float]:
        """Each batch scored and committed on its own. Returns (input tokens, seconds)."""
        from scoring.text_store import write_text_scores

        tokens, loop_start = 0, time.perf_counter()
        bar = self.progress(sum(len(b.units) for b in plan), "item", f"text scores {self.label}")
        for batch in plan:
            results = backend.score(batch)
            rows = [text_row(items[u.item_index], u.flags[0], [res], label=self.label, run_id=run_id)
                    for u, res in zip(batch.units, results)]
            with ws.transaction():
                write_text_scores(ws, rows)
            tokens += sum(u.n_input for u in batch.units)
            bar.update(len(batch.units))
            bar.set_postfix_str(f"{tokens / (time.perf_counter() - loop_start):.0f} tok/s")
        bar.close()
        return tokens, round(time.perf_counter() - loop_start, 3)
