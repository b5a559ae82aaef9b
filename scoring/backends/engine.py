"""The engine: benchcurate's own forward pass (``scoring.forward``), batches packed by length, the
prefixes many rows share computed once (``scoring.prefix_cache``), every number the model's own
plain forward (checked by the probe that picks a runner and by the self-check).

Its own settings (``SETTINGS``): ``max_memory`` (where ``--device auto`` may place the model) and
``prefix_cache_mb`` (the memory for the keys and values of shared prefixes). Torch and the engine
are imported when a model loads, so listing the backends and their settings stays quick.
"""
from __future__ import annotations

from functools import partial

from curate.core.options import Option
from scoring import ENGINE_VERSION
from scoring.backends import Backend as Interface, Context

SETTINGS = [
    Option("max_memory", metavar="SPEC", backend="engine",
           help="With --device auto: where the model may go, e.g. 0=70GiB,1=70GiB,cpu=100GiB,disk "
                "(without it, GPUs only; cpu and disk only when named).",
           config="With device auto: where the model may go, as curate score --max-memory takes it "
                  "(e.g. '0=70GiB,1=70GiB,cpu=100GiB,disk'); absent: the visible GPUs only."),
    Option("prefix_cache_mb", int, 256, min=0, metavar="MB", backend="engine",
           help="Memory for the keys and values of prefixes many rows share (a few-shot header), each computed "
                "once (scoring/prefix_cache.py); a shared prefix larger than this is computed in full for every "
                "row, never dropped (0: no cache).",
           config="Memory (MB) for the keys and values of prefixes many rows share, each computed once; a larger "
                  "shared prefix is computed in full for every row (0: no cache)."),
]


class Backend(Interface):
    """The model loaded for ``scoring.forward``."""
    name = "engine"
    SETTINGS = SETTINGS
    token_stats = True

    def __init__(self, ref, options, context: Context = Context()):
        from scoring import prefix_cache
        from scoring.forward import runner_for
        from scoring.models import load, max_length

        super().__init__(ref, options, context)
        self.cache_mb, self.max_memory = self.settings.prefix_cache_mb, self.settings.max_memory
        context.say(f"loading the model ({self.dtype}, {self.device})")
        self.lm, self.tokenizer = load(ref, dtype=self.dtype, device=self.device, scoring_only=True,
                                       max_memory=self.max_memory)
        context.say("probing which runner reproduces the model's own forward")
        self.runner = runner_for(self.lm)  # an architecture the engine cannot reproduce is refused here
        self.window = max_length(self.lm, self.tokenizer)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.caches = prefix_cache.Caches(self.lm, self.cache_mb * 2**20)

    def identity(self) -> dict:
        from scoring.models import tokenizer_hash
        return {"model_hash": self.ref.weights_hash, "tokenizer_hash": tokenizer_hash(self.tokenizer),
                "dtype": self.dtype, "engine": ENGINE_VERSION}

    def info(self) -> dict:
        from scoring.forward import architecture
        from scoring.models import placement
        return {"architecture": architecture(self.lm), "runner": self.runner, "device_map": placement(self.lm),
                "max_memory": self.max_memory, "prefix_cache_mb": self.cache_mb}

    def plan(self, units, items) -> list:
        from scoring import prefix_cache
        return prefix_cache.plan(units, self.batch_tokens, model=self.lm, max_bytes=self.cache_mb * 2**20)

    def refuse(self, units, items) -> None:
        """What no batch of this model can score exactly, in one line, before anything is scored."""
        from scoring.forward import refuse_inexact, refuse_unscorable
        refuse_unscorable(self.lm, units, items, self.window)
        refuse_inexact(self.lm, units, items)

    def self_check(self, units, *, items: int, names, score=None) -> dict:
        from scoring import prefix_cache
        from scoring.self_check import self_check
        how = (partial(prefix_cache.score_shared_requests, max_bytes=self.cache_mb * 2**20) if score is None
               else lambda model, requests, **kw: score(requests))
        return self_check(self.lm, units, self.dtype, items=items, batch_tokens=self.batch_tokens, pad_id=self.pad_id,
                          score=how, names=names)

    def score(self, batch) -> list:
        from scoring import heap, prefix_cache
        from scoring.logits import input_device
        self.caches.keep_only(batch.prefixes())
        results = prefix_cache.score_with_caches(self.lm, batch.requests, batch.shared, self.caches, pad_id=self.pad_id,
                                                 max_tokens=self.batch_tokens)
        heap.release(input_device(self.lm))
        return results

    def score_requests(self, requests) -> list:
        """The requests in one forward pass, each token of the prefixes they share computed once
        (``scoring.shared_prefix``: the local annotator's questions share the instructions)."""
        from scoring import shared_prefix
        return shared_prefix.score_shared(self.lm, requests, pad_id=self.pad_id, max_tokens=self.batch_tokens)

    def summary(self) -> dict:
        return {"runner": self.runner, "prefix_cache": self.caches.summary()}

    def close(self) -> None:
        """The prefix cache's keys and values given back (the model goes with the backend)."""
        self.caches.keep_only(set())
