"""The reference: the model's own transformers forward, one sequence per distinct fed row
(``scoring.reference``), no packing, no shared prefix, no kernel of ours. Slow, and exact by
definition: the oracle the engine is checked against, and a way to score an architecture the
engine refuses."""
from __future__ import annotations

from scoring import prefix_cache, reference
from scoring.engine import architecture, refuse_unscorable
from scoring.models import load, max_length, placement, tokenizer_hash

#: Raised with every change that can alter a number this backend stores.
VERSION = 1


class Backend:
    """The model loaded through transformers, each request scored by its own forward."""
    name = "reference"

    def __init__(self, ref, options, *, logs=None, say=lambda step: None):
        self.ref, self.dtype, self.batch_tokens = ref, options.dtype, options.batch_tokens
        say(f"loading the model ({options.dtype}, {options.device})")
        self.lm, self.tokenizer = load(ref, dtype=options.dtype, device=options.device)
        self.window = max_length(self.lm, self.tokenizer)

    def identity(self) -> dict:
        return {"model_hash": self.ref.weights_hash, "tokenizer_hash": tokenizer_hash(self.tokenizer),
                "dtype": self.dtype, "engine": f"reference-{VERSION}"}

    def info(self) -> dict:
        return {"architecture": architecture(self.lm), "runner": "reference", "device_map": placement(self.lm)}

    def plan(self, units, items) -> list[prefix_cache.Batch]:
        return prefix_cache.plan(units, self.batch_tokens)

    def refuse(self, units, items) -> None:
        refuse_unscorable(self.lm, units, items, self.window)

    def self_check(self, units, *, items: int, names) -> dict:
        return {"items": 0, "note": "not run: the reference backend is the model's own forward it would compare with"}

    def score(self, batch: prefix_cache.Batch) -> list:
        return reference.score(self.lm, batch.requests)

    def summary(self) -> dict:
        return {"runner": "reference"}

    def close(self) -> None:
        """Nothing to end: the model is this process's memory, freed with the backend."""
