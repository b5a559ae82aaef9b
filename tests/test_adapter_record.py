"""One rebuild of a workspace's adapter from its stored record (curate.items.adapters.from_record), used
by the few-shot pool, the duplicate search's other splits and the release's lm-eval task."""
from __future__ import annotations

import json

from conftest import run_cli
from curate.items.adapters import from_record, get_adapter
from curate.items.store import Workspace

ROWS = [{"q": f"Question {i}?", "choices": [f"a{i}", f"b{i}"], "label": i % 2} for i in range(4)]
COLUMNS = "{name: quiz, question: q, choices: choices, answer: label, answer_format: index}"


def test_a_generic_workspaces_fewshot_pool_keeps_its_name_so_its_item_ids_are_ingests(tmp_path):
    """The pool read by the workspace's adapter gives the ids ingest gave (the generic adapter's
    ``name`` used to be dropped: quiz/train/0 came back as generic/train/0)."""
    from curate.items.fewshot_pool import resolve_pool

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", data, "--split", "train", "--columns", COLUMNS)
    with Workspace.open(tmp_path / "ws") as ws:
        items = ws.items()
        pool, _, where = resolve_pool(ws, str(data))
    assert where == str(data) and items[0]["item_id"] == "quiz/train/0"
    assert [d["item_id"] for d in pool] == [it["item_id"] for it in items]
    assert pool == items


def test_every_record_kind_rebuilds_its_adapter():
    from curate.items.ingest import adapter_record
    from curate.release.lm_eval_task import builtin_of

    generic = get_adapter("generic", question="q", choices=("a", "b"), answer="label", name="mmlu")
    for adapter in (get_adapter("hellaswag"), get_adapter("mmlu"), get_adapter("piqa"), generic):
        assert adapter_record(from_record(adapter_record(adapter))) == adapter_record(adapter)
    assert from_record(None, "copa") == get_adapter("copa")  # a workspace without a record: its benchmark
    assert [builtin_of(adapter_record(a)) for a in (get_adapter("hellaswag"), get_adapter("mmlu"), generic)] == \
        ["hellaswag", "mmlu", None]  # a generic benchmark named as a built-in has no lm-eval config
    assert builtin_of({}) is None
