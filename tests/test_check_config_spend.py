"""`curate check-config` names, before anything is spent, what would stop an audit after it had
paid for Claude's rounds: a placeholder left in the config, a missing API key or Hub token, score
imports whose rows cannot match the items the ingest makes; and where it cannot know (the Hub
unreachable) it says "cannot check offline" instead of "plan complete" (issue 37, item 3).

Real data: HellaSwag validation and the study's score files from ../shared/data, lm-eval's own
sample logs (tests/fixtures/lm_eval_samples/).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from annotate_helpers import KEY, free_port
from conftest import HELLASWAG, PAPER_SCORES, ROOT, run_cli
from curate.audit.config import read_yaml

EXAMPLES = ROOT / "examples" / "audit"
CLAUDE = EXAMPLES / "hellaswag-claude.yaml"
LOCAL = EXAMPLES / "hellaswag-local.yaml"
FIXTURE_RUN = ROOT / "tests" / "fixtures" / "lm_eval_samples" / "SmolLM2-135M"
PINNED = "6002345709e0801764318f06bf06ce1e7d1a1fe3"  # a commit id of the right shape
#: No key, no Hub token, the Hub offline (the default here, set again to be sure).
BARE = {"ANTHROPIC_API_KEY": "", "HF_TOKEN": "", "HF_HUB_OFFLINE": "1"}
#: What a user about to run the example has: both keys.
KEYS = {"ANTHROPIC_API_KEY": KEY, "HF_TOKEN": "hf_unused", "HF_HUB_OFFLINE": "1"}


def errors(proc) -> dict[str, str]:
    """field -> message of each `error:` line."""
    out = {}
    for line in proc.stderr.splitlines():
        if line.startswith("error: "):
            field, _, message = line.partition(", field '")[2].partition("': ")
            out[field] = message
    return out


def claude_example(tmp_path, change) -> "Path":
    """hellaswag-claude.yaml with its input paths absolute, changed by ``change``, in tmp_path."""
    data = read_yaml(CLAUDE)
    data["filter"]["rules"] = str((CLAUDE.parent / data["filter"]["rules"]).resolve())
    data["scoring"]["imports"][0]["dir"] = str(PAPER_SCORES)
    change(data)
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def local_data(limit=None):
    def change(data):
        del data["benchmark"]["hub"], data["benchmark"]["revision"]
        data["benchmark"]["path"] = str(HELLASWAG)
        if limit:
            data["benchmark"]["limit"] = limit
    return change


def test_the_claude_example_as_shipped_is_not_complete(tmp_path):
    """Found: "plan complete" for the flagship one-liner with `revision: <COMMIT-SHA>`, no
    ANTHROPIC_API_KEY and the Hub offline; `curate audit` then retried for 25 s and failed."""
    proc = run_cli("check-config", CLAUDE, env=BARE, check=False, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    found = errors(proc)
    assert found["benchmark.revision"].startswith("'<COMMIT-SHA>' is a placeholder"), found
    assert "ANTHROPIC_API_KEY" in found["annotators[0].annotator"], found
    assert "HF_TOKEN" in found["release.target.hub"], found
    assert "plan complete" not in proc.stdout + proc.stderr
    # With the placeholder filled in and both keys set, the Hub still cannot be reached from here.
    pinned = claude_example(tmp_path, lambda data: data["benchmark"].update(revision=PINNED))
    offline = run_cli("check-config", pinned, env=KEYS, check=False, cwd=tmp_path)
    assert offline.returncode == 1 and not errors(offline), offline.stderr
    assert "cannot check offline: benchmark.hub 'Rowan/hellaswag'" in offline.stdout, offline.stdout
    assert "plan complete" not in offline.stdout
    assert offline.stdout.strip().splitlines()[-1].startswith("plan not fully checked")


def test_an_unreachable_hub_is_named_not_complete(tmp_path):
    """HF_HUB_OFFLINE unset, but nothing answers at the Hub's address: the same, at once."""
    pinned = claude_example(tmp_path, lambda data: data["benchmark"].update(revision=PINNED))
    env = {**KEYS, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    proc = run_cli("check-config", pinned, env=env, check=False, cwd=tmp_path)
    assert proc.returncode == 1 and not errors(proc), proc.stderr
    assert "cannot check offline: benchmark.hub 'Rowan/hellaswag' (the Hub cannot be reached: " in proc.stdout, \
        proc.stdout
    # the study's files cannot be counted against items that are not known yet
    assert "cannot check offline: scoring.imports[0].dir" in proc.stdout


def test_study_csvs_that_cannot_match_a_limit_are_refused_before_anything_is_spent(tmp_path):
    """Found: `benchmark.limit: 300` with the study's CSVs (10042 rows) passed check-config and
    failed at the score stage ("has 10042 rows but the workspace has 300 items") after both
    annotation rounds ran: with real Claude, money spent before a refusal."""
    path = claude_example(tmp_path, local_data(limit=300))
    proc = run_cli("check-config", path, env=KEYS, check=False, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    found = errors(proc)
    assert list(found) == ["scoring.imports[0].dir"], proc.stderr
    message = found["scoring.imports[0].dir"]
    assert "has 10042 rows" in message and "300 items (benchmark.limit 300)" in message, message
    assert "and 29 more files" in message, message
    # `curate audit` refuses it before its first stage: no workspace, no request.
    audit = run_cli("audit", path, cwd=tmp_path, check=False,
                    env={**KEYS, "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{free_port()}"})
    assert audit.returncode == 2 and errors(audit) == found, audit.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.yaml"]
    # all 10042 rows: they match
    whole = claude_example(tmp_path, local_data())
    assert run_cli("check-config", whole, env=KEYS, cwd=tmp_path).stdout.strip().splitlines()[-1].startswith("plan complete")


def test_lm_eval_samples_of_more_items_than_the_ingest_makes(tmp_path):
    """lm-eval's log of 50 HellaSwag documents against an audit of the first 20: 30 samples
    match no item, which the import would refuse after the annotation."""
    run = tmp_path / "lm-eval" / "SmolLM2-135M"
    run.mkdir(parents=True)
    for f in [*FIXTURE_RUN.glob("results_*.json"), *FIXTURE_RUN.glob("samples_hellaswag_*")]:
        shutil.copy(f, run / f.name)
    path = tmp_path / "audit.yaml"
    config = {"workspace": "ws", "benchmark": {"adapter": "hellaswag", "path": str(HELLASWAG), "limit": 20},
              "scoring": {"imports": [{"format": "lm-eval-samples", "dir": str(tmp_path / "lm-eval")}]}}
    path.write_text(yaml.safe_dump(config))
    proc = run_cli("check-config", path, cwd=tmp_path, env=KEYS, check=False)
    assert proc.returncode == 2, proc.stderr
    message = errors(proc)["scoring.imports[0].dir"]
    assert "holds 50 samples" in message and "20 items (benchmark.limit 20)" in message, message
    config["benchmark"]["limit"] = 50
    path.write_text(yaml.safe_dump(config))
    assert "plan complete" in run_cli("check-config", path, cwd=tmp_path, env=KEYS).stdout


def test_the_shipped_local_variant_checks_complete_offline(tmp_path):
    """examples/audit/hellaswag-local.yaml: the flagship on ../shared/data, released into a local
    folder. With ANTHROPIC_API_KEY it checks complete with the Hub offline; without, the key is
    its one problem. Its plan reads no Hub."""
    from curate.audit.config import describe, load_config
    from curate.audit.plan import plan_problems

    proc = run_cli("check-config", LOCAL, cwd=tmp_path, env={**KEYS, "HF_TOKEN": ""})
    assert proc.stdout.strip().splitlines()[-1] == (
        "plan complete: every input the rules read will exist after the planned stages "
        "(annotator rounds: 2; model x mode x normalization: 10; tokenizers: 1)")
    assert "<" not in LOCAL.read_text().split("\nworkspace:")[1]  # no placeholder to fill in
    bare = run_cli("check-config", LOCAL, cwd=tmp_path, env=BARE, check=False)
    assert bare.returncode == 2 and list(errors(bare)) == ["annotators[0].annotator"], bare.stderr
    cfg = load_config(LOCAL, cwd=tmp_path)
    plan = describe(cfg)
    assert plan[1] == f"ingest     hellaswag: {HELLASWAG.resolve()} (split validation)"
    assert plan[-1] == f"release    goldenswag 1.0.0 -> local {tmp_path / 'goldenswag-release'}"
    assert plan_problems(cfg) == [] and cfg.options("score")[0].dir == PAPER_SCORES.resolve()


def test_a_hub_dataset_the_hub_does_not_have_is_a_problem(tmp_path):
    """Online (tests/hub_standin.py as the Hub): a dataset id the Hub does not know is named
    before anything runs, not when the ingest fails."""
    from hub_standin import running

    path = claude_example(tmp_path, lambda data: data["benchmark"].update(hub="nobody/no-such-set", revision=PINNED))
    with running() as (_, hub_env):
        proc = run_cli("check-config", path, env={**hub_env, "ANTHROPIC_API_KEY": KEY}, check=False, cwd=tmp_path)
    assert proc.returncode == 2 and "cannot check offline" not in proc.stdout + proc.stderr, proc.stderr
    assert errors(proc) == {"benchmark.hub": "the Hub has no dataset nobody/no-such-set (or it is private, and no "
                                             "token here has access)"}, proc.stderr


def test_the_audit_counts_the_imports_again_right_after_its_ingest(tmp_path):
    """Where the item count is known only once the data is read (a Hub dataset), the audit
    checks the imports right after its ingest: it stops there, before the annotation."""
    from curate.audit.run import run_audit
    from curate.audit.config import load_config

    cfg = load_config(claude_example(tmp_path, local_data(limit=5)), cwd=tmp_path)
    lines = []
    outcomes = run_audit(cfg, echo=lines.append)  # what `curate audit` runs after its own check
    assert [(o.stage, o.status) for o in outcomes] == [("ingest", "ran"), ("score", "stopped")], lines
    assert "field 'scoring.imports[0].dir': cannot match the items: " in outcomes[-1].detail
    assert "has 10042 rows, one per item in row order (and 29 more files), but the workspace holds 5 items" \
        in outcomes[-1].detail, outcomes[-1].detail
    assert not any("annotate" in line for line in lines)
