"""A stage run opens the workspace database once (issue 46: one run opened it up to 13 times, a
`curate score` 4 times, each time checking the file, connecting, and applying every migration again): the runner
(``curate.items.stage.Stage.run``) opens it and the stage works in that one connection.

Counted on real runs of real HellaSwag items: every ``sqlite3.connect`` of the run (opening a
workspace is two: the read-only look at the file, then the connection) and every
``Workspace.open``."""
from __future__ import annotations

import shutil
import sqlite3

import pytest

from conftest import HELLASWAG, seed_random_scores, small_workspace

#: A rules file every workspace of HellaSwag items can answer (its items' source field).
RULES = "name: t\nstages:\n  - name: activitynet\n    when:\n      field: {name: source, in: [activitynet]}\n"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """Six items with seeded scores (a test double for a scoring run: the report needs scores),
    filtered, as every stage below reads them."""
    from curate.filter.options import FilterOptions
    from curate.filter.run import Filter

    root = tmp_path_factory.mktemp("once")
    ws = small_workspace(root / "ws", 6)
    seed_random_scores(ws)
    (root / "rules.yaml").write_text(RULES)
    Filter(ws, FilterOptions(rules=root / "rules.yaml", out=root / "decisions")).run()
    return root


@pytest.fixture
def counted(monkeypatch):
    """The connections and workspace openings made from here on."""
    from curate.items.store import Workspace

    seen = {"connect": 0, "open": 0}
    connect, open_ = sqlite3.connect, Workspace.open.__func__

    def counting_connect(*args, **kwargs):
        seen["connect"] += 1
        return connect(*args, **kwargs)

    def counting_open(cls, *args, **kwargs):
        seen["open"] += 1
        return open_(cls, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", counting_connect)
    monkeypatch.setattr(Workspace, "open", classmethod(counting_open))
    return seen


def run_stage(name: str, root, ws):
    """One run of stage ``name`` on workspace ``ws`` (outputs under ``root``)."""
    from annotate.options import AnnotateOptions
    from annotate.run import Annotate
    from curate.analyses.options import AnalyzeOptions
    from curate.analyses.report import Analyze
    from curate.filter.options import FilterOptions
    from curate.filter.run import Filter
    from curate.items.duplicates.options import DuplicatesOptions
    from curate.items.duplicates.search import Duplicates
    from curate.release import Release
    from curate.release.options import ReleaseOptions
    from generate.options import GenerateOptions
    from generate.run import Generate
    from scoring.options import ScoreOptions, TextScoresOptions
    from scoring.run import Score
    from scoring.text_run import TextScores

    return {
        "duplicates": lambda: Duplicates(ws, DuplicatesOptions(splits="none")),
        "annotate": lambda: Annotate(ws, AnnotateOptions(round=1, annotator="local:smollm2-135m", limit=1, quiet=True)),
        "generate": lambda: Generate(ws, GenerateOptions(model="smollm2-135m", modes="full", seeds=1, limit=1,
                                                         quiet=True)),
        "score": lambda: Score(ws, ScoreOptions(model="smollm2-135m", modes=["full"], limit=2, text_scores=True,
                                                quiet=True)),
        "text-scores": lambda: TextScores(ws, TextScoresOptions(model="smollm2-135m", limit=2, quiet=True)),
        "filter": lambda: Filter(ws, FilterOptions(rules=root / "rules.yaml", out=root / "again")),
        "analyze": lambda: Analyze(ws, AnalyzeOptions(out=root / "report", decisions=root / "decisions",
                                                      n_resamples=100)),
        "release": lambda: Release(ws, ReleaseOptions(decisions=root / "decisions", name="once", version="0.1.0",
                                                      to=str(root / "released"), license="mit")),
    }[name]().run()


@pytest.mark.parametrize("stage", ["duplicates", "annotate", "generate", "score", "text-scores", "filter", "analyze",
                                   "release"])
def test_a_stage_run_opens_the_workspace_once(base, tmp_path, counted, stage):
    ws = shutil.copytree(base / "ws", tmp_path / "ws")
    shutil.copytree(base / "decisions", tmp_path / "decisions")
    (tmp_path / "rules.yaml").write_text(RULES)
    counted.update(connect=0, open=0)
    run_stage(stage, tmp_path, ws)
    assert counted == {"connect": 2, "open": 1}, stage


def test_an_ingest_connects_once_to_the_workspace_it_makes(tmp_path, counted):
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions

    Ingest(tmp_path / "ws", IngestOptions(data=str(HELLASWAG), limit=6), get_adapter("hellaswag")).run()
    assert counted == {"connect": 1, "open": 0}
