"""The scoring engine on a CUDA device: the CPU tests' checks, with the model on the GPU.

Skipped where torch sees no CUDA device (CI and the development machine have none); run on a lent
GPU as docs/gpu.md says. The tiny seeded models of tests/test_scoring_architectures.py, every
architecture there:

- float32 on CUDA: the architecture probe picks the runner it picks on the CPU, and every
  option's numbers equal the same model's plain one-sequence forward on the CPU (lm-eval's pair
  and seq_mean within 1e-4, is_greedy);
- the prefix cache on CUDA: rows after a shared header equal the model's own plain forward on the
  GPU (``scoring.reference``), the header computed once where the runner caches;
- bfloat16 and float16 on CUDA: the engine, with and without the prefix cache, within the
  reference's tolerances for the dtype (the ones the self-check applies);
- text scores on CUDA equal numpy's on a CPU forward (1e-4);
- ``curate score --device cuda`` end to end on a saved model folder: few-shot with the cache,
  text scores, the self-check, the numbers of the CPU run.
"""
from __future__ import annotations

import json

import pytest
import torch

from conftest import SHARED, run_cli
from test_prefix_cache import check_exact, fewshot_units
from test_scoring_architectures import (ARCHITECTURES, cases, engine_rows, hellaswag, items, one_thread,  # noqa: F401
                                        reference, tiny, tokenizer)
from test_scoring_text import numpy_metrics, text_units

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
HALF = ("bfloat16", "float16")


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_cuda_picks_the_cpus_runner_and_equals_the_cpu_forward(name, tokenizer, items, hellaswag):
    from scoring.forward import runner_for
    model = tiny(name, tokenizer)
    all_cases = cases(model, tokenizer, items, hellaswag[1:6])
    expected = [reference(model, tokenizer, context, option) for _, context, options in all_cases
                for option in options]
    on_cpu = runner_for(model)
    gpu = tiny(name, tokenizer).to("cuda")  # a fresh copy: the probe decides once per model object
    assert runner_for(gpu) == on_cpu, name
    rows = engine_rows(gpu, tokenizer, all_cases)
    assert len(rows) == len(expected)
    for row, ref in zip(rows, expected):
        where = (name, on_cpu, row["item_id"], row["option_index"])
        assert row["logprob_sum"] == pytest.approx(ref["logprob_sum"], abs=1e-4), where
        if ref["seq_mean"] == ref["seq_mean"]:
            assert row["seq_mean"] == pytest.approx(ref["seq_mean"], abs=1e-4), where
        assert row["is_greedy"] == ref["is_greedy"], where


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_cached_prefix_on_cuda(name, tokenizer, hellaswag, monkeypatch):
    from scoring import prefix_cache
    from scoring.forward import runner_for
    model = tiny(name, tokenizer).to("cuda")
    requests = [r for u in fewshot_units(tokenizer, hellaswag) for r in u.requests]
    computed, real = [], prefix_cache.compute
    monkeypatch.setattr(prefix_cache, "compute", lambda *a: computed.append(len(a[2])) or real(*a))
    results = prefix_cache.score_shared_requests(model, requests, pad_id=tokenizer.pad_token_id)
    check_exact(model, requests, results)
    assert all(r.cont_sums for r in results)
    assert len([n for n in computed if n > 2]) == (runner_for(model) in prefix_cache.CACHING_RUNNERS), name


STATE_SPACE_BF16 = pytest.mark.xfail(strict=False, reason=(
    "seen on an H200: Mamba and Jamba in bfloat16 through the sequences runner differ from their "
    "one-sequence forward by up to 2.6 nats (float16 and float32: 1e-4); the self-check stops such a run"))


def half_cases():
    for name in ARCHITECTURES:
        for dtype in HALF:
            marks = [STATE_SPACE_BF16] if (name, dtype) in (("mamba", "bfloat16"), ("jamba", "bfloat16")) else []
            yield pytest.param(name, dtype, marks=marks, id=f"{name}-{dtype}")


@pytest.mark.parametrize(("name", "dtype"), list(half_cases()))
def test_half_precision_on_cuda_within_the_self_checks_tolerance(name, dtype, tokenizer, hellaswag):
    from scoring import prefix_cache, reference
    from scoring.forward import score_requests
    model = tiny(name, tokenizer).to("cuda", getattr(torch, dtype))
    requests = [r for u in fewshot_units(tokenizer, hellaswag) for r in u.requests]
    expected = reference.score(model, requests)
    for how, results in (("engine", score_requests(model, requests, pad_id=tokenizer.pad_token_id)),
                         ("prefix cache", prefix_cache.score_shared_requests(model, requests,
                                                                             pad_id=tokenizer.pad_token_id))):
        worst = reference.worst_difference(requests, results, expected, dtype)
        print(name, dtype, how, "largest difference", reference.largest_difference(results, expected))
        assert worst is None, (name, dtype, how, worst)


def test_text_scores_on_cuda_equal_numpy_on_a_cpu_forward(tokenizer, hellaswag):
    from scoring import forward
    from scoring.text import item_text, metrics
    model = tiny("llama", tokenizer)
    units = text_units(tokenizer, hellaswag[:5])
    expected = []
    for unit, it in zip(units, hellaswag):
        ids = unit.requests[0].prefix + unit.requests[0].conts[0]
        with torch.inference_mode():
            lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1).double().numpy()[:-1]
        expected.append(numpy_metrics(lp, ids, item_text(it)))
    model.to("cuda")
    for runner in ("llama", "packed", "padded", "sequences"):  # each serves a Llama
        results = forward.score_requests(model, [u.requests[0] for u in units], pad_id=tokenizer.pad_token_id,
                                        runner=runner)
        for res, e, it in zip(results, expected, hellaswag):
            got = metrics(item_text(it), *res.stats)
            for key, value in e.items():
                assert abs(got[key] - value) < 1e-4, (runner, key, got[key], value)


def test_curate_score_on_cuda_gives_the_cpu_runs_numbers(tmp_path, tokenizer):
    """A tiny Llama saved as a model folder, scored by the CLI on MMLU items of two subjects,
    0- and 2-shot with the prefix cache and text scores, on CUDA and on the CPU: the self-check
    passes on CUDA and every stored number equals the CPU run's."""
    import gzip

    from scoring.store import open_scores, read_scores
    from scoring.text_store import text_scores
    folder = tmp_path / "tiny-llama"
    tiny("llama", tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    with gzip.open(SHARED / "benchmarks" / "mmlu" / "test.jsonl.gz", "rt") as fh:
        rows = [r for r in map(json.loads, fh) if r["subject"] in ("anatomy", "astronomy")]
    data = tmp_path / "mmlu.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows[:3] + rows[-3:]))
    ws = tmp_path / "ws"
    run_cli("init", ws, "--benchmark", "mmlu", "--data", data, "--split", "test")
    pool = SHARED / "benchmarks" / "mmlu" / "dev.jsonl.gz"
    for device in ("cuda", "cpu"):
        out = run_cli("score", ws, "--model", folder, "--label", device, "--device", device, "--modes", "full",
                      "--formulations", "cloze,letters", "--fewshot", "0,2", "--fewshot-pool", pool,
                      "--text-scores", "--self-check", "4", "--quiet").stdout
        assert "self-check: 4 units" in out, out
    with open_scores(ws) as store:
        scores = read_scores(store).sort_values(["formulation", "fewshot", "item_id", "option_index"])
        texts = text_scores(store).sort_values("item_id")
    gpu, cpu = (scores[scores["model"] == d] for d in ("cuda", "cpu"))
    assert len(gpu) == len(cpu) == 6 * 4 * 2 * 2  # items, options, shot counts, formulations
    assert abs(gpu["logprob_sum"].to_numpy() - cpu["logprob_sum"].to_numpy()).max() < 1e-4
    assert gpu["is_greedy"].tolist() == cpu["is_greedy"].tolist()
    gpu, cpu = (texts[texts["model"] == d].drop(columns=["item_id", "model"]).to_numpy() for d in ("cuda", "cpu"))
    assert gpu.shape == cpu.shape == (6, 6) and abs(gpu - cpu).max() < 1e-4
