"""Our scores of the eleven built-in benchmarks against lm-evaluation-harness 0.4.13's own (hf
backend, float32), in each adapter's default formulation: the fixture holds lm-eval's numbers
for the first 50 items of each, written by benchmarks/parity_builtin.py --write-fixture."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.lmeval_reference import SHARED_DATA, shared_file
from conftest import SHARED

FIXTURE = Path(__file__).parent / "fixtures" / "lmeval_builtin_smollm2.json"


@pytest.fixture(scope="module")
def lm():
    from scoring.models import load, resolve
    return load(resolve("smollm2-135m"))


@pytest.fixture(scope="module")
def reference():
    if not FIXTURE.is_file():
        pytest.fail(f"missing {FIXTURE}; regenerate with benchmarks/parity_builtin.py --write-fixture")
    return json.loads(FIXTURE.read_text())["benchmarks"]


def scored(lm, name, n, tmp_path):
    """Our logprob_sum, n_chars and greedy flags for the first ``n`` items, as `curate score`
    computes them in the adapter's default formulation."""
    from curate.items.adapters import default_formulation, get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from curate.items.store import Workspace
    from scoring.encode import build_units
    from scoring.forward import score_requests
    from scoring.run import assemble, unit_spec
    model, tok = lm
    path, split = shared_file(name, SHARED / "benchmarks")
    adapter = get_adapter(name)
    ws = Ingest(tmp_path / name, IngestOptions(data=str(path), split=split, limit=n), adapter).run()
    items = Workspace.open(ws).items()
    specs = [unit_spec(i, it, "full", default_formulation(adapter)) for i, it in enumerate(items)]
    units = build_units(tok, specs, max_length=8192, seq_mean=False)
    results = score_requests(model, [r for u in units for r in u.requests], pad_id=tok.pad_token_id)
    rows, k = [], 0
    for u in units:
        rows += assemble(u, results[k:k + len(u.requests)], items[u.item_index], label="m", run_id="r")
        k += len(u.requests)
    return items, rows


def check(lm, reference, name, n, tmp_path):
    items, rows = scored(lm, name, n, tmp_path)
    ref = reference[name]["items"][:n]
    assert [r["row"] for r in ref] == [it["row_index"] for it in items]
    k = 0
    for item, theirs in zip(items, ref):
        mine = rows[k:k + len(item["options"])]
        k += len(mine)
        lls = np.array([r["logprob_sum"] for r in mine])
        chars = np.array([r["n_chars"] for r in mine])
        assert np.abs(lls - np.array(theirs["lls"])).max() < 1e-3, item["item_id"]
        assert [bool(r["is_greedy"]) for r in mine] == theirs["greedy"], item["item_id"]
        assert float(lls.argmax() == item["gold"]) == theirs["acc"], item["item_id"]
        if "acc_norm" in theirs:
            assert float((lls / chars).argmax() == item["gold"]) == theirs["acc_norm"], item["item_id"]


@pytest.mark.parametrize("name", sorted(SHARED_DATA))
def test_first_items_equal_lmeval(lm, reference, name, tmp_path):
    check(lm, reference, name, 6, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHARED_DATA))
def test_fifty_items_equal_lmeval(lm, reference, name, tmp_path):
    check(lm, reference, name, 50, tmp_path)
