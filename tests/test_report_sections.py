"""Report sections are one module each (curate/analyses/sections/): the report runs, numbers and
renders them in their order, and a new section is one new file."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import small_workspace
from plugin_helpers import module_in

#: A section written as a newcomer would, in one file: items per option count, with a CSV of them.
EXAMPLE_SECTION = '''
"""option_counts: how many items have each number of options."""
import pandas as pd

ORDER = 75  # after the position audit
ABOUT = {"option_counts": "rows (options, items): how many items have each number of options"}
FILES = (r"option_counts\\.csv",)


def compute(ctx):
    rows = pd.Series([len(it["options"]) for it in ctx.items]).value_counts().sort_index()
    table = pd.DataFrame({"options": rows.index, "items": rows.to_numpy()})
    table.to_csv(ctx.out / "option_counts.csv", index=False)
    return {"option_counts": table.to_dict("records")}


def render(m, number, out):
    return [("h2", f"{number}. Option counts"), ("table", pd.DataFrame(m["option_counts"]))]
'''


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """12 real items; seeded random scores of two models in two modes (a test double for scoring)."""
    from scoring.store import add_run, open_scores, write_scores

    root = small_workspace(tmp_path_factory.mktemp("sections") / "ws", 12)
    rng = np.random.default_rng(0)
    with open_scores(root) as w, w.transaction():
        items = w.items()
        for model in ("m/a", "m/b"):
            for mode in ("full", "zero"):
                run_id = f"t-{model}-{mode}"
                add_run(w, run_id=run_id, model=model, origin="imported:test", info={})
                write_scores(w, [{"model": model, "mode": mode, "item_id": it["item_id"], "option_index": j,
                                  "content_hash": it["content_hash"], "run_id": run_id,
                                  "seq_mean": float(rng.normal())} for it in items for j in range(4)])
    return root


@pytest.fixture
def example_section(tmp_path):
    """option_counts.py in a second folder of the sections package, as if written into it."""
    from curate.analyses import sections

    with module_in(sections, "option_counts", EXAMPLE_SECTION, tmp_path / "more-sections"):
        yield


def headings(out) -> list[str]:
    return [line for line in (out / "report.md").read_text().splitlines() if line.startswith("## ")]


def test_a_new_report_section_is_one_new_file(example_section, ws, tmp_path):
    """The example section's one file is all it takes: computed in its place, its metrics and
    their description in metrics.json, rendered with its number, its file replaced by the next run."""
    from curate.analyses.report import Analyze
    from curate.analyses.options import AnalyzeOptions

    out = tmp_path / "report"
    metrics = Analyze(ws, AnalyzeOptions(out=out, n_resamples=100)).run()
    assert metrics["option_counts"] == [{"options": 4, "items": 12}]
    assert json.loads((out / "metrics.json").read_text())["about"]["option_counts"].startswith("rows (options, items)")
    assert headings(out)[-2:] == ["## 8. Position audit", "## 9. Option counts"]
    assert "| 4 | 12 |" in (out / "report.md").read_text()
    assert (out / "option_counts.csv").read_text() == "options,items\n4,12\n"
    # its file is the report's own: the folder is replaced, not refused
    Analyze(ws, AnalyzeOptions(out=out, n_resamples=100)).run()


def test_sections_run_and_are_numbered_in_their_order(ws, tmp_path):
    from curate.analyses import sections
    from curate.analyses.report import Analyze
    from curate.analyses.options import AnalyzeOptions

    names = [sections.name(s) for s in sections.registry()]
    assert names == ["accuracy", "suspects", "agreement", "core", "length", "annotations", "comparisons", "fewshot",
                     "position", "generation", "duplicates", "contamination", "filter"]
    Analyze(ws, AnalyzeOptions(out=tmp_path / "report", n_resamples=100, core_threshold=2)).run()
    assert headings(tmp_path / "report") == [
        "## What this audit found", "## About this report", "## 1. Accuracy",
        "## 2. Item validity: the models against the key", "## 3. Agreement between prompt modes",
        "## 4. Zero-prompt core", "## 5. Length bias", "## 6. Annotations", "## 7. Paired comparisons",
        "## 8. Position audit"]  # one shot count: no few-shot section; no generations: none of theirs; no gaps


def test_a_section_module_lacking_render_is_named(tmp_path):
    from curate.analyses import sections

    broken = "ORDER = 1\nABOUT = {}\n\n\ndef compute(ctx):\n    return {}\n"
    with module_in(sections, "broken", broken, tmp_path), \
            pytest.raises(TypeError, match="broken.py: a report section needs render"):
        sections.registry()


def test_the_decisions_folder_is_read_once(ws, tmp_path, monkeypatch):
    """`curate analyze --decisions`: the folder read to check it is this workspace's is the one
    the filter section reports (read once, not again by the section)."""
    from curate.analyses.report import Analyze
    from curate.analyses.options import AnalyzeOptions
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions
    from curate.review.data import Decisions

    rules = tmp_path / "rules.yaml"
    rules.write_text("name: both-right\ndescription: d\nstages:\n  - name: right\n    description: d\n    when:\n"
                     "      correct: {models: [m/a, m/b], mode: zero, normalization: seq_mean, at_least: 2}\n")
    Filter(ws, FilterOptions(rules=rules, out=tmp_path / "decisions")).run()
    reads, real = [], Decisions.read.__func__
    monkeypatch.setattr(Decisions, "read", classmethod(lambda cls, folder: reads.append(folder) or real(cls, folder)))
    metrics = Analyze(ws, AnalyzeOptions(out=tmp_path / "report", n_resamples=100,
                                         decisions=tmp_path / "decisions")).run()
    f = metrics["filter"]
    assert f["present"] and f["rules"] == "both-right" and f["items"] == 12 and f["kept"] + f["removed"] == 12
    assert reads == [tmp_path / "decisions"]


def test_the_filter_line_on_the_first_screen_adds_up_to_its_total():
    """The GoldenSwag stage table of the reference study (STUDY.md): ten stages remove 8517 of
    10042 items. The first screen named only the three largest stages (4064, 1975, 1076), whose
    sum is not the total; now the rest are counted together."""
    import re

    from curate.analyses.sections import filter as section
    from curate.analyses.sections._findings import Flag

    removed = [("refused", 6), ("prompt", 4064), ("correct-answer", 191), ("incorrect-answers", 1975),
               ("best-not-gold", 89), ("all-implausible", 23), ("equally-good", 583), ("spread", 96),
               ("longest", 414), ("zero-core", 1076)]
    stages = [{"stage": name, "description": name, "matched": n, "removed_here": n, "left": 0} for name, n in removed]
    m = {"filter": {"present": True, "folder": "decisions", "rules": "goldenswag", "items": 10042, "kept": 1525,
                    "removed": 8517, "stages": stages}}
    [flag] = [f for f in section.findings(m) if isinstance(f, Flag)]
    parts = [int(n) for n in re.findall(r" (\d+)(?:,|\))", flag.note)]
    assert flag.n == 8517 and sum(parts) == 8517, flag.note
    assert "prompt 4064, incorrect-answers 1975, zero-core 1076, 7 other stages 1402" in flag.note
    few = {"filter": {**m["filter"], "stages": stages[:4], "removed": 6236}}
    [flag] = [f for f in section.findings(few) if isinstance(f, Flag)]
    assert "prompt 4064, incorrect-answers 1975, correct-answer 191, refused 6" in flag.note
