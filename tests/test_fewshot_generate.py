"""`curate generate --fewshot K`: worked examples before each question (no model needed: the
prompts are checked as planned)."""
from __future__ import annotations

import pytest

from conftest import SHARED


def _ingest(tmp_path, name, path, split, limit=2):
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    return Ingest(tmp_path / name, IngestOptions(data=str(path), split=split, limit=limit), get_adapter(name)).run()


def test_examples_come_first_and_keep_their_answers(tmp_path):
    from curate.items.store import Workspace
    from generate.prompts import DEFAULT_TEMPLATE, load_template, shuffle_order
    from generate.run import fewshot_examples, plan

    root = _ingest(tmp_path, "mmlu", SHARED / "benchmarks" / "mmlu" / "test.jsonl.gz", "test")
    with Workspace.open(root) as ws:
        items = ws.items()
        shots, scope = fewshot_examples(ws, items, 2, None)
    tpl = load_template(DEFAULT_TEMPLATE)
    plain = plan(items, ["full"], [0], tpl, {"m": 1})
    shown = plan(items, ["full"], [0], tpl, {"m": 1, **scope}, shots)
    assert scope["fewshot"] == 2 and [len(s) for s in shots] == [2, 2]
    for a, b, item_shots in zip(plain, shown, shots):
        assert b.user.endswith(a.user) and b.user != a.user and b.instructions == a.instructions
        assert b.key != a.key and b.order == a.order
        examples = b.user[:-len(a.user)]
        assert examples.count("Answer: ") == 2 and item_shots[0]["prompts"]["full"].split("\n")[-2] in examples
        first = item_shots[0]
        gold_shown = shuffle_order(first["content_hash"], 0, 4).index(first["gold"]) + 1
        assert f"Answer: {gold_shown}\n\n" in examples


def test_a_missing_pool_is_refused_before_the_model_loads(tmp_path):
    from curate.core.errors import CurateError
    from generate.run import Generate
    from generate.options import GenerateOptions

    root = _ingest(tmp_path, "copa", SHARED / "benchmarks" / "copa" / "validation.jsonl.gz", "validation")
    with pytest.raises(CurateError, match="--fewshot-pool"):
        Generate(root, GenerateOptions(model="local:no-such-model", modes=["full"], seeds=1, fewshot=2)).run()


def test_generate_and_score_draw_their_shots_from_one_plan(tmp_path):
    """`curate generate --fewshot K` shows the shots `curate score --fewshot K` scores after
    (curate.items.fewshot_pool.fewshot_plan), and keys its requests with the same pool key."""
    from curate.items.fewshot_pool import fewshot_plan
    from curate.items.store import Workspace
    from generate.run import fewshot_examples
    from scoring.run import fewshot_plan as scoring_plan

    assert scoring_plan is fewshot_plan  # curate score draws through the same function
    root = _ingest(tmp_path, "mmlu", SHARED / "benchmarks" / "mmlu" / "test.jsonl.gz", "test", limit=3)
    with Workspace.open(root) as ws:
        items = ws.items()
        shots, scope = fewshot_examples(ws, items, 2, None)
        plan, settings, info = fewshot_plan(ws, items, [0, 2], None)
        assert fewshot_plan(ws, items, [0], None) == ({0: [(), (), ()]}, None, {})
    assert shots == plan[2] and scope == {"fewshot": 2, "fewshot_key": info["fewshot_key"]}
    assert plan[0] == [(), (), ()] and info["fewshot_sampler"] == "first_n" and info["fewshot_pool_items"] > 0
