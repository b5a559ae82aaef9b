"""rules/zero-prompt-core.yaml on all of HellaSwag validation with the study's released scores."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from conftest import ROOT, run_cli

REFUSED_ROWS = [3648, 3760, 4307, 7001, 7423, 8135]
RELEASED = ROOT / "releases" / "hellaswag-zero-core" / "0.2.0"  # the shipped rules' release (0.1.x counted ties)


def test_zero_prompt_core_stage_marks_3963_items(paper_ws, tmp_path):
    """The shipped file's id-list and zero-prompt-core stages as they are; its two token-length
    stages are left out here only to keep this test fast (the slow test below runs them)."""
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions

    doc = yaml.safe_load((ROOT / "rules" / "zero-prompt-core.yaml").read_text())
    doc["stages"] = [s for s in doc["stages"] if s["name"] in ("study-refused", "zero-prompt-core")]
    rules = tmp_path / "core.yaml"
    rules.write_text(yaml.safe_dump(doc))
    summary = Filter(paper_ws, FilterOptions(rules=rules, out=tmp_path / "dec")).run()

    table = pd.read_csv(tmp_path / "dec" / "stages.csv")
    core = table.set_index("stage").loc["zero-prompt-core"]
    assert core["matched"] == 3963                              # the study's figure for >= 7 of 10
    refused = table.set_index("stage").loc["study-refused"]
    assert (refused["matched"], refused["removed_here"], refused["left"]) == (6, 6, 10036)
    assert core["left"] == 10036 - core["removed_here"] == summary["kept"]

    decisions = pd.read_parquet(tmp_path / "dec" / "decisions.parquet")
    assert decisions.loc[decisions["first_stage"] == "study-refused", "row_index"].tolist() == REFUSED_ROWS
    assert len(decisions) == 10042 and decisions["item_id"].is_unique
    runs = summary["inputs"]["score_runs"]
    assert len(runs) == 10 and {r["mode"] for r in runs} == {"zero"}


@pytest.mark.slow
def test_shipped_rules_and_committed_release_reproduce(paper_ws, tmp_path):
    """The whole shipped file (token lengths with the built-in smollm2-135m tokenizer, as the
    committed release was made), released and verified; the result matches releases/."""
    dec, out = tmp_path / "dec", tmp_path / "out"
    run_cli("filter", paper_ws, "--rules", ROOT / "rules" / "zero-prompt-core.yaml", "--out", dec,
            "--tokenizer", "smollm2-135m")
    table = pd.read_csv(dec / "stages.csv").set_index("stage")
    assert table.loc["zero-prompt-core", "matched"] == 3963
    assert table.loc["gold-longest", "matched"] == 1270                 # the study's stage 9 (gold alone longest)
    run_cli("release", paper_ws, "--decisions", dec, "--name", "hellaswag-zero-core", "--version", "0.2.0", "--to", out)
    folder = out / "hellaswag-zero-core" / "0.2.0"
    assert run_cli("release", "verify", folder).stdout.startswith("OK")

    made = json.loads((folder / "manifest.json").read_text())
    for released in (RELEASED,):
        committed = json.loads((released / "manifest.json").read_text())
        for key in ("rules", "stages", "counts", "kept", "removed"):
            assert made[key] == committed[key], key
        # The vocabulary that counts the tokens (tokenizer_config.json differs between transformers versions).
        assert [t["files"]["tokenizer.json"] for t in made["tokenizers"]] == \
            [t["files"]["tokenizer.json"] for t in committed["tokenizers"]]
        assert made["files"]["data/validation-00000-of-00001.parquet"] == \
            committed["files"]["data/validation-00000-of-00001.parquet"]
