"""Every release carries croissant.json (curate/release/croissant.py), validated here by the
Croissant reference library, mlcroissant: no error, no warning, and its records read back
through it are the released rows. Its Responsible AI fields carry the source, the filter stages
with their counts and the annotators; no secret reaches it."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from conftest import HELLASWAG, SHARED

RULES = """
name: two-stages
stages:
  - name: listed-rows
    description: rows named by index
    when: {ids: {row_index: [1, 2]}}
  - name: more-rows
    description: rows named again
    when: {ids: {row_index: [2, 3]}}
"""
SECRET = "sk-ant-croissant-test-0123456789"


def first_rows(path: Path, n: int, out: Path) -> Path:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [line for line, _ in zip(fh, range(n))]
    out.write_text("".join(rows))
    return out


def release(base: Path, benchmark: str, data: Path, name: str, rules: str = RULES) -> Path:
    from curate.items.adapters import get_adapter
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from curate.release import Release
    from curate.release.options import ReleaseOptions

    (base / "rules.yaml").write_text(rules)
    ws = Ingest(base / f"ws-{name}", IngestOptions(data=str(data)), get_adapter(benchmark)).run()
    Filter(ws, FilterOptions(rules=base / "rules.yaml", out=base / f"dec-{name}")).run()
    Release(ws, ReleaseOptions(decisions=base / f"dec-{name}", name=name, version="0.1.0", to=str(base / "out"))).run()
    return base / "out" / name / "0.1.0"


def validated(folder: Path):
    """The release's Croissant dataset as mlcroissant reads it: errors raise, warnings fail."""
    import mlcroissant as mlc
    dataset = mlc.Dataset(jsonld=folder / "croissant.json")
    assert not dataset.metadata.ctx.issues.warnings, dataset.metadata.ctx.issues.report()
    return dataset


@pytest.fixture(scope="module")
def hs(tmp_path_factory):
    base = tmp_path_factory.mktemp("croissant")
    return release(base, "hellaswag", first_rows(HELLASWAG, 6, base / "hs.jsonl"), "hs-small")


def test_croissant_validates_and_reads_back_the_released_rows(hs):
    import pandas as pd

    from curate.release import verify_release

    records = list(validated(hs).records(record_set="validation"))
    data = pd.read_parquet(hs / "data" / "validation-00000-of-00001.parquet")
    assert [r["validation/ind"] for r in records] == data["ind"].tolist()
    assert [[e.decode() for e in r["validation/endings"]] for r in records] == data["endings"].map(list).tolist()
    manifest = json.loads((hs / "manifest.json").read_text())
    assert "croissant.json" in manifest["files"] and manifest["formats"]["croissant"] == "croissant.json"
    assert verify_release(str(hs)) == []


def test_croissant_carries_provenance_stages_and_counts(hs):
    doc = json.loads((hs / "croissant.json").read_text())
    manifest = json.loads((hs / "manifest.json").read_text())
    assert doc["conformsTo"] == "http://mlcommons.org/croissant/1.0"
    assert doc["version"] == "0.1.0" and doc["license"] == "mit"
    assert doc["isBasedOn"] == "https://huggingface.co/datasets/Rowan/hellaswag"
    assert "zellers2019hellaswag" in doc["citeAs"]
    assert manifest["source"]["provenance"]["sha256"] in doc["rai:dataCollectionRawData"]
    assert doc["rai:dataPreprocessingProtocol"] == [
        "start: 6 items",
        "stage 1 listed-rows (rows named by index): matched 2, removed here 2, left 4",
        "stage 2 more-rows (rows named again): matched 2, removed here 1, left 3"]
    assert doc["distribution"][0]["sha256"] == manifest["files"]["data/validation-00000-of-00001.parquet"]["sha256"][7:]
    assert "rai:dataAnnotationProtocol" not in doc  # these rules read no annotation
    card = (hs / "README.md").read_text()  # the card's stage table says the same
    assert "| | start | | | | 6 |\n| 1 | listed-rows | rows named by index | 2 | 2 | 4 |\n" \
           "| 2 | more-rows | rows named again | 2 | 1 | 3 |\n" in card


def test_annotators_and_models_the_rules_read_are_named(hs):
    """The annotation fields come from the manifest's annotators and scoring runs."""
    from curate.release.croissant import croissant

    manifest = json.loads((hs / "manifest.json").read_text())
    manifest["annotators"] = [{"annotator": "claude-sonnet-4-5", "round": 1, "records": 6,
                               "model_snapshots": ["claude-sonnet-4-5-20250929"], "prompt_versions": ["v3"]}]
    manifest["scoring_runs"] = [{"run_id": "r1", "model": "smollm2-135m"}]
    doc = croissant(manifest, hs, "data/validation-00000-of-00001.parquet")
    assert doc["rai:dataAnnotationProtocol"] == [
        "annotator claude-sonnet-4-5 round 1: 6 records; model snapshots claude-sonnet-4-5-20250929; prompt versions v3"]
    assert doc["rai:machineAnnotationTools"] == ["claude-sonnet-4-5", "smollm2-135m"]


def test_nested_columns_validate_and_read_back(tmp_path):
    """ARC's choices column is a struct of two lists: one sub-field each."""
    data = first_rows(SHARED / "benchmarks" / "arc_challenge" / "validation.jsonl.gz", 4, tmp_path / "arc.jsonl")
    folder = release(tmp_path, "arc_challenge", data, "arc-small", RULES.split("  - name: more-rows")[0])
    records = list(validated(folder).records(record_set="validation"))
    assert len(records) == 2
    assert [t.decode() for t in records[0]["validation/choices"]["validation/choices/text"]] == \
        json.loads(data.read_text().splitlines()[0])["choices"]["text"]


def test_no_secret_reaches_croissant(tmp_path, monkeypatch):
    """A key in the environment, written into a stage's description, is redacted."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    rules = RULES.replace("description: rows named by index", f"description: rows named by {SECRET}")
    folder = release(tmp_path, "hellaswag", first_rows(HELLASWAG, 4, tmp_path / "hs.jsonl"), "hs-secret", rules)
    text = (folder / "croissant.json").read_text()
    assert SECRET not in text and "rows named by [redacted]" in text
    validated(folder)
