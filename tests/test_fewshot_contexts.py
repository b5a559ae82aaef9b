"""k-shot contexts (curate/items/fewshot.py) against lm-evaluation-harness 0.4.13's own requests,
character for character (benchmarks/lmeval_fewshot.py builds them without a model).

MMLU: every one of the 57 subject tasks (first_n from dev, the subject line first), the first
items of each subject, in both formulations. The others: lm-eval's seeded random sampler over
the evaluated split (their own few-shot split is not in ../shared/data), the item itself left
out, on the first items in evaluation order (each item's shots depend on every draw before it).
"""
from __future__ import annotations

import pytest

from benchmarks.lmeval_fewshot import lmeval_fewshot_contexts
from benchmarks.lmeval_reference import shared_file
from conftest import HELLASWAG, SHARED
from curate.items import fewshot
from curate.items.adapters import default_formulation, get_adapter

BENCHMARKS = SHARED / "benchmarks"
PER_SUBJECT = 3     # MMLU items per subject (first_n draws no random numbers: any sample will do)
FIRST = 60          # items of the other benchmarks, in order


def read_items(name, path, split):
    from curate.items.ingest import build_items
    from curate.items.sources import open_source
    items, _ = build_items(open_source(str(path), split=split).rows, get_adapter(name), split=split, where=str(path))
    return items


def ours(items, pool, k, formulation, settings, rows):
    scored = fewshot.fewshot_scored([items[r] for r in rows], pool, k, "full", formulation, settings)
    return {r: list(s.contexts) for r, s in zip(rows, scored)}


@pytest.mark.parametrize("k", [1, 5])
def test_mmlu_every_subject(k):
    test, dev = BENCHMARKS / "mmlu" / "test.jsonl.gz", BENCHMARKS / "mmlu" / "dev.jsonl.gz"
    items, pool = read_items("mmlu", test, "test"), read_items("mmlu", dev, "dev")
    settings = get_adapter("mmlu").fewshot
    for benchmark, formulation in (("mmlu", "letters"), ("mmlu_cloze", "cloze")):
        ref = lmeval_fewshot_contexts(benchmark, test, k, fewshot=dev, limit=PER_SUBJECT)
        assert len({items[r]["source"] for r in ref}) == 57
        assert ours(items, pool, k, formulation, settings, sorted(ref)) == ref


def test_each_shots_text_is_built_once_per_run(monkeypatch):
    """A shot's text is built once per (shot, formulation, settings), not once per item and mode:
    MMLU's first_n shows the same 5 dev questions to a whole subject (300 items x 2 modes x 2
    formulations: 30 texts built, not 6,000); the contexts are those built without the memo."""
    from curate.items.ingest import build_items
    from curate.items.sources import open_source

    test, dev = BENCHMARKS / "mmlu" / "test.jsonl.gz", BENCHMARKS / "mmlu" / "dev.jsonl.gz"
    items, _ = build_items(open_source(str(test), split="test").rows, get_adapter("mmlu"), split="test",
                           where=str(test), limit=300)
    pool, settings = read_items("mmlu", dev, "dev"), get_adapter("mmlu").fewshot
    built, real = [], fewshot.shot_text
    monkeypatch.setattr(fewshot, "shot_text", lambda shot, f, s: built.append((shot["item_id"], f)) or real(shot, f, s))
    fewshot._cached_shot_text.cache_clear()
    shots = fewshot.sample_shots(items, pool, 5, settings)
    for mode in ("full", "zero"):
        for formulation in ("letters", "cloze"):
            for item, s, got in zip(items, shots, fewshot.fewshot_scored(items, pool, 5, mode, formulation, settings)):
                head = fewshot.description_of(item, formulation, settings) + "".join(real(x, formulation, settings)
                                                                                    for x in s)
                assert all(c.startswith(head) for c in got.contexts)
    assert len({it["source"] for it in items}) == 3 and len(built) == len(set(built)) == 3 * 5 * 2
    fewshot._cached_shot_text.cache_clear()


@pytest.mark.parametrize("k", [1, 5])
@pytest.mark.parametrize("name", ["hellaswag", "arc_easy", "arc_challenge", "openbookqa", "piqa", "social_iqa",
                                  "winogrande", "copa", "commonsense_qa", "sciq", "boolq"])
def test_random_sampler_from_the_evaluated_split(name, k):
    path, split = (HELLASWAG, "validation") if name == "hellaswag" else shared_file(name, BENCHMARKS)
    items = read_items(name, path, split)
    ref = lmeval_fewshot_contexts(name, path, k, limit=FIRST)
    assert sorted(ref) == list(range(FIRST))
    settings = get_adapter(name).fewshot.from_evaluated_split()
    assert ours(items, items, k, default_formulation(get_adapter(name)), settings, list(range(FIRST))) == ref


@pytest.mark.parametrize("name", ["hellaswag", "arc_easy", "openbookqa", "piqa", "social_iqa", "winogrande", "copa",
                                  "commonsense_qa", "sciq", "boolq"])
def test_the_tasks_own_splits_decide_what_is_left_out(name):
    """Each task as lm-eval configures it, its train split being the evaluated file: ARC,
    OpenBookQA and SciQ name a test split, so lm-eval keeps the item among its candidates; the
    others name none, and (None == None) it leaves the item out. Our settings say which."""
    path, split = (HELLASWAG, "validation") if name == "hellaswag" else shared_file(name, BENCHMARKS)
    items = read_items(name, path, split)
    ref = lmeval_fewshot_contexts(name, path, 5, limit=FIRST, own_splits=True)
    settings = get_adapter(name).fewshot
    assert ours(items, items, 5, default_formulation(get_adapter(name)), settings, list(range(FIRST))) == ref
    assert settings.passes_eval_doc == (name not in ("arc_easy", "openbookqa", "sciq"))


def test_generic_adapter_takes_a_fewshot_file_and_seed(tmp_path):
    """A generic benchmark names its few-shot file and seed; shots are lm-eval's random sampler
    over that file's rows (no exclusion: another split), drawn item after item."""
    import json
    import random

    from curate.items.fewshot_pool import resolve_pool
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from curate.items.store import Workspace

    def rows(n, tag):
        return "".join(json.dumps({"q": f"{tag} {i}?", "a": f"x{i}", "b": f"y{i}", "label": i % 2}) + "\n"
                       for i in range(n))
    (tmp_path / "eval.jsonl").write_text(rows(4, "Eval"))
    (tmp_path / "shots.jsonl").write_text(rows(5, "Shot"))
    adapter = get_adapter("generic", question="q", choices=("a", "b"), answer="label", answer_format="index",
                          fewshot_split=str(tmp_path / "shots.jsonl"), fewshot_seed=7)
    root = Ingest(tmp_path / "ws", IngestOptions(data=str(tmp_path / "eval.jsonl")), adapter).run()
    with Workspace.open(root) as ws:
        pool, settings, where = resolve_pool(ws, None)
        items = ws.items()
    assert where.endswith("shots.jsonl") and [p["prompts"]["full"] for p in pool][:2] == ["Shot 0?", "Shot 1?"]
    rnd = random.Random(7)
    expected = [[pool[i] for i in rnd.sample(range(5), 2)] for _ in items]
    assert fewshot.sample_shots(items, pool, 2, settings) == expected
    [first] = fewshot.fewshot_scored(items[:1], pool, 2, "full", "cloze", settings)
    a, b = expected[0]
    assert first.contexts[0] == (f"{a['prompts']['full']} {a['options'][a['gold']]}\n\n"
                                 f"{b['prompts']['full']} {b['options'][b['gold']]}\n\nEval 0?")
