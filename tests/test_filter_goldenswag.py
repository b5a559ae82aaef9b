"""rules/goldenswag.yaml stage by stage, on items, annotations and scores built for the purpose.

Annotations and scores here are synthetic: the study's annotations are not available, and
each item is written to trigger known stages, so that both "matched" and "removed here" of
every stage are known in advance. Token lengths are real (the built-in smollm2-135m tokenizer).
"""
from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import ROOT, run_cli

ANNOTATOR = "test:synthetic"
STUDY_MODELS = ["qwen-2.5-32b-instruct", "OLMo-2-0325-32B-Instruct", "meta-llama/Llama-3.2-1B",
                "google/gemma-3-1b-pt", "Qwen/Qwen2.5-1.5B", "HuggingFaceTB/SmolLM2-1.7B",
                "ibm-granite/granite-3.1-1b-a400m-base", "EleutherAI/pythia-1b", "PleIAs/Pleias-1b-Preview",
                "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"]
CONTEXT = "Anna walks to the park with her small dog and they play together on the grass"
SHORT = ["the cat sat", "the dog sat", "the cow sat", "the pig sat"]
MEDIUM = "the cat sat on the soft mat"                      # spread ~0.2 against SHORT with CONTEXT
LONG = ("the cat sat on the soft mat near the door and then it slept there for a very long time "
        "while the rain fell outside on the quiet street")  # spread well above 0.3

# row -> (options, gold, round-1 labels or "refused", round-2 answer changes or "refused", zero-core?)
DESIGN = {
    0: (SHORT, 0, ["high_quality"], {}, False),                                   # kept
    1: (SHORT, 1, "refused", "refused", False),                                   # 1
    2: (SHORT, 2, ["nonsense_prompt", "ungrammatical_correct"], {}, False),       # 2 (and 3)
    3: (SHORT, 3, ["nonsense_correct"], {}, False),                               # 3
    4: (SHORT, 0, ["ungrammatical_incorrect"], {"best": 1}, False),               # 4 (and 5)
    5: (SHORT, 1, ["multiple_plausible"], {"best": 2}, False),                    # 5
    6: (SHORT, 2, ["high_quality"], {"all_implausible": True, "equally_good": [0]}, False),  # 6 (and 7)
    7: (SHORT, 3, ["high_quality"], {"equally_good": [1, 2]}, False),             # 7
    8: ([SHORT[0], SHORT[1], LONG, SHORT[3]], 2, ["high_quality"], {}, False),   # 8
    9: ([SHORT[0], MEDIUM, SHORT[2], SHORT[3]], 1, ["high_quality"], {}, False),  # 9
    10: ([SHORT[0], MEDIUM, SHORT[2], SHORT[3]], 0, ["high_quality"], {}, False), # kept: gold not longest
    11: (SHORT, 0, ["high_quality"], {}, True),                                   # 10
    12: (SHORT, 1, "refused", "refused", True),                                   # 1 (and 10)
}
EXPECTED_TABLE = [  # stage, matched, removed_here, left (13 items)
    ("refused", 2, 2, 11), ("prompt-quality", 1, 1, 10), ("correct-quality", 2, 1, 9),
    ("incorrect-ungrammatical", 1, 1, 8), ("best-not-gold", 2, 1, 7), ("all-implausible", 1, 1, 6),
    ("equally-good", 2, 1, 5), ("length-spread", 1, 1, 4), ("gold-longest", 1, 1, 3), ("zero-prompt-core", 2, 1, 2),
]


def record(item, round, status, result):
    return {"annotator": ANNOTATOR, "round": round, "item_id": item["item_id"], "status": status, "result": result,
            "raw": json.dumps(result), "prompt_version": "sha256:" + "0" * 64, "model_snapshot": "synthetic-1",
            "request_key": f"{item['item_id']}:{round}", "content_hash": item["content_hash"]}


@pytest.fixture(scope="module")
def golden_ws(tmp_path_factory):
    from annotate.store import open_annotations, write_annotation
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from scoring.store import add_run, open_scores, write_scores

    base = tmp_path_factory.mktemp("golden")
    rows = [{"ctx": CONTEXT, "endings": opts, "label": gold} for opts, gold, *_ in DESIGN.values()]
    (base / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    adapter = get_adapter("generic", name="toy", question="ctx", choices="endings", answer="label")
    ws_root = Ingest(base / "ws", IngestOptions(data=str(base / "items.jsonl")), adapter).run()

    ws = open_annotations(ws_root)
    with ws.transaction():
        for item, (opts, gold, labels, answer, _) in zip(ws.items(), DESIGN.values()):
            write_annotation(ws, record(item, 1, "refused", None) if labels == "refused"
                             else record(item, 1, "valid", {"labels": labels}))
            if answer == "refused":
                write_annotation(ws, record(item, 2, "refused", None))
            else:
                base_answer = {"best": gold, "equally_good": [], "all_implausible": False, "worst": (gold + 1) % 4}
                write_annotation(ws, record(item, 2, "valid", {**base_answer, **answer}))
    ws.close()

    # Zero-mode scores: in a core item 8 of the 10 models pick the gold option, elsewhere 3.
    ws = open_scores(ws_root)
    with ws.transaction():
        for m, model in enumerate(STUDY_MODELS):
            run_id = f"synthetic:{model}"
            add_run(ws, run_id=run_id, model=model, origin="synthetic", info={})
            rows = []
            for item, (opts, gold, _, _, core) in zip(ws.items(), DESIGN.values()):
                pred = gold if m < (8 if core else 3) else (gold + 1) % 4
                rows += [{"model": model, "mode": "zero", "item_id": item["item_id"], "option_index": j,
                          "seq_mean": 0.0 if j == pred else -1.0, "content_hash": item["content_hash"],
                          "run_id": run_id} for j in range(4)]
            write_scores(ws, rows)
    ws.close()
    return ws_root


def test_goldenswag_stages_match_and_remove_what_they_should(golden_ws, tmp_path):
    out = tmp_path / "dec"
    result = run_cli("filter", golden_ws, "--rules", ROOT / "rules" / "goldenswag.yaml", "--out", out,
                     "--annotator", ANNOTATOR, "--tokenizer", "smollm2-135m")
    stages = pd.read_csv(out / "stages.csv")
    assert [tuple(r) for r in stages.itertuples(index=False)] == EXPECTED_TABLE
    assert "kept 2 of 13 items" in result.stdout

    decisions = pd.read_parquet(out / "decisions.parquet").set_index("row_index")
    assert decisions.loc[decisions["kept"]].index.tolist() == [0, 10]
    assert decisions.loc[2, "first_stage"] == "prompt-quality"
    assert list(decisions.loc[2, "matched"]) == ["prompt-quality", "correct-quality"]
    assert list(decisions.loc[12, "matched"]) == ["refused", "zero-prompt-core"]
    assert list(decisions.loc[4, "matched"]) == ["incorrect-ungrammatical", "best-not-gold"]
    assert list(decisions.loc[6, "matched"]) == ["all-implausible", "equally-good"]
    assert list(decisions.loc[8, "matched"]) == ["length-spread"]
    assert list(decisions.loc[9, "matched"]) == ["gold-longest"]

    summary = json.loads((out / "summary.json").read_text())
    (r1,) = [a for a in summary["inputs"]["annotators"] if a["round"] == 1]
    assert r1["model_snapshots"] == ["synthetic-1"] and r1["status"] == {"refused": 2, "valid": 11}
    assert len(summary["inputs"]["score_runs"]) == 10
    assert summary["inputs"]["tokenizers"][0]["name"] == "smollm2-135m"


def test_missing_annotations_stop_the_run_with_a_clear_error(golden_ws, tmp_path):
    from curate.core.errors import CurateError
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions

    with pytest.raises(CurateError, match=r"annotator 'nobody:here' has no round-1 records in this workspace; "
                                          r"annotators with records: test:synthetic \(round 1,2\)"):
        Filter(golden_ws, FilterOptions(rules=ROOT / "rules" / "goldenswag.yaml", out=tmp_path / "dec",
                                        annotator="nobody:here", tokenizer="smollm2-135m")).run()
    assert not (tmp_path / "dec").exists()

    # if_missing does not excuse an annotator without a single record: the name is wrong.
    rules = tmp_path / "r.yaml"
    rules.write_text("name: r\nstages:\n  - name: prompt\n    when: {labels: {annotator: 'nobody:here', "
                     "any: [nonsense_prompt], if_missing: no_match}}\n")
    with pytest.raises(CurateError, match="has no round-1 records"):
        Filter(golden_ws, FilterOptions(rules=rules, out=tmp_path / "dec2")).run()


def test_other_condition_kinds_and_combinators(golden_ws, tmp_path):
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions

    rules = tmp_path / "kinds.yaml"
    rules.write_text(f"""
name: kinds
defaults: {{annotator: "{ANNOTATOR}"}}
stages:
  - name: listed
    when: {{ids: {{item_id: [toy/validation/0]}}}}
  - name: near-dup-and-few-right
    when:
      all:
        - near_duplicate_options: {{threshold: 80}}
        - correct: {{models: {json.dumps(STUDY_MODELS)}, mode: zero, normalization: seq_mean, at_most: 3}}
        - not: {{any: [{{status: {{is: refused}}}}, {{answer: {{is: worst_is_gold}}}}]}}
  - name: chars-spread
    when: {{length_spread: {{unit: chars, over: options, gt: 0.5}}}}
  - name: everything-else
    when: {{field: {{name: benchmark, in: [toy]}}}}
""")
    summary = Filter(golden_ws, FilterOptions(rules=rules, out=tmp_path / "dec")).run()
    table = {s["stage"]: (s["matched"], s["removed_here"]) for s in summary["stages"]}
    # Every item has two short options that differ in one word (ratio ~82); rows 11 and 12 are
    # core items (8 of 10 right), rows 1 and 12 refused, no worst answer is the gold: stage 2
    # matches the other 10 and removes 9 (row 0 went first). Rows 8-10 have a long option but
    # are gone by stage 3; stage 4 matches everything and takes the rest (1, 11, 12).
    assert table["listed"] == (1, 1)
    assert table["near-dup-and-few-right"] == (10, 9)
    assert table["chars-spread"] == (3, 0)
    assert table["everything-else"] == (13, 3)
    assert summary["kept"] == 0


def test_a_benchmark_without_a_known_license_needs_one(golden_ws, tmp_path):
    dec = tmp_path / "dec"
    rules = tmp_path / "r.yaml"
    rules.write_text("name: r\nstages:\n  - name: first\n    when: {ids: {row_index: [0]}}\n")
    run_cli("filter", golden_ws, "--rules", rules, "--out", dec)
    args = ["release", golden_ws, "--decisions", dec, "--name", "toy", "--version", "0.1.0", "--to", tmp_path / "out"]
    refused = run_cli(*args, check=False)
    assert refused.returncode == 2 and "pass --license" in refused.stderr
    run_cli(*args, "--license", "cc-by-4.0")
    card = (tmp_path / "out" / "toy" / "0.1.0" / "README.md").read_text()
    assert card.startswith("---\nlicense: cc-by-4.0\n") and "12 of the 13 items" in card
