"""`curate score --fewshot`: k-shot scores stored per shot count, each number the model's own
one-sequence forward over lm-eval's k-shot context (SmolLM2 on a few MMLU items)."""
from __future__ import annotations

import json
import sqlite3

import pytest

from conftest import SHARED, one_line_error, run_cli

MMLU = SHARED / "benchmarks" / "mmlu"


@pytest.fixture(scope="module")
def mmlu_ws(tmp_path_factory):
    """Two MMLU test items, scored 0- and 1-shot (shots from dev, found beside test)."""
    ws = tmp_path_factory.mktemp("fewshot") / "ws"
    run_cli("init", ws, "--benchmark", "mmlu", "--data", MMLU / "test.jsonl.gz", "--split", "test", "--limit", "2")
    out = run_cli("score", ws, "--model", "smollm2-135m", "--modes", "full", "--fewshot", "0,1", "--self-check", "2",
                  "--quiet").stdout
    assert "0,1-shot" in out and "self-check: 2 units" in out, out
    return ws


def test_each_shot_count_is_its_own_row_and_equals_the_plain_forward(mmlu_ws):
    import torch

    from curate.items import fewshot
    from curate.items.adapters import get_adapter
    from curate.items.fewshot_pool import resolve_pool
    from scoring.encode import build_unit
    from scoring.models import load, resolve
    from scoring.store import open_scores, read_scores

    with open_scores(mmlu_ws) as ws:
        scores, items = read_scores(ws), ws.items()
        pool, settings, where = resolve_pool(ws, None)
    assert where.endswith("dev.jsonl.gz") and settings == get_adapter("mmlu").fewshot
    assert scores.groupby("fewshot")["item_id"].nunique().to_dict() == {0: 2, 1: 2}
    one = scores[scores["fewshot"] == 1]
    assert not one["logprob_sum"].equals(scores[scores["fewshot"] == 0]["logprob_sum"].reset_index(drop=True))
    model, tok = load(resolve("smollm2-135m"))
    for item, shots in zip(items, fewshot.sample_shots(items, pool, 1, settings)):
        s = fewshot.with_shots(fewshot.forms.scored(item, "full", "letters"), item, shots, "letters", settings)
        assert s.contexts[0].startswith("The following are multiple choice questions (with answers) about abstract "
                                        "algebra.\n\nFind all c in Z_3")  # the first dev question, then the item
        unit = build_unit(tok, 0, "full", s.contexts, s.continuations, max_length=8192)
        request = unit.requests[0]
        with torch.no_grad():
            for j, cont in enumerate(request.conts):  # one forward per option, the whole sequence
                ids = torch.tensor([request.prefix + cont])
                logprobs = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
                p = len(request.prefix)
                plain = logprobs[torch.arange(p - 1, p - 1 + len(cont)), torch.tensor(cont)].sum().item()
                stored = one[(one["item_id"] == item["item_id"]) & (one["option_index"] == request.options[j])]
                assert float(stored["logprob_sum"].iloc[0]) == pytest.approx(plain, abs=1e-4)


def test_the_run_records_its_shots_and_reuses_them(mmlu_ws):
    info = json.loads(sqlite3.connect(mmlu_ws / "workspace.db").execute(
        "SELECT info_json FROM score_runs").fetchone()[0])
    assert info["fewshot"] == [0, 1] and info["fewshot_sampler"] == "first_n" and info["fewshot_split"] == "dev"
    assert info["fewshot_key"].startswith("sha256:") and info["self_check"]["items"] == 2
    again = run_cli("score", mmlu_ws, "--model", "smollm2-135m", "--modes", "full", "--fewshot", "1", "--quiet").stdout
    assert " 0 item-modes computed, 2 cached" in again, again


def test_a_missing_fewshot_split_is_one_line(tmp_path):
    ws = tmp_path / "ws"
    run_cli("init", ws, "--benchmark", "copa", "--data", SHARED / "benchmarks" / "copa" / "validation.jsonl.gz",
            "--limit", "2")
    proc = run_cli("score", ws, "--model", "smollm2-135m", "--fewshot", "2", "--quiet", check=False)
    one_line_error(proc, "few-shot split 'train'", "--fewshot-pool")
    proc = run_cli("score", ws, "--model", "smollm2-135m", "--fewshot", "x", "--quiet", check=False)
    assert proc.returncode == 2 and "expected shot counts" in proc.stderr


def test_a_benchmark_folder_is_scored_k_shot_with_its_own_dev_split(tmp_path):
    """A workspace made from the MMLU folder (dev, validation and test files, the Hub's layout)
    scores 5-shot with no --fewshot-pool: its dev split is read from that folder, and every
    context is the one a workspace made from the test file builds."""
    from curate.items.fewshot_pool import fewshot_plan
    from curate.items.store import Workspace
    from scoring.run import unit_spec

    contexts = {}
    for name, data in (("folder", MMLU), ("file", MMLU / "test.jsonl.gz")):
        run_cli("init", tmp_path / name, "--benchmark", "mmlu", "--data", data, "--split", "test", "--limit", "2")
        with Workspace.open(tmp_path / name) as ws:
            items = ws.items()
            plan, settings, info = fewshot_plan(ws, items, [5], None)
        contexts[name] = [unit_spec(i, item, mode, "letters", shots, settings).context
                          for i, (item, shots) in enumerate(zip(items, plan[5])) for mode in ("full", "zero")]
        assert info["fewshot_pool_items"] == 285, info
    assert contexts["folder"] == contexts["file"]
    assert contexts["folder"][0][0].startswith("The following are multiple choice questions (with answers) about "
                                               "abstract algebra.\n\nFind all c in Z_3")
    out = run_cli("score", tmp_path / "folder", "--model", "smollm2-135m", "--modes", "full", "--fewshot", "5",
                  "--self-check", "1", "--quiet").stdout
    assert "5-shot" in out and "2 item-modes computed" in out, out
    info = json.loads(sqlite3.connect(tmp_path / "folder" / "workspace.db").execute(
        "SELECT info_json FROM score_runs").fetchone()[0])
    assert info["fewshot"] == [5] and info["fewshot_pool"] == str(MMLU.resolve()) and info["fewshot_split"] == "dev"
