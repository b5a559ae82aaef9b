"""Annotation wording that fits the item: question/answer for QA items, continuation for
HellaSwag-like ones, whole sentences for per-option contexts; one taxonomy, separate versions."""
from __future__ import annotations

import gzip
import json

from annotate.prompts import load_prompt, render_item, tools
from annotate.run import request_key
from conftest import SHARED, run_cli
from curate.items.adapters import get_adapter

BENCHMARKS = SHARED / "benchmarks"


def first(name, folder, split="validation"):
    with gzip.open(BENCHMARKS / folder / f"{split}.jsonl.gz", "rt", encoding="utf-8") as fh:
        return get_adapter(name).to_item(json.loads(fh.readline()), 0, split)


def test_question_items_get_question_wording():
    item = first("arc_easy", "arc_easy")
    assert item["kind"] == "question"
    r1, r2 = render_item(item, 1), render_item(item, 2)
    assert r1.startswith("Question:\nQuestion: Which technology was developed most recently?\nAnswer:\n\nAnswers:\n")
    assert "A. cellular telephone (marked correct)\nB. television" in r1
    assert "Candidate answers:\nA. cellular telephone (marked correct)" in r2  # answers alone, not glued to the prompt
    q1 = load_prompt(1, kind="question")
    assert "a question must be answered" in q1.instructions and "endings" not in q1.instructions
    assert "a short text must be continued" in load_prompt(1).instructions
    # One taxonomy: the same labels, the same tools.
    for label in ("ungrammatical_prompt", "nonsense_incorrect", "multiple_plausible", "high_quality"):
        assert label in q1.instructions
    assert tools(1, 4) == tools(1, 4)


def test_versions_differ_by_kind_and_enter_the_request_key():
    versions = {(r, k): load_prompt(r, kind=k).version for r in (1, 2) for k in ("continuation", "question")}
    assert len(set(versions.values())) == 4
    item = first("arc_easy", "arc_easy")
    keys = {request_key(item, 1, versions[1, k], "anthropic:m", {}) for k in ("continuation", "question")}
    assert len(keys) == 2


def test_winogrande_candidates_are_whole_sentences():
    item = first("winogrande", "winogrande")
    r1, r2 = render_item(item, 1), render_item(item, 2)
    assert "Sarah was a much better surgeon than Maria so _ always got the easier cases." in r1
    assert "A. Sarah\nB. Maria (marked correct)" in r1
    assert "A. Sarah was a much better surgeon than Maria so Sarah always got the easier cases.\n" in r2


def test_continuation_items_keep_their_wording():
    item = first("copa", "copa")
    r2 = render_item(item, 2)
    assert "A. The man turned on the faucet therefore the toilet filled with water.\n" in r2  # no doubled space
    assert "A. the toilet filled with water." in render_item(item, 1)


def test_local_annotator_records_the_question_version(tmp_path):
    ws = tmp_path / "ws"
    run_cli("init", ws, "--benchmark", "arc_easy", "--data", BENCHMARKS / "arc_easy" / "validation.jsonl.gz",
            "--limit", "1")
    run_cli("annotate", ws, "--round", "1", "--annotator", "local:smollm2-135m")
    from annotate.local import LocalAnnotator
    from annotate.store import open_annotations, read_annotations
    with open_annotations(ws) as w:
        [record] = read_annotations(w, round=1).to_dict("records")
    local = LocalAnnotator("smollm2-135m")
    assert record["prompt_version"] == local.prompt_version(1, "question") != local.prompt_version(1)
