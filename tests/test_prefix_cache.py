"""Shared prefixes computed once and kept as keys and values (``scoring.prefix_cache``).

Rows that share a long prefix (a few-shot header) are scored against the prefix's cached keys
and values and must give the numbers of the model's own one-sequence forward
(``scoring.reference``, within its tolerances): on SmolLM2 and on a tiny random model of every
architecture tests/test_scoring_architectures.py covers (sliding windows of 16 tokens, shorter
than the shared prefixes here, included). A prefix whose keys and values do not fit the bound is
recomputed, never dropped.
"""
from __future__ import annotations

import gzip
import json
import random
import warnings

import pytest
import torch

from test_scoring_architectures import ARCHITECTURES, hellaswag, one_thread, tiny, tokenizer  # noqa: F401


def fewshot_units(tokenizer, items, shots: int = 3, n: int = 3, options: int = 2):
    """Units of ``n`` items (their first ``options`` options), each after the same header of
    ``shots`` solved items, as a few-shot prompt has."""
    from scoring.encode import build_unit
    header = "".join(f"{it['prompts']['full']} {it['options'][it['gold']]}\n\n" for it in items[:shots])
    return [build_unit(tokenizer, i, "full", header + it["prompts"]["full"], it["options"][:options],
                       max_length=2048) for i, it in enumerate(items[shots:shots + n])]


def check_exact(model, requests, results):
    from scoring import reference
    from scoring.forward import model_dtype
    expected = reference.score(model, requests)
    assert reference.worst_difference(requests, results, expected, model_dtype(model)) is None
    return reference.largest_difference(results, expected)


def test_groups_share_the_longest_common_prefix_that_saves_most():
    from scoring.prefix_cache import shared_groups, shared_lengths
    from scoring.encode import Request
    rng = random.Random(0)
    a, b = [rng.randrange(100) for _ in range(80)], [rng.randrange(100) for _ in range(80)]
    prefixes = [a + [1, 2], b + [5], a + [1, 3, 4], b + [6, 7], a + [9], [1] * 20, b]
    groups = shared_groups(prefixes)
    # a's three rows share a and its next token where two do, but a alone saves more; b's whole
    # prefix is one row's, whose last token must be fed, so b's rows share b minus its last token.
    assert groups == [(80, [0, 2, 4]), (79, [1, 3, 6])]
    assert shared_groups([a + [1], a[:40] + [2]]) == []  # 40 tokens: under MIN_SHARED
    requests = [Request(p, [[1]], [0]) for p in prefixes]
    assert shared_lengths(requests) == [80, 79, 80, 79, 80, 0, 79]


@pytest.fixture(scope="module")
def smollm2():
    from scoring.models import load, resolve
    return load(resolve("smollm2-135m"))


def test_smollm2_rows_after_a_cached_header_equal_its_own_forward(hellaswag, smollm2):
    from scoring.prefix_cache import score_shared_requests, shared_lengths
    model, tok = smollm2
    units = fewshot_units(tok, hellaswag)
    requests = [r for u in units for r in u.requests]
    shared = shared_lengths(requests)
    assert min(shared) >= 64  # every row after the cached header
    assert check_exact(model, requests, score_shared_requests(model, requests, pad_id=0)) < 1e-3


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_cached_prefix_on_every_architecture(name, tokenizer, hellaswag, monkeypatch):
    """Through the llama and packed runners the header is computed once and cached; the padded
    and sequences runners compute every row in full. Either way: the model's own numbers."""
    from scoring import prefix_cache
    from scoring.forward import runner_for
    model = tiny(name, tokenizer)
    units = fewshot_units(tokenizer, hellaswag)
    requests = [r for u in units for r in u.requests]
    assert min(prefix_cache.shared_lengths(requests)) >= 64
    computed, real = [], prefix_cache.compute
    monkeypatch.setattr(prefix_cache, "compute", lambda *a: computed.append(len(a[2])) or real(*a))
    check_exact(model, requests, prefix_cache.score_shared_requests(model, requests, pad_id=tokenizer.pad_token_id))
    cached = [n for n in computed if n > 2]  # bytes_per_token measures on a two-token prefix
    assert len(cached) == (runner_for(model) in prefix_cache.CACHING_RUNNERS), (name, runner_for(model), computed)


def test_a_prefix_over_the_bound_is_recomputed(hellaswag, smollm2, monkeypatch):
    """A shared prefix whose keys and values need more than the bound is not cached: its rows are
    computed in full (the engine's numbers), and a run's plan caches nothing."""
    from scoring import prefix_cache
    from scoring.forward import score_requests
    model, tok = smollm2
    units = fewshot_units(tok, hellaswag)
    requests = [r for u in units for r in u.requests]
    shared = prefix_cache.shared_lengths(requests)
    bound = prefix_cache.bytes_per_token(model) * (max(shared) - 1)
    computed = []
    real = prefix_cache.compute
    monkeypatch.setattr(prefix_cache, "compute", lambda *a: computed.append(a[2]) or real(*a))
    small = prefix_cache.Caches(model, max_bytes=bound)
    results = prefix_cache.score_with_caches(model, requests, shared, small, pad_id=0)
    assert computed == [] and small.held == {}
    for ours, full in zip(results, score_requests(model, requests, pad_id=0)):
        assert ours.cont_sums == pytest.approx(full.cont_sums, abs=1e-5) and ours.cont_greedy == full.cont_greedy
    assert all(s == 0 for b in prefix_cache.plan(units, 4096, model=model, max_bytes=bound) for s in b.shared)
    assert any(s > 0 for b in prefix_cache.plan(units, 4096, model=model, max_bytes=bound * 2) for s in b.shared)


def test_long_rows_in_pieces_raise_no_deprecation_warning(tokenizer):
    """Rows longer than the batch budget run in pieces through the model's own cache, passed as
    transformers 5 names it (``cache=``): no FutureWarning from our calls."""
    from scoring.encode import Request
    from scoring.forward import score_requests
    model = tiny("llama", tokenizer)
    request = Request(list(range(100, 140)), [[5, 6, 7], [8]], [0, 1], prefix_lp=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results = score_requests(model, [request], pad_id=0, max_tokens=16)
    check_exact(model, [request], results)


@pytest.mark.slow  # SmolLM2 scores the items twice (about 100 s on the busy 2-core machine)
def test_a_fewshot_run_caches_each_header_once_with_the_numbers_of_no_cache(tmp_path):
    """`curate score --fewshot 2` on MMLU items of two subjects: each subject's header is computed
    once, the self-check scores the first units through the cache, and every stored number equals
    the run without a cache (``--prefix-cache-mb 0``)."""
    from conftest import SHARED
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from scoring.run import Score
    from scoring.store import open_scores, read_scores
    rows = [r for r in fewshot_rows(SHARED / "benchmarks" / "mmlu" / "test.jsonl.gz")
            if r["subject"] in ("anatomy", "astronomy")]
    data = tmp_path / "mmlu.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows[:2] + rows[-2:]))
    ws = Ingest(tmp_path / "ws", IngestOptions(data=str(data)), get_adapter("mmlu")).run()
    pool = str(SHARED / "benchmarks" / "mmlu" / "dev.jsonl.gz")
    runs = {mb: Score.with_options(ws, model="smollm2-135m", modes=["full"], label=f"m{mb}", fewshot="2",
                                   fewshot_pool=pool, seq_mean="all" if mb else "none", prefix_cache_mb=mb,
                                   quiet=True).run() for mb in (256, 0)}
    assert runs[256]["prefix_cache"]["prefixes"] == 2 and runs[0]["prefix_cache"]["prefixes"] == 0
    assert runs[256]["self_check"]["items"] == 2 and runs[256]["self_check"]["max_abs_diff"] < 1e-3
    headers = runs[256]["prefix_cache"]["prefix_tokens"]  # each fed once instead of twice
    assert runs[256]["prefix_cache"]["fed_tokens"] <= runs[0]["prefix_cache"]["fed_tokens"] - headers + 10
    with open_scores(ws) as store:
        scores = read_scores(store, fewshots=[2]).sort_values(["item_id", "option_index"])
    cached, full = (scores[scores["model"] == f"m{mb}"] for mb in (256, 0))
    assert len(cached) == len(full) == 16
    assert abs(cached["logprob_sum"].to_numpy() - full["logprob_sum"].to_numpy()).max() < 1e-4
    assert cached["is_greedy"].tolist() == full["is_greedy"].tolist()
    assert cached["seq_mean"].notna().all()


def fewshot_rows(path):
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]
