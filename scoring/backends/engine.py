"""The engine: benchcurate's own forward pass (``scoring.engine``), batches packed by length, the
prefixes many rows share computed once (``scoring.prefix_cache``), every number the model's own
plain forward (checked by the probe that picks a runner and by the self-check)."""
from __future__ import annotations

from functools import partial

from scoring import ENGINE_VERSION, heap, prefix_cache
from scoring.engine import architecture, refuse_inexact, refuse_unscorable, runner_for
from scoring.logits import input_device
from scoring.models import load, max_length, placement, tokenizer_hash
from scoring.self_check import self_check


class Backend:
    """The model loaded for ``scoring.engine`` (``options``: the run's; ``prefix_cache_mb`` and
    ``max_memory`` are this backend's own settings)."""
    name = "engine"

    def __init__(self, ref, options, *, logs=None, say=lambda step: None):
        self.ref, self.dtype, self.batch_tokens = ref, options.dtype, options.batch_tokens
        self.cache_mb, self.max_memory = options.prefix_cache_mb, options.max_memory
        say(f"loading the model ({options.dtype}, {options.device})")
        self.lm, self.tokenizer = load(ref, dtype=options.dtype, device=options.device, scoring_only=True,
                                       max_memory=options.max_memory)
        say("probing which runner reproduces the model's own forward")
        self.runner = runner_for(self.lm)  # an architecture the engine cannot reproduce is refused here
        self.window = max_length(self.lm, self.tokenizer)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.caches = prefix_cache.Caches(self.lm, self.cache_mb * 2**20)

    def identity(self) -> dict:
        return {"model_hash": self.ref.weights_hash, "tokenizer_hash": tokenizer_hash(self.tokenizer),
                "dtype": self.dtype, "engine": ENGINE_VERSION}

    def info(self) -> dict:
        return {"architecture": architecture(self.lm), "runner": self.runner, "device_map": placement(self.lm),
                "max_memory": self.max_memory, "prefix_cache_mb": self.cache_mb}

    def plan(self, units, items) -> list[prefix_cache.Batch]:
        return prefix_cache.plan(units, self.batch_tokens, model=self.lm, max_bytes=self.cache_mb * 2**20)

    def refuse(self, units, items) -> None:
        """What no batch of this model can score exactly, in one line, before anything is scored."""
        refuse_unscorable(self.lm, units, items, self.window)
        refuse_inexact(self.lm, units, items)

    def self_check(self, units, *, items: int, names) -> dict:
        return self_check(self.lm, units, self.dtype, items=items, batch_tokens=self.batch_tokens, pad_id=self.pad_id,
                          score=partial(prefix_cache.score_shared_requests, max_bytes=self.cache_mb * 2**20),
                          names=names)

    def score(self, batch: prefix_cache.Batch) -> list:
        self.caches.keep_only(batch.prefixes())
        results = prefix_cache.score_with_caches(self.lm, batch.requests, batch.shared, self.caches, pad_id=self.pad_id,
                                                 max_tokens=self.batch_tokens)
        heap.release(input_device(self.lm))
        return results

    def summary(self) -> dict:
        return {"runner": self.runner, "prefix_cache": self.caches.summary()}

    def close(self) -> None:
        """Nothing to end: the model is this process's memory, freed with the backend."""
