"""Scoring backends, one file each: what turns a run's requests into per-option log-likelihoods.

``curate score --backend NAME`` (the audit config's ``scoring.backend``) picks one; adding a
backend is adding its file here (``curate.core.registry`` finds it). The run (``scoring.run``)
builds the requests itself, the same token ids for every backend (``scoring.encode``), stores
what the backend returns, and keys its cache by the backend's identity. A backend's module
defines ``Backend``, constructed as ``Backend(ref, options)`` (``ref``: the model,
``scoring.models.resolve``; ``options``: the run's options object, ``scoring.options.SCORE``,
whose knobs marked ``backend=NAME`` are this backend's own ``-o`` settings), loading the model,
with:

- ``tokenizer`` and ``window`` (the longest sequence it scores; lm-eval's max_length);
- ``identity() -> dict``: what its numbers depend on besides the items (``model_hash``,
  ``tokenizer_hash``, ``dtype``, ``engine``: its name and version); stored scores are reused
  only under the same identity;
- ``info() -> dict``: what the run record says of it (runner, architecture, placement, ...);
- ``plan(units, items) -> batches``: the run's units in batches (each with ``units`` and
  ``requests``), refusing in one line what it cannot score exactly (``scoring.run.refuse_*``);
- ``self_check(units, *, items, names) -> dict``: the first ``items`` units scored again by the
  model's own plain forward (``scoring.self_check``), the run stopping on a difference;
- ``score(batch) -> list[scoring.encode.Result]``: one result per request of the batch;
- ``summary() -> dict``: what the run's summary adds (e.g. the prefix cache's counts).
"""
from __future__ import annotations

from types import ModuleType

from curate.core.registry import Registry

BACKENDS = Registry(__name__, what="scoring backend", required=("Backend",))


def get(name: str) -> ModuleType:
    return BACKENDS.get(name)


def names() -> list[str]:
    return BACKENDS.names()


def refresh() -> None:
    """Forget the backends found so far (after this package's ``__path__`` changed: tests)."""
    BACKENDS.refresh()
