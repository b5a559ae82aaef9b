"""The GoldenSwag example, examples/audit/hellaswag-claude.yaml, end to end: `curate check-config`
reports the plan complete, then `curate audit` ingests HellaSwag, annotates both rounds with
Claude through the Message Batches API, imports the study's scores of its ten models, analyzes,
applies the study's ten stages and releases to the Hub; `curate release verify` checks what the
Hub serves, and a second run does no new work.

What differs from the example as committed (nothing else is changed):
- ``benchmark``: the local copy of HellaSwag validation (../shared/data) instead of the Hub id,
  which cannot be reached from tests; the CI variant takes its first 300 rows (``limit``) and
  the first 300 rows of each study file, the slow one all 10042;
- ``filter.rules`` and ``scoring.imports[0].dir`` made absolute (the config is copied to a
  temporary folder), output paths left as they are, under that folder;
- the endpoints: ANTHROPIC_BASE_URL points at tests/standin_anthropic.py (llm-katan has no
  Message Batches API) and HF_ENDPOINT at tests/hub_standin.py.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from annotate.prompts import render_item
from annotate_helpers import KEY
from conftest import HELLASWAG, PAPER_SCORES, ROOT, run_cli
from curate.items.store import Workspace
from standin_anthropic import StandIn

EXAMPLE = ROOT / "examples" / "audit" / "hellaswag-claude.yaml"
ANNOTATOR = "anthropic:claude-sonnet-4-6"


@pytest.fixture
def hub():
    from hub_standin import running

    with running() as (fake, env):
        yield fake, env


def study_scores(tmp_path, rows: int | None):
    """The study's score files, or copies of their first ``rows`` rows."""
    if rows is None:
        return PAPER_SCORES
    out = tmp_path / "paper-scores"
    for src in sorted(PAPER_SCORES.glob("*/*.csv")):
        dst = out / src.parent.name / src.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        with src.open() as fh:
            dst.write_text("".join(next(fh) for _ in range(rows + 1)))
    return out


def example_config(tmp_path, rows: int | None):
    data = yaml.safe_load(EXAMPLE.read_text())
    assert data["benchmark"].pop("hub") == "Rowan/hellaswag"
    data["benchmark"].pop("revision")
    data["benchmark"]["path"] = str(HELLASWAG)
    if rows:
        data["benchmark"]["limit"] = rows
    data["scoring"]["imports"][0]["dir"] = str(study_scores(tmp_path, rows))
    data["filter"]["rules"] = str((EXAMPLE.parent / data["filter"]["rules"]).resolve())
    path = tmp_path / "hellaswag-claude.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, data


def zero_core_reference(rows: int | None) -> np.ndarray:
    """Straight from the study's CSVs: the items at least 7 of the 10 models get right in zero
    mode (argmax of the released scores), independently of the toolkit's import and filter."""
    gold = pd.read_json(HELLASWAG, lines=True)["label"].to_numpy()
    right = sum((pd.read_csv(f).to_numpy().argmax(axis=1) == gold).astype(int)
                for f in sorted((PAPER_SCORES / "zero_prompt").glob("*.csv")))
    return (right >= 7)[:rows] if rows else right >= 7


def test_example_check_config_names_the_placeholder_to_fill_in(tmp_path):
    """The example as committed pins no revision yet (`<COMMIT-SHA>`): check-config says so
    rather than "plan complete" (tests/test_check_config_spend.py checks the rest). Run from a
    folder of its own: the example's outputs are relative to where curate runs, and a checkout
    may hold what a user's run of it left there."""
    proc = run_cli("check-config", EXAMPLE, env={"HF_HUB_OFFLINE": "1", "ANTHROPIC_API_KEY": KEY,
                                                 "HF_TOKEN": "hf_unused"}, cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "plan complete" not in proc.stdout
    assert proc.stderr.startswith("note: cannot check offline: benchmark.hub 'Rowan/hellaswag'")
    assert f"error: {EXAMPLE}, field 'benchmark.revision': '<COMMIT-SHA>' is a placeholder" in proc.stderr


def run_example(tmp_path, hub, rows):
    fake, hub_env = hub
    config, data = example_config(tmp_path, rows)
    with StandIn(polls_before_end=0) as claude:
        env = {**hub_env, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": claude.url}
        check = run_cli("check-config", config, env=env, cwd=tmp_path)
        assert check.stdout.strip().splitlines()[-1].startswith("plan complete")
        first = run_cli("audit", config, env=env, cwd=tmp_path)
        second = run_cli("audit", config, env=env, cwd=tmp_path)
        sent = sum(len(b["requests"]) for b in claude.batches.values())
    n = rows or 10042
    assert "new work   ingest, annotate r1, annotate r2, score, filter, analyze, release" in first.stdout
    assert "new work   none (everything was up to date)" in second.stdout
    assert f"0 new (0 valid, 0 invalid, 0 refused), {n} already done" in second.stdout
    assert "already imported" in second.stdout and sent == 2 * n  # one request per item and round

    verify = run_cli("release", "verify", "hf:your-org/goldenswag", "--name", "goldenswag", "--version", "1.0.0",
                     env=hub_env)
    assert verify.stdout.startswith("OK")
    repo = fake.repos["your-org/goldenswag"]
    manifest = json.loads(repo["commits"][repo["tags"]["goldenswag-v1.0.0"]]["manifest.json"])

    decisions = pd.read_parquet(tmp_path / data["filter"]["out"] / "decisions.parquet")
    stages = pd.read_csv(tmp_path / data["filter"]["out"] / "stages.csv").set_index("stage")
    assert len(decisions) == n and manifest["kept"] == decisions.loc[decisions["kept"], "item_id"].tolist()
    # The stand-in answers round 2 with the gold as best and nothing equally good, and marks
    # round-1 prompts with " ," ungrammatical: the annotation stages count exactly those.
    assert stages.loc["best-not-gold", "matched"] == stages.loc["equally-good", "matched"] == 0
    with Workspace.open(tmp_path / data["workspace"]) as ws:
        flagged = sum(" ," in render_item(it, 1) for it in ws.items())
    assert stages.loc["prompt-quality", "matched"] == flagged > 0
    core = zero_core_reference(rows)
    assert stages.loc["zero-prompt-core", "matched"] == core.sum()
    assert stages.loc["zero-prompt-core", "left"] == decisions["kept"].sum()
    return stages, manifest


def test_goldenswag_example_end_to_end_on_300_rows(tmp_path, hub):
    stages, manifest = run_example(tmp_path, hub, rows=300)
    assert manifest["name"] == "goldenswag" and len(manifest["kept"]) == stages["left"].iloc[-1]


@pytest.mark.slow
def test_goldenswag_example_end_to_end_on_all_rows(tmp_path, hub):
    stages, _ = run_example(tmp_path, hub, rows=None)
    print(stages.to_string())
