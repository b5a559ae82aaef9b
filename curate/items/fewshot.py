"""k-shot contexts as lm-evaluation-harness 0.4.13 builds them (issue 29).

lm-eval's ``ConfigurableTask.fewshot_context`` writes, for an evaluated document:

    description + (shot_context + target_delimiter + shot_answer + fewshot_delimiter) * k + context

where the shots come from the task's few-shot split through its sampler
(``lm_eval/api/samplers.py``):

- ``first_n`` (MMLU): the first k documents of the split, in order;
- ``default``: ``random.Random(seed).sample(pool, k)``, one generator per task seeded once
  (``fewshot_random_seed``, 1234) and drawn from document after document in evaluation order, so
  an item's shots depend on every item before it. When lm-eval passes the evaluated document to
  the sampler (its few-shot split equals its ``test_split``: a pool that *is* the evaluated split,
  or, by lm-eval's comparison of ``None == None``, a task with neither set, such as HellaSwag) it
  draws k + 1, drops the document itself and keeps the first k.

Here a shot is an item: its context is the item's own full-mode context in the formulation
scored (without the description), its answer the gold option's continuation, so one rule
serves cloze, letters, rotations and partial (Winogrande) items. ``settings_for`` names each
built-in's settings; the generic adapter's come from its few-shot file and seed.
tests/test_fewshot_contexts.py compares every context with lm-eval's own requests.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from functools import lru_cache

from curate.items import formulations as forms
from curate.core.errors import CurateError
from curate.items.canonical import canonical_json

#: lm-eval's ``fewshot_random_seed`` default (``lm_eval.defaults.DEFAULT_OTHER_SEED``).
LM_EVAL_SEED = 1234


@dataclass(frozen=True)
class Settings:
    """How one benchmark's k-shot contexts are built. ``split``: the few-shot split lm-eval's
    task reads; ``passes_eval_doc``: whether lm-eval hands the evaluated document to the sampler
    (see the module text); ``description``: the item-context prefix that stays first (MMLU's
    subject line), a function (item, formulation) -> str; ``group``: items sampled apart
    (MMLU: one lm-eval task per subject)."""
    split: str = "train"
    sampler: str = "default"
    passes_eval_doc: bool = False
    fewshot_delimiter: str = "\n\n"
    seed: int = LM_EVAL_SEED
    description: object = None
    group: object = None

    def from_evaluated_split(self) -> "Settings":
        """These settings with the evaluated split as the pool: the item itself is left out."""
        return replace(self, passes_eval_doc=True)


def doc_key(item: dict) -> str:
    """What makes two documents equal for lm-eval's ``x != eval_doc`` (rows compared as dicts):
    the item's content and its benchmark ids."""
    return canonical_json([item["content_hash"], item.get("native_ids") or {}, item.get("source")])


def description_of(item: dict, formulation: str, settings: Settings) -> str:
    return settings.description(item, forms.parse(formulation)[0]) if settings.description else ""


def _shot_formulation(item: dict, formulation: str) -> str:
    """The formulation a shot is shown in: the scored one (a rotation the shot has too few
    options for shows its unrotated list)."""
    base, rotation = forms.parse(formulation)
    return formulation if rotation < len(item["options"]) else base


def shot_text(item: dict, formulation: str, settings: Settings) -> str:
    """One worked example: its full-mode context (without the description), the target
    delimiter, the gold answer, the few-shot delimiter."""
    s = forms.scored(item, "full", _shot_formulation(item, formulation))
    gold = item["gold"]
    context = _strip(s.contexts[gold], description_of(item, formulation, settings), item)
    return context + s.delimiter + s.continuations[gold] + settings.fewshot_delimiter


class _Same:
    """A shot document as a cache key by identity (dicts are not hashable): the cache holds the
    document, so its id names no other object while its text is cached."""
    __slots__ = ("doc",)

    def __init__(self, doc: dict):
        self.doc = doc

    def __hash__(self) -> int:
        return id(self.doc)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Same) and other.doc is self.doc


@lru_cache(maxsize=2**14)
def _cached_shot_text(shot: _Same, formulation: str, settings: Settings) -> str:
    """``shot_text`` once per (shot, formulation, settings): a run shows one shot to many items
    (MMLU's first_n: the same k to a whole subject), in every mode."""
    return shot_text(shot.doc, formulation, settings)


def _strip(context: str, description: str, item: dict) -> str:
    if not context.startswith(description):
        raise CurateError(f"{item['item_id']}: its context does not start with the benchmark's description "
                          f"{description[:40]!r}")
    return context[len(description):]


def sample_shots(items: list[dict], pool: list[dict], k: int, settings: Settings) -> list[list[dict]]:
    """The k shots of each of ``items`` (in evaluation order) drawn from ``pool`` as lm-eval's
    sampler draws them; items of one ``settings.group`` share a generator, as one lm-eval task."""
    if k < 1:
        return [[] for _ in items]
    group = settings.group or (lambda item: None)
    pools: dict = {}
    for doc in pool:
        pools.setdefault(group(doc), []).append(doc)
    samplers: dict = {}
    out = []
    for item in items:
        key = group(item)
        if key not in samplers:
            samplers[key] = _Sampler(pools.get(key, []), settings, key)
        out.append(samplers[key].sample(item, k))
    return out


class _Sampler:
    """lm-eval's ContextSampler / FirstNSampler over one task's few-shot documents."""

    def __init__(self, docs: list[dict], settings: Settings, group):
        self.docs, self.settings, self.group = docs, settings, group
        self.keys = [doc_key(d) for d in docs]
        self.rnd = random.Random(settings.seed)

    def sample(self, item: dict, k: int) -> list[dict]:
        mine = doc_key(item) if self.settings.passes_eval_doc else None
        if self.settings.sampler == "first_n":
            pool = [d for d, key in zip(self.docs, self.keys) if key != mine]
            self._enough(len(pool), k, item)
            return pool[:k]
        indices = range(len(self.docs))
        if mine is None:
            self._enough(len(self.docs), k, item)
            return [self.docs[i] for i in self.rnd.sample(indices, k)]
        self._enough(len(self.docs), k + 1, item)
        drawn = [i for i in self.rnd.sample(indices, k + 1) if self.keys[i] != mine][:k]
        if len(drawn) < k:  # the pool holds copies of the item: lm-eval draws again without them
            rest = [i for i in indices if self.keys[i] != mine]
            self._enough(len(rest), k, item)
            drawn = self.rnd.sample(rest, k)
        return [self.docs[i] for i in drawn]

    def _enough(self, have: int, need: int, item: dict) -> None:
        if have < need:
            where = f" (group {self.group})" if self.group is not None else ""
            raise CurateError(f"{item['item_id']}: {need} few-shot examples needed but the few-shot pool{where} "
                              f"has {have}; ask for fewer shots or give a larger few-shot split")


def with_shots(scored: forms.Scored, item: dict, shots: list[dict], formulation: str,
               settings: Settings) -> forms.Scored:
    """``scored`` (the item's requests in one mode and formulation) with ``shots`` placed after
    the description and before the item's own context, as lm-eval's k-shot context."""
    if not shots:
        return scored
    description = description_of(item, formulation, settings)
    header = description + "".join(_cached_shot_text(_Same(s), formulation, settings) for s in shots)
    contexts = [header + (c[len(description):] if c.startswith(description) else c) for c in scored.contexts]
    return forms.Scored(contexts, scored.continuations, scored.delimiter)


def fewshot_scored(items: list[dict], pool: list[dict], k: int, mode: str, formulation: str,
                   settings: Settings) -> list[forms.Scored]:
    """Every item's k-shot requests in ``mode`` and ``formulation``, in order."""
    shots = sample_shots(items, pool, k, settings)
    return [with_shots(forms.scored(it, mode, formulation), it, s, formulation, settings)
            for it, s in zip(items, shots)]
