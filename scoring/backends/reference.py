"""The reference: the model's own transformers forward, one sequence per distinct fed row
(``scoring.reference``), no packing, no shared prefix, no kernel of ours. Slow, and exact by
definition: the oracle the engine is checked against, and a way to score an architecture the
engine refuses. No settings of its own; no per-token statistics (text scores), which only the
engine's forward computes."""
from __future__ import annotations

from scoring.backends import Backend as Interface, Context

#: Raised with every change that can alter a number this backend stores.
VERSION = 1


class Backend(Interface):
    """The model loaded through transformers, each request scored by its own forward."""
    name = "reference"

    def __init__(self, ref, options, context: Context = Context()):
        from scoring.models import load, max_length

        super().__init__(ref, options, context)
        context.say(f"loading the model ({self.dtype}, {self.device})")
        self.lm, self.tokenizer = load(ref, dtype=self.dtype, device=self.device)
        self.window = max_length(self.lm, self.tokenizer)

    def identity(self) -> dict:
        from scoring.models import tokenizer_hash
        return {"model_hash": self.ref.weights_hash, "tokenizer_hash": tokenizer_hash(self.tokenizer),
                "dtype": self.dtype, "engine": f"reference-{VERSION}"}

    def info(self) -> dict:
        from scoring.forward import architecture
        from scoring.models import placement
        return {"architecture": architecture(self.lm), "runner": "reference", "device_map": placement(self.lm)}

    def plan(self, units, items) -> list:
        from scoring import prefix_cache
        return prefix_cache.plan(units, self.batch_tokens)

    def refuse(self, units, items) -> None:
        from scoring.forward import refuse_unscorable
        refuse_unscorable(self.lm, units, items, self.window)

    def self_check(self, units, *, items: int, names, score=None) -> dict:
        return {"items": 0, "note": "not run: the reference backend is the model's own forward it would compare with"}

    def score(self, batch) -> list:
        return self.score_requests(batch.requests)

    def score_requests(self, requests) -> list:
        from scoring import reference
        return reference.score(self.lm, requests)

    def summary(self) -> dict:
        return {"runner": "reference"}

    def why_no_stats(self) -> str:
        return "does not compute (only the engine's forward does)"
