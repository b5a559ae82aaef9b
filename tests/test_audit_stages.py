"""The audit is a list of stages, each one file with one class (issue 46, item 1): a stage added
to curate/audit/stages/ here, as its file would be written there, is taken by the config's
schema, the plan (what it provides meets what a filter rule reads), check-config's lines, the
schema file `make schemas` writes, and the audit's run. Real ingest, duplicate search and filter
on the demo's rows with a copy of one of them."""
from __future__ import annotations

import json

import pandas as pd
import yaml

from curate import demo
from plugin_helpers import module_in

#: A duplicate search as a stage of the audit: its section, its place, what it provides, its plan
#: line and its run, in one class.
EXAMPLE = '''
from curate.audit.stages import AuditStage, Outcome, Run, line
from curate.items.duplicates.search import Duplicates


class Step(AuditStage):
    name, section, ORDER, PROVIDES = "duplicates", "duplicates", 15, ("duplicates",)
    SCHEMA = {"description": "Copies among the workspace's items (curate duplicates).", "type": "object",
              "additionalProperties": False,
              "properties": {"threshold": {"type": "number", "minimum": 0.5, "maximum": 1}}}

    @classmethod
    def from_config(cls, section):
        return [Run(cls, section.key, Duplicates.from_config(section, splits="none", **section.values))]

    @classmethod
    def provides(cls, run, plan):
        return Duplicates.provides(run.options)

    @classmethod
    def describe(cls, runs):
        return [line("duplicates", f"within the workspace (similarity {runs[0].options.threshold})")]

    @classmethod
    def run(cls, run, config):
        found = Duplicates(config.workspace, run.options).run()
        return [Outcome("duplicates", "ran", f"{found['pairs']} pairs", found)]
'''

RULES = "name: dedup\nstages:\n  - name: copies\n    when:\n      duplicate: {scope: [within]}\n"


def config_with(tmp_path, **sections) -> "Path":
    """The demo's first 6 rows and a copy of its first (another id), filtered by RULES."""
    rows = [json.loads(line) for line in demo.benchmark_path().read_text().splitlines()[:6]]
    (tmp_path / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*rows, {**rows[0], "id": "copy"}]))
    (tmp_path / "rules.yaml").write_text(RULES)
    benchmark = {**yaml.safe_load(demo.config_path().read_text())["benchmark"], "path": "bench.jsonl"}
    config = {"workspace": "ws", "benchmark": benchmark, "filter": {"rules": "rules.yaml", "out": "decisions"},
              **sections}
    (tmp_path / "audit.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return tmp_path / "audit.yaml"


def test_an_audit_stage_is_one_class(tmp_path):
    from curate.audit import stages
    from curate.audit.config import config_problems, describe, load_config, read_yaml
    from curate.audit.plan import plan_problems, plan_summary
    from curate.audit.run import run_audit
    from curate.schema_files import AUDIT, expected, stale

    # without the stage: its section is an unknown key, and the rule's input is a gap the plan names
    plain = load_config(config_with(tmp_path), cwd=tmp_path)
    assert plan_problems(plain) == [("filter.rules", "stage 'copies' of rules.yaml read duplicates, which the "
                                                     "workspace does not hold and no planned stage provides")]
    config = config_with(tmp_path, duplicates={"threshold": 0.95})
    assert config_problems(read_yaml(config))[0][0] == "duplicates"

    with module_in(stages, "duplicates", EXAMPLE, tmp_path / "added"):
        cfg = load_config(config, cwd=tmp_path)
        assert [line.split()[0] for line in describe(cfg)] == ["workspace", "ingest", "duplicates", "filter"]
        assert "duplicates within the workspace (similarity 0.95)" in describe(cfg)
        assert plan_problems(cfg) == [] and plan_summary(cfg).startswith("plan complete")
        assert stale() == [AUDIT]  # `make schemas` writes its section into the schema file
        assert json.loads(expected()[AUDIT])["properties"]["duplicates"]["properties"]["threshold"]["maximum"] == 1
        lines = []
        outcomes = run_audit(cfg, echo=lines.append)
        assert [(o.stage, o.status) for o in outcomes] == [("ingest", "ran"), ("duplicates", "ran"),
                                                           ("filter", "ran")], lines
        assert "\x1b[1m[2/3] duplicates\x1b[0m" in lines and outcomes[1].detail == "1 pairs"
    decisions = pd.read_parquet(tmp_path / "decisions" / "decisions.parquet")
    assert decisions.loc[~decisions["kept"], "item_id"].tolist() == ["demo/validation/6"]  # the copy
    assert stale() == []
    # the search the stage ran is held now: the plan needs no stage to provide it
    assert plan_problems(load_config(config_with(tmp_path), cwd=tmp_path)) == []
