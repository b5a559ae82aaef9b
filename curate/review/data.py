"""What review reads about a workspace, through the stages' public read functions.

Items and scores do not change while people review, so they are read once; annotations do (the
reviewers write them), so they are read per request. Filter decisions come from `curate filter`
output folders (decisions.parquet, summary.json) named on the command line.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd

from curate.core.errors import InputError
from curate.core.reading import read_json
from curate.items.store import Workspace


@dataclass
class Decisions:
    """One `curate filter` output folder: per-item decisions and its stages in rule order."""
    name: str
    path: Path
    rules: str
    frame: pd.DataFrame                  # indexed by item_id: kept, first_stage, matched
    stages: list[dict]                   # stage, description, matched, removed_here, left
    source: dict | None = None           # the provenance of the workspace the filter ran on

    @classmethod
    def read(cls, folder: str | Path) -> "Decisions":
        folder = Path(folder)
        files = [folder / "decisions.parquet", folder / "summary.json"]
        for f in files:
            if not f.is_file():
                raise InputError(f"no {f.name} here (a `curate filter --out` folder holds one)", path=str(folder))
        summary = read_json(files[1], "a decisions summary")
        frame = pd.read_parquet(files[0]).set_index("item_id")
        return cls(folder.name, folder, summary["rules"]["name"], frame, summary["stages"],
                   (summary.get("workspace") or {}).get("source"))

    def check_made_on(self, source: dict, item_ids: list[str]) -> None:
        """Refuse decisions made on other data: a workspace ingested from another file can share
        item ids (``name/split/row``) and would show reviewers the wrong items' stages."""
        if self.source != source or set(self.frame.index) != set(item_ids):
            raise InputError("these decisions were made on another workspace's data (source or items differ); "
                             "give the `curate filter --out` folder made on this workspace", path=str(self.path))


def scorer_labels(scores: pd.DataFrame) -> pd.DataFrame:
    """Scores whose ``model`` names the formulation too ("model [formulation]") when the scores
    hold more than one formulation, so per-model code treats each formulation as its own scorer."""
    if "formulation" not in scores.columns or scores["formulation"].nunique() <= 1:
        return scores
    form = scores["formulation"].fillna("default").astype(str)
    return scores.assign(model=scores["model"].astype(str) + " [" + form + "]")


@dataclass
class ReviewData:
    root: Path
    items: list[dict]
    scores: pd.DataFrame
    decisions: list[Decisions] = field(default_factory=list)
    generations: pd.DataFrame = field(default_factory=pd.DataFrame)   # read_generations' rows
    #: Every stored answer (``scoring.answers.COLUMNS``) where the caller has read them already
    #: (the report); None: read from the workspace on first use.
    answers: pd.DataFrame | None = field(default=None, repr=False)
    #: Tables derived from the scores, computed once (``curate.review.queues.suspect_table``).
    derived: dict = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def imported_answers(self) -> pd.DataFrame:
        """The stored answers not made by ``curate generate`` (whose replies the generations show):
        imported tables, Inspect logs, lm-eval samples; read once, on the first item page asking."""
        from scoring.answers import COLUMNS, read_answers

        if self.answers is not None:
            found = self.answers
        else:
            with Workspace.open(self.root) as ws:
                if "answers" not in ws.tables():
                    return pd.DataFrame(columns=list(COLUMNS))
            found = read_answers(self.root)
        return found[found["source"] != "generate"].reset_index(drop=True)

    def answers_of(self, item_id: str) -> pd.DataFrame:
        """The imported answers to one item (every model and run)."""
        found = self.imported_answers
        return found[found["item_id"] == item_id]

    @classmethod
    def load(cls, root: str | Path, decisions=()) -> "ReviewData":
        from generate.store import open_generations, read_generations
        from scoring.store import open_scores, read_scores

        root = Path(root)
        with open_scores(root) as ws:
            items = ws.items()
            scores = read_scores(ws, fewshots=[0])  # the review shows 0-shot predictions
            source = ws.meta("source")
        with open_generations(root) as ws:
            generations = read_generations(ws)
        read = [Decisions.read(d) for d in decisions]
        for d in read:
            d.check_made_on(source, [it["item_id"] for it in items])
        return cls(root, items, scores, read, generations)

    @cached_property
    def by_id(self) -> dict[str, dict]:
        return {it["item_id"]: it for it in self.items}

    @cached_property
    def _score_rows(self) -> dict[str, list[int]]:
        if self.scores.empty:
            return {}
        return {k: list(v) for k, v in self.scores.groupby("item_id", sort=False).indices.items()}

    @cached_property
    def _generation_rows(self) -> dict[str, list[int]]:
        if self.generations.empty:
            return {}
        return {k: list(v) for k, v in self.generations.groupby("item_id", sort=False).indices.items()}

    def generations_of(self, item_id: str) -> pd.DataFrame:
        """The generation records of one item (every model, template, settings, mode and seed)."""
        rows = self._generation_rows.get(item_id)
        return self.generations.iloc[rows] if rows else self.generations.iloc[0:0]

    def scores_of(self, item_id: str) -> pd.DataFrame:
        """The score rows of one item (every model, mode, formulation and option)."""
        rows = self._score_rows.get(item_id)
        return self.scores.iloc[rows] if rows else self.scores.iloc[0:0]

    @cached_property
    def normalizations(self) -> dict[str, str]:
        """Each scorer's normalization as the report reads it (``model_normalizations``: the one
        all share, else each its own), keyed by ``scorer_labels``' model; empty without scores."""
        from scoring.normalize import model_normalizations

        return {} if self.scores.empty else model_normalizations(scorer_labels(self.scores))

    @cached_property
    def normalization(self) -> str | None:
        """The report's primary normalization: the one most scorers use (None without scores)."""
        from scoring.normalize import most_shared

        return most_shared(self.normalizations) if self.normalizations else None

    def predictions(self, scores: pd.DataFrame) -> pd.DataFrame:
        """``scores``' argmax picks, each scorer under its own normalization (``scorer_labels``' models)."""
        from scoring.normalize import predictions_by_model

        return predictions_by_model(scorer_labels(scores), self.normalizations)
