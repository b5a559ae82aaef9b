"""Each kind of extension is one new file (issue 38): a built-in benchmark (its adapter, few-shot
rules and lm-eval task settings together), a stage option, and a scoring backend, each added
here as one file and taken by everything that reads its kind. (Condition kinds and report
sections: tests/test_filter_kinds.py and tests/test_report_sections.py.)"""
from __future__ import annotations

import sqlite3

import click
import pytest
import yaml
from click.testing import CliRunner

from conftest import HELLASWAG, SHARED
from plugin_helpers import module_in

ARC_EASY = SHARED / "benchmarks" / "arc_easy" / "validation.jsonl.gz"

#: ARC-Easy scored in letters: a benchmark lm-eval has no task for, written as one file.
LETTERS_BENCHMARK = '''
from curate.items.builtins import Spec
from curate.items.builtins._lm_eval import ACC
from curate.items.builtins._rows import labelled_question, question_field
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
    import curate.items.builtins as builtin_benchmarks
    from curate.items.adapters import get_adapter, known
    from curate.items.fewshot_pool import fewshot_plan
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from curate.items.store import Workspace
    from curate.release.lm_eval_task import write_task

    with module_in(builtin_benchmarks, "arc_easy_letters", LETTERS_BENCHMARK, tmp_path / "added"):
        assert "arc_easy_letters" in known()
        ws = Ingest(tmp_path / "ws", IngestOptions(data=str(ARC_EASY), limit=12), get_adapter("arc_easy_letters")).run()
        plain = Ingest(tmp_path / "plain", IngestOptions(data=str(ARC_EASY), limit=12), get_adapter("arc_easy")).run()
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


def test_a_stage_option_is_one_table_entry():
    """An option added to a stage's table alone (here a new engine knob of `curate score`) is a
    flag of the command (a backend's: `-o NAME VALUE`), a checked field of the options object, a
    config key of the audit schema, and reaches the stage inside the options object."""
    from curate.core.options import Option, click_options, options_class, schema_properties
    from scoring.options import SCORE

    table = [*SCORE, Option("warmup_batches", int, 2, min=0, backend="engine",
                            config="Batches run and thrown away before timing starts.")]
    Options = options_class("ScoreOptions", table)

    @click.command()
    @click_options(table, into=Options)
    def score(options):
        click.echo(f"{options.warmup_batches} {options.model}")

    runner = CliRunner()
    assert runner.invoke(score, ["--model", "smollm2-135m"]).output == "2 smollm2-135m\n"
    assert runner.invoke(score, ["--model", "smollm2-135m", "-o", "warmup-batches", "5"]).output == "5 smollm2-135m\n"
    refused = runner.invoke(score, ["--model", "smollm2-135m", "-o", "warmup-batches", "-1"])
    assert refused.exit_code == 2 and "-1 is not in the range x>=0" in refused.output
    assert schema_properties(table)["warmup_batches"] == {
        "description": "Batches run and thrown away before timing starts.", "type": "integer", "minimum": 0,
        "default": 2}
    assert Options(model="m").warmup_batches == 2
    with pytest.raises(Exception, match="--warmup-batches -3: is not in the range 0 <= x"):
        Options(model="m", warmup_batches=-3)


#: A scoring backend written as one file: the reference forward under its own name and version.
PLAIN_BACKEND = '''
from scoring.backends import reference


class Backend(reference.Backend):
    """The model's own forward, as a backend of its own (its scores are its own, not the reference's)."""
    name = "plain"

    def identity(self) -> dict:
        return {**super().identity(), "engine": "plain-1"}
'''


def test_a_scoring_backend_is_one_file(tmp_path):
    """Its file is all it takes: `--backend` takes its name, the score stage runs on it, the
    stored rows and the run record carry its identity, its numbers are the model's own forward
    (the engine's within 1e-4), and a rerun on it reuses them."""
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from scoring import backends
    from scoring.options import ScoreOptions
    from scoring.run import Score
    from scoring.store import open_scores, read_scores

    ws = Ingest(tmp_path / "ws", IngestOptions(data=str(HELLASWAG), limit=3), get_adapter("hellaswag")).run()
    with module_in(backends, "plain", PLAIN_BACKEND, tmp_path / "added"):
        assert "plain" in backends.names() and ScoreOptions(model="m", backend="plain").backend == "plain"
        first = Score.with_options(ws, model="smollm2-135m", modes=["full"], backend="plain", label="plain", quiet=True).run()
        again = Score.with_options(ws, model="smollm2-135m", modes=["full"], backend="plain", label="plain", quiet=True).run()
    Score.with_options(ws, model="smollm2-135m", modes=["full"], label="engine", quiet=True).run()
    assert first["computed"] == 3 and again["computed"] == 0
    with sqlite3.connect(ws / "workspace.db") as c:
        engines = dict(c.execute("SELECT model, engine FROM score_runs"))
        info = [v for (v,) in c.execute("SELECT info_json FROM score_runs WHERE model = 'plain'")]
    assert engines["plain"] == "plain-1" and '"backend": "plain"' in info[0]
    with open_scores(ws) as w:
        rows = read_scores(w).pivot_table(index=["item_id", "option_index"], columns="model", values="logprob_sum")
    assert (rows["plain"] - rows["engine"]).abs().max() <= 1e-4
