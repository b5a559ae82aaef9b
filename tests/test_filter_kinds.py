"""Condition kinds are one module each (curate/filter/kinds/): the rules schema, the evaluation and
the audit's plan check are built from them, and the schema files are what the code builds."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import schemas
from annotate_helpers import small_workspace
from conftest import HELLASWAG
from plugin_helpers import module_in

#: A kind written as a newcomer would, in one file: items whose round-1 record has at least N labels.
EXAMPLE_KIND = '''
"""label_count: items whose round-1 record from the annotator carries at least N labels."""
import numpy as np

from curate.filter.kinds._common import ANNOTATOR, fill_annotator, per_record

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["at_least"],
          "properties": {"annotator": ANNOTATOR, "at_least": {"type": "integer", "minimum": 1},
                         "if_missing": {"$ref": "#/$defs/if_missing"}}}
fill = fill_annotator


def needs(spec, **_):
    return [("annotation", (spec["annotator"], (1,)))]


def evaluate(spec, inputs) -> np.ndarray:
    return per_record(spec, inputs, 1, lambda result, gold: len(result["labels"]) >= spec["at_least"])
'''

RULES = """name: one-new-file
defaults: {annotator: "test:a"}
stages:
  - name: many-labels
    when: {label_count: {at_least: 2}}
  - name: not-high-quality
    when: {not: {labels: {any: [high_quality]}}}
"""


@pytest.fixture
def example_kind(tmp_path):
    """label_count.py in a second folder of the kinds package, as if written into curate/filter/kinds/."""
    from curate.filter import kinds

    with module_in(kinds, "label_count", EXAMPLE_KIND, tmp_path / "more-kinds"):
        yield


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """6 real rows; round-1 records of 'test:a' with 1, 2 or 3 labels (a test double: no LLM runs here)."""
    from annotate.store import open_annotations, write_annotation

    root = small_workspace(tmp_path_factory.mktemp("kinds") / "ws", n=6)
    labels = [["high_quality"], ["nonsense_prompt", "multiple_plausible"], ["high_quality"],
              ["ungrammatical_prompt", "nonsense_prompt", "multiple_plausible"], ["nonsense_correct"],
              ["nonsense_correct", "multiple_plausible"]]
    with open_annotations(root) as w, w.transaction():
        for it, given in zip(w.items(), labels):
            write_annotation(w, {"annotator": "test:a", "round": 1, "item_id": it["item_id"], "status": "valid",
                                 "result": {"labels": given}, "raw": "{}", "prompt_version": "sha256:t",
                                 "model_snapshot": None, "request_key": it["item_id"], "content_hash": it["content_hash"]})
    return root


def test_a_new_condition_kind_is_one_new_file(example_kind, ws, tmp_path):
    """The example kind's one file is all it takes: the schema takes it (and checks its spec), the
    defaults fill it, `curate filter` evaluates it, and the audit's plan check reads its needs."""
    from curate.audit.config import load_config
    from curate.audit.plan import plan_problems
    from curate.audit.stages.filter import rule_needs as needs
    from curate.core.errors import InputError
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions
    from curate.filter.rules import load_rules

    rules_path = tmp_path / "rules.yaml"
    rules_path.write_text(RULES)
    rules = load_rules(rules_path)
    assert rules["stages"][0]["when"] == {"label_count": {"at_least": 2, "annotator": "test:a"}}  # default filled
    rules_path.write_text(RULES.replace("at_least: 2", "at_least: 0"))
    with pytest.raises(InputError, match="0 is less than the minimum of 1") as bad:
        load_rules(rules_path)
    assert bad.value.field == "stages/0/when/label_count/at_least"
    rules_path.write_text(RULES)

    summary = Filter(ws, FilterOptions(rules=rules_path, out=tmp_path / "out")).run()
    decisions = pd.read_parquet(tmp_path / "out" / "decisions.parquet")
    assert list(decisions["first_stage"].fillna("kept")) == ["kept", "many-labels", "kept", "many-labels",
                                                             "not-high-quality", "many-labels"]
    assert [s["matched"] for s in summary["stages"]] == [3, 4]

    assert [(n.stage, n.kind, n.what) for n in needs(rules)][0] == ("many-labels", "annotation", ("test:a", (1,)))
    config = tmp_path / "audit.yaml"
    config.write_text(f"workspace: {ws}\nbenchmark: {{adapter: hellaswag, path: {HELLASWAG}}}\n"
                      f"filter: {{rules: {rules_path}, out: {tmp_path / 'dec'}, annotator: 'other:b'}}\n")
    [(key, message)] = plan_problems(load_config(config, cwd=tmp_path))
    assert key == "filter.annotator" and message.startswith(
        "stages 'many-labels', 'not-high-quality' of rules.yaml read other:b's round 1 records")
    config.write_text(config.read_text().replace(", annotator: 'other:b'", ""))
    assert plan_problems(load_config(config, cwd=tmp_path)) == []  # the workspace holds test:a's records


def test_the_kinds_are_the_modules_of_the_package():
    from curate.filter.kinds import KINDS, rules_schema

    kinds = KINDS.modules
    assert set(kinds) == {"labels", "answer", "status", "length_spread", "gold_longest", "correct", "seeds_correct",
                          "rotated_correct", "near_duplicate_options", "field", "ids", "duplicate", "min_k_pp",
                          "label_error", "several_correct", "no_right_answer", "easy", "misfit", "suspect"}
    conditions = rules_schema()["$defs"]["condition"]["properties"]
    assert set(conditions) == {"all", "any", "not", *kinds}


def test_schema_files_are_what_the_code_builds():
    """schemas/rules.schema.json is the schema the kinds build, and the audit schema's benchmarks
    are the adapters': after adding a kind or a benchmark, `make schemas` rewrites them."""
    from curate.schema_files import stale

    assert stale() == [], "run `make schemas` (python -m curate.schema_files)"


def test_every_benchmark_init_takes_is_one_an_audit_config_takes():
    """A benchmark added to curate/items/adapters/ is accepted by `curate audit`'s config as by `curate init`."""
    from curate.items.adapters import known
    from curate.audit.config import config_problems

    assert schemas.load("audit")["$defs"]["benchmark"]["properties"]["adapter"]["enum"] == known()
    columns = {"question": "q", "choices": "c", "answer": "a"}
    for name in known():
        benchmark = {"adapter": name, "path": "data.jsonl", **({"columns": columns} if name == "generic" else {})}
        assert config_problems({"workspace": "ws", "benchmark": benchmark}) == [], name
    assert config_problems({"workspace": "ws", "benchmark": {"adapter": "no-such-benchmark"}})


def test_schema_enums_are_the_codes():
    from curate.filter.kinds._common import NORMALIZATION
    from scoring.normalize import NORMALIZATIONS

    assert NORMALIZATION["enum"] == list(NORMALIZATIONS)


def test_a_kind_module_without_evaluate_is_named(tmp_path):
    from curate.filter import kinds

    with module_in(kinds, "broken", "SCHEMA = {}\n", tmp_path), \
            pytest.raises(TypeError, match="broken.py: a condition kind needs evaluate"):
        kinds.KINDS.modules


def test_one_walk_fills_lists_needs_and_evaluates_nested_conditions():
    """all / any / not nest to any depth; each of the three uses of the tree sees every kind."""
    from curate.filter import conditions

    cond = {"any": [{"not": {"ids": {"row_index": [0]}}},
                    {"all": [{"status": {"is": "missing"}}, {"correct": {"models": ["m"], "mode": "zero",
                                                                          "normalization": "sum", "at_least": 1}}]}]}
    filled = conditions.fill(cond, {"annotator": "x:y"}, "stages/0/when")
    assert filled["any"][1]["all"][0] == {"status": {"is": "missing", "annotator": "x:y"}}
    assert "annotator" not in cond["any"][1]["all"][0]["status"]  # a copy
    assert conditions.needs(filled, default_formulation="letters") == [
        ("annotation", ("x:y", (1, 2))), ("scores", ("m", "zero", "sum", "letters"))]
    with pytest.raises(conditions.FillError) as exc:
        conditions.fill(cond, {}, "stages/0/when")
    assert exc.value.field == "stages/0/when/any/1/all/0/status"

    class Items:  # just what `ids` reads
        items = [{"row_index": i} for i in range(3)]
    assert list(conditions.evaluate({"not": {"ids": {"row_index": [0]}}}, Items())) == [False, True, True]
    assert np.array_equal(conditions.evaluate({"any": [{"ids": {"row_index": [0]}}, {"ids": {"row_index": [2]}}]},
                                              Items()), [True, False, True])


def test_seeds_correct_reads_one_template_and_every_seed_named(ws, tmp_path):
    """The kind's own reading of generations: one template and settings, or a named one; every
    item answered under every seed; the runs read go into the decisions' summary."""
    import shutil

    from curate.core.errors import CurateError
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions
    from generate.store import add_run, open_generations, write_generations

    root = shutil.copytree(ws, tmp_path / "ws")
    with open_generations(root) as w, w.transaction():
        items = w.items()
        for template, seeds in (("numbered", (0, 1)), ("question", (0,))):
            add_run(w, run_id=f"gen-{template}", model="g/a", backend="local", template=template,
                    settings="t=0,p=1,n=8", info={})
            write_generations(w, [{
                "model": "g/a", "template": template, "settings": "t=0,p=1,n=8", "mode": "full", "seed": seed,
                "item_id": it["item_id"], "order": [0, 1, 2, 3], "raw": "1", "status": "strict", "method": "number",
                "detail": None, "shown": 1 + (i + seed) % 2 * it["gold"], "pred": (i + seed) % 2 * it["gold"],
                "new_tokens": 1, "finish": "stop", "attempts": 1, "request_key": f"{it['item_id']}/{template}/{seed}",
                "content_hash": it["content_hash"], "run_id": f"gen-{template}"}
                for i, it in enumerate(items) for seed in seeds])

    def run(spec: str, mode: str = "full"):
        rules = tmp_path / "rules.yaml"
        rules.write_text(f"name: g\nstages:\n  - name: s\n    when: {{seeds_correct: {{model: g/a, mode: {mode}, {spec}}}}}\n")
        return Filter(root, FilterOptions(rules=rules, out=tmp_path / "out")).run()

    with pytest.raises(CurateError, match="has generations under templates numbered, question; name one with"):
        run("at_least: 1")
    with pytest.raises(CurateError, match=r"6 of 6 items lack a generation .* for some of seeds \[0, 1\]"):
        run("template: question, seeds: [0, 1], at_least: 1")
    with pytest.raises(CurateError, match="no generations of model 'g/a' in mode 'zero'"):
        run("at_least: 1", mode="zero")
    summary = run("template: numbered, at_least: 1")
    right = [((i % 2) * g == g) + (((i + 1) % 2) * g == g) for i, g in enumerate(it["gold"] for it in items)]
    assert summary["stages"][0]["matched"] == sum(r >= 1 for r in right)
    assert summary["inputs"]["generation_runs"] == [{"run_id": "gen-numbered", "model": "g/a", "mode": "full",
                                                     "template": "numbered", "settings": "t=0,p=1,n=8", "seeds": [0, 1]}]
