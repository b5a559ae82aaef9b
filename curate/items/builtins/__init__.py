"""The built-in benchmarks, one file each: adding a benchmark is adding its file here.

A benchmark's module, named for the benchmark (``mmlu.py`` is ``--benchmark mmlu``), holds all
that is known of it (``curate.core.registry`` finds it):

- ``SPEC``: where it comes from (Hub id, configuration, usual split), the formulation lm-eval
  scores it in, its license, its lm-eval task name; optionally its card's pretty name and
  citation (``Spec``).
- ``to_item(row, row_index, split, name) -> item``: one source row (the Hub dataset's own
  columns) as the request lm-evaluation-harness 0.4.13's task builds, zero-shot (problems raised
  as ``curate.items.adapters.fields.FieldError`` naming the field); optionally
  ``native_key(item)`` (the benchmark's own identity; default: its native ids).
- ``FEWSHOT``: lm-eval's few-shot settings for the task (``curate.items.fewshot.Settings``).
- ``LM_EVAL``: lm-eval's task config for it (the keys of ``tasks/<benchmark>/*.yaml`` that shape a
  request, includes resolved), which a release's lm-eval task carries (``curate.release.lm_eval_task``).

Modules starting with ``_`` are helpers the benchmarks share. tests/test_ingest_builtin.py
compares every benchmark's items with lm-eval's own task code.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from curate.core.registry import Registry
from curate.items.fewshot import Settings


@dataclass(frozen=True)
class Spec:
    """Where a built-in benchmark comes from and how it is scored by default."""
    hub: str
    config: str | None
    split: str
    formulation: str  # lm-eval's: "letters" for MMLU and CommonsenseQA, else "cloze"
    license: str
    lm_eval_task: str
    pretty_name: str | None = None   # the release card's name of it (default: its own)
    citation: str | None = None      # carried over into release cards
    study: str | None = None         # a study of its validity a card cites too


BENCHMARKS = Registry(__name__, what="built-in benchmark", required=("SPEC", "to_item", "FEWSHOT", "LM_EVAL"))


@dataclass(frozen=True)
class Builtin:
    """The adapter of one built-in benchmark: its module's row function and settings."""
    name: str

    def __post_init__(self):
        if self.name not in BENCHMARKS.modules:
            raise ValueError(f"unknown built-in benchmark {self.name!r}; known: {', '.join(BENCHMARKS.names())}")

    @property
    def module(self) -> ModuleType:
        return BENCHMARKS.modules[self.name]

    @property
    def spec(self) -> Spec:
        return self.module.SPEC

    @property
    def formulation(self) -> str:
        return self.spec.formulation

    @property
    def fewshot(self) -> Settings:
        return self.module.FEWSHOT

    def to_item(self, row: dict, row_index: int, split: str) -> dict:
        return self.module.to_item(row, row_index, split, self.name)

    def native_key(self, item: dict):
        own = getattr(self.module, "native_key", None)
        return own(item) if own else tuple(item["native_ids"].values()) or None
