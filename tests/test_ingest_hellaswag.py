"""HellaSwag ingest on the real validation split, checked against lm-evaluation-harness."""
from __future__ import annotations

import collections
import json

import pytest

from conftest import HELLASWAG, run_cli
from curate.items.canonical import MODES, PLACEHOLDER, validation_errors
from curate.items.store import Workspace


def test_counts_and_sources(hellaswag_ws):
    with Workspace.open(hellaswag_ws) as ws:
        items = ws.items()
    assert len(items) == 10042
    assert collections.Counter(it["source"] for it in items) == {"activitynet": 3243, "wikihow": 6799}
    assert [it["row_index"] for it in items] == list(range(10042))
    assert len({it["item_id"] for it in items}) == 10042
    assert all(not validation_errors(it) for it in items[:500])


def test_matches_lm_eval_preprocessing_on_every_item(hellaswag_ws):
    """Full-mode query and options equal lm-eval 0.4.13's hellaswag task, character for character."""
    import datasets
    from lm_eval.tasks.hellaswag import utils as harness

    docs = harness.process_docs(datasets.load_dataset("json", data_files=str(HELLASWAG), split="train"))
    with Workspace.open(hellaswag_ws) as ws:
        items = ws.items()
    assert len(docs) == len(items) == 10042
    for doc, item in zip(docs, items):
        assert item["prompts"]["full"] == doc["query"], item["item_id"]
        assert item["options"] == doc["choices"], item["item_id"]
        assert item["gold"] == doc["gold"], item["item_id"]


def test_prompt_modes_of_one_item(hellaswag_ws):
    with Workspace.open(hellaswag_ws) as ws:
        first = ws.items()[0]
    assert first["native_ids"] == {"ind": 24, "source_id": "activitynet~v_-JhWjGDPHMY", "split_type": "indomain"}
    assert first["prompts"] == {
        "full": "Roof shingle removal: A man is sitting on a roof. He",
        "zero": "He",
        "placeholder": PLACEHOLDER + "He",
        "choice-only": "",
    }
    assert set(first["prompts"]) == set(MODES)
    assert first["gold"] == 3 and first["options"][3] == "starts pulling up roofing on a roof."


def test_wikihow_tags_removed(hellaswag_ws):
    with Workspace.open(hellaswag_ws) as ws:
        wikihow = [it for it in ws.items() if it["source"] == "wikihow"]
    tagged = [it for it in wikihow if "[step]" in it["prompts"]["full"] or any("[step]" in o for o in it["options"])]
    assert not tagged
    # A few texts keep a lone "[" that is no tag (e.g. 'tap the " [" button'): as the harness does.
    assert sum("[" in " ".join(it["options"]) for it in wikihow) < 10
    assert sum(it["prompts"]["zero"] == "" for it in wikihow) > 1000  # ctx_b is often empty


def test_raw_rows_kept_verbatim(hellaswag_ws):
    import gzip
    with gzip.open(HELLASWAG, "rt", encoding="utf-8") as fh:
        first = json.loads(fh.readline())
    with Workspace.open(hellaswag_ws) as ws:
        assert ws.raw_rows()[0] == first


def test_cli_init_info_and_exports(tmp_path):
    ws = tmp_path / "ws"
    out = run_cli("init", ws, "--benchmark", "hellaswag", "--data", HELLASWAG, "--limit", "25").stdout
    assert "25 items" in out
    info = run_cli("info", ws).stdout
    assert "hellaswag" in info and "sha256:" in info and "items" in info
    run_cli("items", ws, "--out", tmp_path / "items.parquet")
    run_cli("items", ws, "--out", tmp_path / "items.jsonl")
    import pandas as pd
    frame = pd.read_parquet(tmp_path / "items.parquet")
    assert len(frame) == 25 and frame["item_id"].iloc[3] == "hellaswag/validation/3"
    lines = (tmp_path / "items.jsonl").read_text().splitlines()
    assert json.loads(lines[3])["item_id"] == "hellaswag/validation/3"


def test_workspace_records_provenance(hellaswag_ws):
    with Workspace.open(hellaswag_ws) as ws:
        src = ws.meta("source")
    assert src["kind"] == "local" and src["format"] == "json"
    assert src["sha256"].startswith("sha256:") and src["path"].endswith("validation.jsonl.gz")


@pytest.mark.parametrize("mode", MODES)
def test_content_hash_covers_scored_text(hellaswag_ws, mode):
    from curate.items.canonical import content_hash
    with Workspace.open(hellaswag_ws) as ws:
        item = ws.items()[5]
    changed = dict(item["prompts"], **{mode: item["prompts"][mode] + "x"})
    assert content_hash(changed, item["options"], item["gold"]) != item["content_hash"]
    assert content_hash(item["prompts"], item["options"], item["gold"]) == item["content_hash"]
