"""Each kind of extension is one new file (issue 38): a built-in benchmark (its adapter, few-shot
rules and lm-eval task settings together), a stage option, and a scoring backend, each added
here as one file and taken by everything that reads its kind. (Condition kinds and report
sections: tests/test_filter_kinds.py and tests/test_report_sections.py.)"""
from __future__ import annotations

import yaml

from conftest import SHARED
from plugin_helpers import module_in

ARC_EASY = SHARED / "benchmarks" / "arc_easy" / "validation.jsonl.gz"

#: ARC-Easy scored in letters: a benchmark lm-eval has no task for, written as one file.
LETTERS_BENCHMARK = '''
from curate.items.benchmarks import Spec
from curate.items.benchmarks._lm_eval import ACC
from curate.items.benchmarks._rows import labelled_question, question_field
from curate.items.fewshot import Settings

SPEC = Spec("allenai/ai2_arc", "ARC-Easy", "validation", "letters", "cc-by-sa-4.0", "arc_easy_letters")
FEWSHOT = Settings(passes_eval_doc=True, seed=7)
LM_EVAL = {"doc_to_text": "Question: {{question}}\\n{% for t in choices.text %}{{'ABCDE'[loop.index0]}}. {{t}}\\n"
                          "{% endfor %}Answer:",
           "doc_to_target": "{{choices.label.index(answerKey)}}", "doc_to_choice": "{{choices.label}}",
           "metric_list": ACC}


def to_item(row, row_index, split, name):
    return labelled_question(row, row_index, split, name, question_field(row, "question"))
'''


def test_a_built_in_benchmark_is_one_file(tmp_path):
    """Its file is all it takes: `curate init`'s list, ingest (its items are ARC-Easy's, under its
    name), its formulation as the workspace's, its few-shot rules in the shots drawn, and its
    lm-eval settings in a release's task."""
    from curate.items import benchmarks
    from curate.items.adapters import get_adapter, known
    from curate.items.fewshot_pool import fewshot_plan
    from curate.items.ingest import ingest
    from curate.items.store import Workspace
    from curate.release.lm_eval_task import write_task

    with module_in(benchmarks, "arc_easy_letters", LETTERS_BENCHMARK, tmp_path / "added"):
        assert "arc_easy_letters" in known()
        ws = ingest(tmp_path / "ws", data=str(ARC_EASY), adapter=get_adapter("arc_easy_letters"), limit=12)
        plain = ingest(tmp_path / "plain", data=str(ARC_EASY), adapter=get_adapter("arc_easy"), limit=12)
        with Workspace.open(ws) as w, Workspace.open(plain) as p:
            items, others = w.items(), p.items()
            assert w.meta("formulation") == "letters" and p.meta("formulation") == "cloze"
            assert [it["options"] for it in items] == [it["options"] for it in others]
            assert items[0]["item_id"] == "arc_easy_letters/validation/0"
            shots, settings, info = fewshot_plan(w, items, [2], "evaluated")
            record = w.meta("adapter")
        assert settings.seed == 7 and info["fewshot_seed"] == 7 and len(shots[2][0]) == 2
        assert all(items[i]["item_id"] not in {s["item_id"] for s in shots[2][i]} for i in range(len(items)))
        (tmp_path / "release").mkdir()
        manifest = write_task(tmp_path / "release", name="arc-letters", version="0.1.0", adapter=record,
                              split="validation", data_path="data/validation.parquet", items=items,
                              formulation="letters")
        assert manifest["config"] == "arc_easy_letters"
        task = yaml.safe_load((tmp_path / "release" / "lm_eval_task" / "arc-letters.yaml").read_text()
                              .replace("!function", ""))
        assert task["doc_to_choice"] == "{{choices.label}}" and task["validation_split"] == "validation"
