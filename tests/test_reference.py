"""The plain reference (``scoring.reference``) reads continuations whose fed tokens are equal off
one forward, as lm-eval does; its numbers must be those of one forward per continuation, which
this test computes by hand with the model's own logits and a log-softmax."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch

MMLU = Path(__file__).resolve().parents[2] / "shared" / "data" / "benchmarks" / "mmlu" / "test.jsonl.gz"


@pytest.fixture(scope="module")
def smollm2():
    from scoring.models import load, resolve
    return load(resolve("smollm2-135m"))


def by_hand(model, req):
    """(prefix sum, continuation sums, greedy flags): one forward of prefix + continuation each."""
    sums, greedy, prefix_sum = [], [], 0.0
    for cont in req.conts:
        with torch.inference_mode():
            lp = torch.log_softmax(model(input_ids=torch.tensor([req.prefix + cont])).logits[0].float(), -1)
        rows = lp[len(req.prefix) - 1:len(req.prefix) - 1 + len(cont)]
        sums.append(float(rows[torch.arange(len(cont)), cont].sum()))
        greedy.append(bool((rows.argmax(-1) == torch.tensor(cont)).all()))
        prefix_sum = float(lp[torch.arange(len(req.prefix) - 1), req.prefix[1:]].sum()) if req.prefix_lp else 0.0
    return prefix_sum, sums, greedy


def test_grouped_forwards_equal_one_forward_per_continuation(smollm2, monkeypatch):
    from curate.items.adapters import get_adapter
    from scoring import reference
    from scoring.run import unit_spec
    from scoring.encode import build_unit
    model, tokenizer = smollm2
    with gzip.open(MMLU, "rt", encoding="utf-8") as fh:
        rows = [json.loads(next(fh)) for _ in range(2)]
    items = [get_adapter("mmlu").to_item(r, i, split="test") for i, r in enumerate(rows)]
    units = []
    for formulation in ("letters", "cloze"):  # one-token letters share one forward; cloze options do not
        spec = unit_spec(0, items[0], "full", formulation)
        units.append(build_unit(tokenizer, 0, "full", spec.context, spec.options, max_length=2048,
                                delimiter=spec.delimiter, formulation=formulation))
    requests = [r for u in units for r in u.requests]
    assert any(r.prefix_lp for r in requests)  # the study's seq_mean: the prefix's own log-probability too
    calls = []
    forward = type(model).forward
    monkeypatch.setattr(type(model), "forward", lambda self, *a, **k: calls.append(1) or forward(self, *a, **k))
    got = reference.score(model, requests)
    letters = units[0].requests
    assert len(calls) == sum(len({tuple(r.prefix + c[:-1]) for c in r.conts}) for r in requests)
    assert sum(len({tuple(r.prefix + c[:-1]) for c in r.conts}) for r in letters) == len(letters)
    monkeypatch.undo()
    for req, res in zip(requests, got):
        prefix_sum, sums, greedy = by_hand(model, req)
        assert res.prefix_sum == pytest.approx(prefix_sum, abs=1e-4)
        assert res.cont_sums == pytest.approx(sums, abs=1e-4) and res.cont_greedy == greedy
