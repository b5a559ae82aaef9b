"""Text scores: how familiar a model finds an item's own text, the reference-free membership
signals of the contamination literature, read off the same forward pass as its full-mode scores.

The text is the item's full-mode gold row exactly as the engine feeds it to score the gold option
(``scoring.encode.encode_pair``, as lm-eval encodes it): the full-mode context's tokens (with a BOS
only where the tokenizer or an empty context adds one), then the gold continuation's tokens
(delimiter + gold option; Winogrande: the gold option's own context). Every token after the first
is predicted, as in Shi et al.'s reference code (log-softmax of ``logits[:-1]`` read at
``input_ids[1:]``). A row longer than the model's window is cut from the left as the option scores
cut it (flagged ``truncated``). `curate score --text-scores` reads them off that row while it
scores the options (``Request.stats``); `curate text-scores` scores the same rows on their own, so
both store the same numbers. Per item and model, from the log-probability ``log p(x_t)`` of each
predicted token:

- ``loss``: the mean negative log-likelihood, ``-mean_t log p(x_t)``;
- ``zlib``: ``loss`` divided by the length in bytes of the zlib-compressed UTF-8 text (context,
  delimiter and gold option; Carlini et al. 2021, as Shi et al. 2024 compute it);
- ``min_k_K``: the mean of the lowest K% of the ``log p(x_t)`` (Min-K% Prob, Shi et al. 2024);
- ``min_kpp_K``: the mean of the lowest K% of ``(log p(x_t) - mu_t) / sigma_t``, where ``mu_t``
  and ``sigma_t`` are the mean and standard deviation of ``log p(z)`` for ``z`` drawn from the
  model's next-token distribution at that position (Min-K%++, Zhang et al. 2025).

The lowest K% are ``max(1, int(n * K / 100))`` tokens (the papers' ``int``, but at least one, so
a short text still gets a number). Higher Min-K% and Min-K%++ and lower loss and zlib point to
text the model has seen; they are suspicion, not proof.

The per-token numbers come from a scoring backend that gives them (``Backend.token_stats``): the
engine (``scoring.forward.predict``: the same runners, the model's own head and the float32
log-softmax as the option scores, with the moments of the rows that asked for them), or vLLM's
worker (the whole vocabulary's log-probabilities at every position, their moments taken in the
worker).
"""
from __future__ import annotations

import zlib

import numpy as np

from curate.items import formulations as forms
from curate.core.errors import CurateError
from scoring import ENGINE_VERSION
from scoring.encode import Spec, Unit

K = (10, 20)  # the percentages stored (min_k_10, min_k_20, min_kpp_10, min_kpp_20)
#: The definition of the text. Stored with each run that computes text scores; rows of another
#: version are recomputed, never mixed. 1: BOS, then the text re-tokenized alone; 2: the
#: full-mode gold row as the engine feeds it.
TEXT_VERSION = 2
RUN_TEXT = "the full-mode gold row as scored: context tokens, then delimiter + gold option"


def item_text(item: dict) -> str:
    """The item as the benchmark writes it: the full-mode context, delimiter and gold option
    (Winogrande: the sentence with the gold option filled in); its zlib size is stored."""
    s = forms.scored(item, "full", "cloze")
    gold = item["gold"]
    return s.contexts[gold] + s.delimiter + s.continuations[gold]


def text_spec(index: int, item: dict) -> Spec:
    """The unit of `curate text-scores`: the full-mode cloze unit with the gold option only (its
    tokens are the full-mode unit's gold row: each option is encoded after its own context)."""
    s = forms.scored(item, "full", "cloze")
    gold = item["gold"]
    return Spec(index, "full", s.contexts[gold], [s.continuations[gold]], s.delimiter, "cloze")


def ask_stats(unit: Unit, gold: int) -> None:
    """Ask for the statistics of ``unit``'s row of option ``gold`` (its lm-eval row)."""
    for request in unit.requests:
        if request.purpose == "ll" and gold in request.options:
            request.stats = request.options.index(gold)
            return


def text_row(item: dict, flags: set, results, *, label: str, run_id: str) -> dict:
    """The stored row of one item's text scores, from the results of its unit's requests (one of
    them carries the gold row's statistics) and the gold option's ``flags``."""
    stats = next(res.stats for res in results if res.stats is not None)
    flags = {"truncated"} & flags
    if not len(stats[0]):
        flags.add("empty")
    return metrics(item_text(item), *stats) | {"model": label, "item_id": item["item_id"],
                                                "content_hash": item["content_hash"],
                                                "flags": ",".join(sorted(flags)) or None, "run_id": run_id}


def pending(ws, label: str, key: tuple, items: list[dict], *, replace: bool,
            engine=ENGINE_VERSION) -> tuple[set[str], int]:
    """(item ids whose text scores are still to compute, stored rows of another source to delete).
    A stored row is reused when it has this (model hash, tokenizer hash, dtype), the backend's
    ``engine`` (its name and version: the engine's ``ENGINE_VERSION``, ``vllm-VERSION-1``), the
    text version and the item's content hash. A label holding another model's, tokenizer's or
    dtype's text scores is refused unless ``replace`` (then none is reused)."""
    from scoring.text_store import stored_keys

    stored = stored_keys(ws, label)
    other = [i for i, k in stored.items() if k[1:4] != key]
    if other and not replace:
        raise CurateError(f"label {label!r} already holds text scores of another model, tokenizer or dtype "
                          f"({len(other)} items, e.g. {other[0]}); use another --label to keep both, or "
                          f"--replace to delete them first")
    wanted = (*key, engine, TEXT_VERSION)
    done = set() if other else {i for i, k in stored.items() if k[1:] == wanted}
    return {it["item_id"] for it in items
            if not (it["item_id"] in done and stored[it["item_id"]][0] == it["content_hash"])}, len(other)


def lowest_mean(values: np.ndarray, k: int) -> float:
    """Mean of the lowest ``k``% of ``values`` (at least one value)."""
    n = max(1, int(len(values) * k / 100))
    return float(np.mean(np.sort(values)[:n]))


def metrics(text: str, logprob: np.ndarray, mu: np.ndarray, sigma: np.ndarray) -> dict:
    """The stored signals of one text from its per-token log-probabilities and moments (module
    docstring); None for each when the text has no predicted token."""
    zlib_bytes = len(zlib.compress(text.encode("utf-8")))
    out = {"n_tokens": len(logprob), "zlib_bytes": zlib_bytes}
    if not len(logprob):
        return out | {m: None for m in ("loss", "zlib", *(f"min_k_{k}" for k in K), *(f"min_kpp_{k}" for k in K))}
    loss = float(-np.mean(logprob))
    standard = (logprob - mu) / np.maximum(sigma, np.finfo(np.float32).tiny)
    out |= {"loss": loss, "zlib": loss / zlib_bytes}
    out |= {f"min_k_{k}": lowest_mean(logprob, k) for k in K}
    out |= {f"min_kpp_{k}": lowest_mean(standard, k) for k in K}
    return out
