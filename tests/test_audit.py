"""`curate audit` end to end: the demo config on a few items, run twice; the second run does no
new work. Real local annotator and scorer (a tiny random Llama), real filter and local release."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import yaml

from conftest import HELLASWAG, run_cli, save_tiny
from curate import demo


def small_demo_config(tmp_path, n_items=6, model=None) -> "Path":
    """The demo config on ``n_items`` items; ``model`` (a local folder) replaces SmolLM2 as
    annotator, scorer and in the rules."""
    config = yaml.safe_load(demo.config_path().read_text())
    config["benchmark"]["path"] = str(demo.benchmark_path())
    config["benchmark"]["limit"] = n_items
    config["scoring"]["modes"] = ["full", "choice-only"]
    config["filter"]["rules"] = str(demo.rules_path())
    if model:
        config["annotators"] = [{**a, "annotator": f"local:{model}"} for a in config["annotators"]]
        config["scoring"]["models"] = [str(model)]
        rules = tmp_path / "rules.yaml"
        rules.write_text(demo.rules_path().read_text().replace("[smollm2-135m]", f"['{model}']"))
        config["filter"]["rules"] = str(rules)
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_audit_twice_second_run_does_no_new_work(tmp_path):
    """A seeded tiny random Llama (SmolLM2's tokenizer) annotates and scores: what is tested is
    the bookkeeping, and `make demo` runs the real SmolLM2 through every stage."""
    from scoring.models import load_tokenizer, resolve

    model = save_tiny(tmp_path / "tiny", "llama", load_tokenizer(resolve("smollm2-135m")))
    config = small_demo_config(tmp_path, n_items=6, model=model)
    first = run_cli("audit", config, cwd=tmp_path).stdout
    assert "new work   ingest, annotate r1, annotate r2, score, filter, analyze, release" in first
    released = re.search(r"ran\s+demo-clean 0\.1\.0: (\d+) of 6 items, \d+ files \+ manifest\.json -> (\S+)", first)
    assert released and "{" not in first, first  # a line, not the target's dict
    out = tmp_path / "demo-out"
    where = out.resolve()
    assert f"review     curate review {where / 'workspace'} --decisions {where / 'decisions'} --queue removed" in first
    assert (out / "report" / "report.html").is_file() and (out / "report" / "metrics.json").is_file()
    decisions = pd.read_parquet(out / "decisions" / "decisions.parquet")
    assert len(decisions) == 6
    manifest = json.loads((out / "release" / "demo-clean" / "0.1.0" / "manifest.json").read_text())
    assert manifest["kept"] == decisions.loc[decisions["kept"], "item_id"].tolist()
    db = (out / "workspace" / "workspace.db")
    before = {p.name: p.stat().st_mtime_ns for p in (out / "report").iterdir()}

    second = run_cli("audit", config, cwd=tmp_path).stdout
    assert "new work   none (everything was up to date)" in second
    assert "0 new (0 valid, 0 invalid, 0 refused), 6 already done" in second
    assert "0 item-modes computed, 12 cached" in second
    assert {p.name: p.stat().st_mtime_ns for p in (out / "report").iterdir()} == before
    assert run_cli("release", "verify", out / "release" / "demo-clean" / "0.1.0").returncode == 0
    assert db.is_file()
    check_reruns_see_changes(config, out, tmp_path)


def check_reruns_see_changes(config, out, tmp_path):
    """What a rerun must not trust (each stage called as `curate audit` calls it): decisions or
    a report rewritten by another command in the audit's folders, a human verdict edited in
    place, benchmark data or a limit other than the workspace was made from."""
    import pytest

    from curate.audit import plan
    from curate.audit.config import load_config
    from curate.audit.plan import workspace_state
    from curate.core.errors import CurateError
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions
    from curate.review.verdicts import save_verdict
    from curate.items.store import Workspace

    cfg = load_config(config, cwd=tmp_path)
    [decisions], [report] = [o.out for o in cfg.options("filter")], [o.out for o in cfg.options("analyze")]
    state = workspace_state(cfg.workspace)
    assert stage_run(cfg, "filter").status == stage_run(cfg, "analyze").status == "skipped"
    other = tmp_path / "other.yaml"  # `curate filter` with other rules into the audit's folder
    other.write_text("name: other\nstages:\n  - name: first-row\n    description: row 0\n"
                     "    when: {ids: {row_index: [0]}}\n")
    Filter(cfg.workspace, FilterOptions(rules=other, out=decisions)).run()
    redone = stage_run(cfg, "filter")  # the stage holds the folder, and Filter takes it again inside
    assert redone.status == "ran" and redone.data["rules"]["name"] == "demo"
    # Another `curate filter` into the folder just after the stage's filter returned, before its
    # fingerprint: refused (the stage holds the folder from its check to its stamp), so the stamp
    # is of the stage's own decisions; unlocked, the other run's decisions were stamped up to date.
    others = []

    from curate.filter.run import Filter

    run_alone = Filter.run

    def filter_then_another_run(stage):
        summary = run_alone(stage)
        others.append(run_cli("filter", cfg.workspace, "--rules", other, "--out", decisions, check=False))
        return summary

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Filter, "run", filter_then_another_run)
        mp.setattr(plan, "workspace_state", lambda root: "a changed workspace")
        assert stage_run(cfg, "filter").status == "ran"
    assert others[0].returncode != 0 and "another `curate filter` is writing into this folder" in others[0].stderr
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan, "workspace_state", lambda root: "a changed workspace")
        again = stage_run(cfg, "filter")
    assert again.status == "skipped" and again.data["rules"]["name"] == "demo"
    (report / "metrics.json").write_text("{}")
    assert stage_run(cfg, "analyze").status == "ran"

    with Workspace.open(cfg.workspace) as ws:
        item = ws.items()[0]
        save_verdict(ws, item, 1, "alice", {"labels": ["nonsense_prompt"]})
        first = workspace_state(cfg.workspace)
        save_verdict(ws, item, 1, "alice", {"labels": ["high_quality"]}, expected_version=1)
    assert first != state and workspace_state(cfg.workspace) != first

    assert stage_run(cfg, "ingest").status == "skipped"
    data = yaml.safe_load(config.read_text())
    moved = tmp_path / "moved.jsonl"  # the same rows elsewhere: the same data
    moved.write_bytes(Path(data["benchmark"]["path"]).read_bytes())
    for change, message in (({"path": str(moved)}, None), ({"limit": 5}, "limit 6 in the workspace, 5 in the config"),
                            ({"path": str(reordered(moved, tmp_path))}, "differs from the data")):
        changed = tmp_path / "changed.yaml"
        changed.write_text(yaml.safe_dump({**data, "benchmark": {**data["benchmark"], **change}}))
        cfg = load_config(changed, cwd=tmp_path)
        if message is None:
            assert stage_run(cfg, "ingest").status == "skipped"
        else:
            with pytest.raises(CurateError, match=message):
                stage_run(cfg, "ingest")

    afile = tmp_path / "afile"  # a release target that cannot be one says why (not "no release here")
    afile.write_text("x")
    changed.write_text(yaml.safe_dump({**data, "release": {**data["release"], "target": {"local": str(afile)}}}))
    with pytest.raises(CurateError, match="exists and is not a folder"):
        stage_run(load_config(changed, cwd=tmp_path), "release")


def stage_run(cfg, name):
    """The first outcome of the one run of stage ``name``, run as `curate audit` runs it."""
    [run] = cfg.runs_of(name)
    return run.stage.run(run, cfg)[0]


def reordered(path, tmp_path):
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    out = tmp_path / "reordered.jsonl"
    out.write_text("".join([lines[1], lines[0], *lines[2:]]), encoding="utf-8")
    return out


def test_audit_refuses_a_workspace_made_from_other_settings(tmp_path):
    config = small_demo_config(tmp_path, n_items=2)
    run_cli("init", tmp_path / "ws2", "--benchmark", "hellaswag", "--data", HELLASWAG, "--limit", "2")
    data = yaml.safe_load(config.read_text())
    data["workspace"] = str(tmp_path / "ws2")
    config.write_text(yaml.safe_dump(data))
    proc = run_cli("audit", config, cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "other benchmark settings" in proc.stderr


def test_each_annotation_round_prints_its_own_time(tmp_path, monkeypatch):
    """The stage's two rounds are timed each on its own: round 1 took 0.2 s and round 2 0.8 s (a
    stand-in annotator that sleeps), not both the stage's 1.0 s."""
    import time

    import annotate.run
    from curate.audit.run import run_audit
    from curate.audit.config import load_config

    def stand_in(stage):
        time.sleep(0.2 if stage.options.round == 1 else 0.8)
        return {"valid": 6, "invalid": 0, "refused": 0, "skipped": 0, "cost": {}}

    monkeypatch.setattr(annotate.run.Annotate, "run", stand_in)
    config = tmp_path / "audit.yaml"
    config.write_text(yaml.safe_dump({
        "workspace": str(tmp_path / "ws"),
        "benchmark": {**yaml.safe_load(demo.config_path().read_text())["benchmark"], "path": str(demo.benchmark_path()),
                      "limit": 6},
        "annotators": [{"annotator": "local:smollm2-135m", "rounds": [1, 2]}]}))
    lines = []
    run_audit(load_config(config, cwd=tmp_path), echo=lines.append)
    seconds = [float(re.search(r"\((\d+\.\d)s\)$", line).group(1)) for line in lines if "round" in line]
    assert len(seconds) == 2 and seconds[0] < 0.6 <= seconds[1] < 1.0, lines
