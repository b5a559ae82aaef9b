"""``filter``: the rules applied to the workspace (``curate.filter.run.Filter``), the decisions
written to ``out``. Skipped when neither the workspace nor the rules and settings changed since
the decisions there were made (``curate.audit.fingerprints``). It runs before the analysis, so
the report counts what it removes. What the rules read is what the plan checks every other stage
provides: each condition kind declares it (``curate.filter.kinds``)."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from curate.audit.stages import AuditStage, Need, Outcome, Run, line
from curate.filter.run import Filter


class RuleNeed(NamedTuple):
    """What one stage of a rules file reads: (kind, what) as its condition kind declares it."""
    stage: str
    kind: str
    what: tuple


def rule_needs(rules: dict, default_formulation: str = "cloze") -> list[RuleNeed]:
    """What the rules read, stage by stage (``curate.filter.conditions.needs``); a score read in
    no named formulation is in ``default_formulation``."""
    from curate.filter.conditions import needs

    return [RuleNeed(stage["name"], kind, what) for stage in rules["stages"]
            for kind, what in needs(stage["when"], default_formulation=default_formulation)]


def given(o) -> dict:
    """The rules' defaults the config overrides (annotator, tokenizer)."""
    return {k: v for k, v in (("annotator", o.annotator), ("tokenizer", o.tokenizer)) if v is not None}


class Step(AuditStage):
    name, section, ORDER, reads = "filter", "filter", 50, True

    @classmethod
    def check(cls, section: dict, config: dict) -> list[tuple[str, str]]:
        """The annotator the rules read must be one this audit runs (a reviewer's verdicts,
        human:NAME, come from `curate review`, never from a planned stage)."""
        from curate.audit.stages.annotate import canonical

        wanted = section.get("annotator")
        named = [a["annotator"] for a in config.get("annotators") or []]
        if wanted and named and canonical(wanted) not in map(canonical, named) and not wanted.startswith("human:"):
            return [("filter.annotator", f"{wanted!r} is not one of this audit's annotators ({', '.join(named)})")]
        return []

    @classmethod
    def from_config(cls, section) -> list[Run]:
        return [Run(cls, section.key, Filter.from_config(section))]

    @classmethod
    def needs(cls, run: Run, plan) -> list[Need]:
        """One need per input the rules read, naming every stage of the rules that reads it."""
        from curate.filter.rules import load_rules

        o = run.options
        rules = plan.once(("rules", run.key), lambda: load_rules(o.rules, **given(o)))
        readers: dict[tuple[str, tuple], list[str]] = {}
        for need in rule_needs(rules, plan.default_formulation):
            readers.setdefault((need.kind, need.what), []).append(need.stage)
        keys = {"annotation": f"{cls.section}.annotator" if o.annotator else None,
                "tokenizer": f"{cls.section}.tokenizer" if o.tokenizer else None}
        return [Need(kind, what, f"stage{'s' * (len(names) > 1)} {', '.join(map(repr, dict.fromkeys(names)))} of "
                                 f"{Path(o.rules).name}", cls.name, keys.get(kind), f"{cls.section}.rules")
                for (kind, what), names in readers.items()]

    @classmethod
    def inputs(cls, run: Run, config) -> list[tuple[str, Path]]:
        return [(f"{cls.section}.rules", run.options.rules)]

    @classmethod
    def outputs(cls, run: Run, config) -> list[tuple[str, Path]]:
        return [(f"{cls.section}.out", run.options.out)]

    @classmethod
    def refused(cls, run: Run, key: str, folder: Path, config) -> str | None:
        from curate.filter.run import check_out_dir

        check_out_dir(folder)
        return None

    @classmethod
    def describe(cls, runs: list[Run]) -> list[str]:
        o = runs[0].options
        return [line("filter", f"{o.rules} -> {o.out}" + "".join(f", {k} {v}" for k, v in given(o).items()))]

    @classmethod
    def run(cls, run: Run, config) -> list[Outcome]:
        from curate.audit.fingerprints import recompute
        from curate.core.reading import read_json
        from curate.items.sources import file_sha256

        o = run.options
        ran, summary = recompute("filter", o.out, config.workspace, {"rules": file_sha256(o.rules), **given(o)},
                                 lambda: Filter(config.workspace, o).run(),
                                 kept=lambda: read_json(o.out / "summary.json", "a decisions summary"))
        if not ran:
            return [Outcome("filter", "skipped", f"decisions up to date in {o.out}", summary)]
        return [Outcome("filter", "ran", f"decisions in {o.out}", summary)]

    @classmethod
    def summary(cls, runs: list[Run], outcomes: list[Outcome], config) -> list[str]:
        o, lines = runs[0].options, []
        done = next((x for x in outcomes if x.stage in (cls.name,)), None)
        if done and done.data.get("stages"):
            lines.append(line("filter", "stage                               matched  removed     left"))
            for row in done.data["stages"]:
                lines.append(" " * 11 + f"{row['stage']:<34}{row['matched']:>8}{row['removed_here']:>9}{row['left']:>9}")
        return lines + [line("decisions", str(o.out / "decisions.parquet")),
                        line("review", f"curate review {config.workspace} --decisions {o.out} --queue removed "
                                       "--reviewer NAME   (then open http://127.0.0.1:8000/)")]
