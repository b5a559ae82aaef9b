"""What conditions read, loaded once per run through the stages' public read functions.

``Inputs`` wraps an open workspace. It loads annotations, predictions, generations and tokenizers
lazily (a rules file without annotation conditions never touches the annotation tables) and
remembers what it used, so the decisions record which annotators, score runs, tokenizers and
generation runs they rest on. What a condition kind derives from these (counts over rotations,
right answers per seed) is in its own module (``curate.filter.kinds``), cached with ``cached``.
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from annotate.verdict_store import all_verdicts
from curate.core.errors import CurateError
from curate.items import lengths
from curate.items.canonical import canonical_json, sha256_text
from curate.items.sources import file_sha256
from curate.items.store import Workspace
from scoring.models import tokenizer as tokenizer_for


class Inputs:
    def __init__(self, ws: Workspace):
        self.ws = ws
        self.items = ws.items()
        self.item_ids = [it["item_id"] for it in self.items]
        self.gold = np.array([it["gold"] for it in self.items])
        self._annotations: dict[tuple[str, int], dict] = {}
        self._predictions: dict[tuple, pd.DataFrame] = {}
        self._lengths: dict[tuple, np.ndarray] = {}
        self._tokenizers: dict[str, object] = {}
        self._generations: dict[tuple[str, str], pd.DataFrame] = {}
        self._derived: dict[tuple, object] = {}
        self.used = {"annotators": {}, "score_runs": {}, "tokenizers": {}, "generation_runs": {}, "answers": {}}

    def used_answers(self, model: str) -> None:
        """Record that a condition read ``model``'s stored answers (``scoring.answers``)."""
        self.used["answers"][model] = answers_record(self.ws, model)

    def verdicts(self) -> pd.DataFrame:
        """Every verdict the workspace holds on its items (``annotate.verdict_store.all_verdicts``),
        recorded as read (its digest in the summary, checked again by a release)."""
        def read():
            found = all_verdicts(self.ws, self.items)
            self.used["verdicts"] = verdicts_record(found)
            return found
        return self.cached(("verdicts",), read)

    def provenance(self) -> dict:
        """The annotators, score runs, tokenizers and generation runs the evaluated conditions read."""
        found = {"annotators": list(self.used["annotators"].values()),
                 "score_runs": [{"run_id": r, **info} for r, info in sorted(self.used["score_runs"].items())],
                 "tokenizers": list(self.used["tokenizers"].values()),
                 "generation_runs": [{"run_id": r, **info} for (r, _), info in sorted(self.used["generation_runs"].items())]}
        if self.used["answers"]:  # only when read: summaries of rules without answers stay as they were
            found["answers"] = [self.used["answers"][m] for m in sorted(self.used["answers"])]
        if "verdicts" in self.used:  # likewise: only a rule ranking by suspect_score reads them
            found["verdicts"] = self.used["verdicts"]
        return found

    @cached_property
    def _tables(self) -> set[str]:
        return set(self.ws.tables())

    def cached(self, key: tuple, compute):
        """``compute()``, worked out once per run for ``key`` (a kind's module name first): what
        a condition derives, when a rules file reads it in several stages."""
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]

    # --- annotations -----------------------------------------------------------------------

    def annotations(self, annotator: str, round: int) -> dict[str, tuple[str, dict | None]]:
        """item_id -> (status, result) of ``annotator``'s records in ``round``. An annotator
        without a single record in that round is an error, never a condition that silently
        matches nothing (or everything): the name is most likely wrong."""
        key = (annotator, round)
        if key not in self._annotations:
            frame = None
            if "annotations" in self._tables:
                from annotate.store import read_annotations
                frame = read_annotations(self.ws, round=round, annotator=annotator)
            if frame is None or frame.empty:
                raise CurateError(f"annotator {annotator!r} has no round-{round} records in this workspace; "
                                  f"annotators with records: {self._annotators_present() or 'none'} (check the "
                                  f"rules file's annotator, defaults.annotator or --annotator)")
            self._note_annotator(annotator, round, frame)
            self._annotations[key] = dict(zip(frame["item_id"], zip(frame["status"], frame["result"])))
        return self._annotations[key]

    def _annotators_present(self) -> str:
        if "annotations" not in self._tables:
            return ""
        rows = self.ws.conn.execute("SELECT annotator, group_concat(DISTINCT round) FROM annotations "
                                    "GROUP BY annotator ORDER BY annotator").fetchall()
        return ", ".join(f"{a} (round {r})" for a, r in rows)

    def _note_annotator(self, annotator: str, round: int, frame: pd.DataFrame) -> None:
        self.used["annotators"][f"{annotator}#round{round}"] = annotator_record(annotator, round, frame)

    # --- scores ----------------------------------------------------------------------------

    def predictions(self, models: list[str], mode: str, normalization: str,
                    formulation: str | None = None, fewshot: int = 0, scores: pd.DataFrame | None = None) -> pd.DataFrame:
        """Argmax predictions of ``models`` in ``mode`` and ``formulation`` (default: the
        workspace's) after ``fewshot`` shots; every model must have a prediction for every item,
        or the run stops naming what is missing. ``scores``: those scores, when the caller has
        read them already (``read_scores``), so they are not read twice."""
        formulation = formulation or self.ws.meta("formulation", "cloze")
        parts = {} if scores is None else dict(tuple(scores.groupby("model", sort=False)))
        return pd.concat([self.predictions_in(model, mode, normalization, [formulation], fewshot=fewshot,
                                              scores=None if scores is None else parts.get(model, scores.iloc[:0]))
                          for model in models], ignore_index=True)

    def predictions_in(self, model: str, mode: str, normalization: str, formulations: list[str],
                       complete: bool = True, fewshot: int = 0, scores: pd.DataFrame | None = None) -> pd.DataFrame:
        """Argmax predictions of ``model`` in ``mode`` in any of ``formulations``, from its
        ``fewshot``-shot scores (``scores``: those, already read); with ``complete``, every item
        must have one, or the run stops naming what is missing."""
        key = (model, mode, normalization, tuple(formulations), complete, fewshot)
        if key not in self._predictions:
            self._predictions[key] = self._load_predictions(model, mode, normalization, formulations, complete,
                                                            fewshot, scores)
        return self._predictions[key]

    def _load_predictions(self, model: str, mode: str, normalization: str, formulations: list[str],
                          complete: bool = True, fewshot: int = 0, scores: pd.DataFrame | None = None) -> pd.DataFrame:
        from scoring.normalize import predictions
        from scoring.store import label_runs, read_scores, require_one_source

        if scores is None and "scores" in self._tables:
            scores = read_scores(self.ws, models=[model], modes=[mode], formulations=formulations, fewshots=[fewshot])
        what = f"formulation {formulations[0]!r}" if len(formulations) == 1 else "rotated letters"
        what += f", {fewshot}-shot" if fewshot else ""
        if scores is None or scores.empty:
            known = sorted(self._score_pairs())
            raise CurateError(f"no scores for model {model!r} in mode {mode!r} ({what}) in this workspace; "
                              f"scored: {', '.join(f'{m} ({d}, {f})' for m, d, f in known) or 'nothing'}")
        preds = predictions(scores, normalization)
        have = set(preds["item_id"])
        missing = [i for i in self.item_ids if i not in have]
        if missing and complete:
            raise CurateError(f"model {model!r}, mode {mode!r}, {what}: no {normalization!r} prediction for "
                              f"{len(missing)} of {len(self.item_ids)} items (first: {missing[0]}); "
                              f"score them or choose a normalization they have")
        # One source per model (all its modes), or an error naming the runs; record what was read.
        runs = {r["run_id"]: r for r in require_one_source(label_runs(self.ws, model)).to_dict("records")}
        for run_id in sorted(set(scores["run_id"])):
            run = runs[run_id]
            self.used["score_runs"].setdefault(run_id, {
                "model": model, "mode": mode, "formulations": [], "normalizations": [], "origin": run["origin"],
                "dtype": run["dtype"], "engine": None if pd.isna(run["engine"]) else int(run["engine"]),
                "model_hash": run["model_hash"]})
            used = self.used["score_runs"][run_id]
            if normalization not in used["normalizations"]:
                used["normalizations"].append(normalization)
            used["formulations"] = sorted({*used["formulations"], *scores.loc[scores["run_id"] == run_id, "formulation"]})
            if fewshot:  # 0-shot records keep their old shape (summaries written before the axis)
                used["fewshots"] = sorted({*used.get("fewshots", []), fewshot})
        return preds

    def _score_pairs(self) -> set[tuple[str, str, str]]:
        if "scores" not in self._tables:
            return set()
        return {tuple(r) for r in self.ws.conn.execute("SELECT DISTINCT model, mode, formulation FROM scores")}

    # --- generations -----------------------------------------------------------------------

    def generations(self, model: str, mode: str) -> pd.DataFrame:
        """Every generated answer of ``model`` in ``mode`` (``generate.store.read_generations``;
        empty when there are none)."""
        key = (model, mode)
        if key not in self._generations:
            from generate.store import read_generations

            self._generations[key] = (read_generations(self.ws, models=[model], modes=[mode])
                                      if "generations" in self._tables else pd.DataFrame())
        return self._generations[key]

    def note_generations(self, used: pd.DataFrame, seeds: list[int]) -> None:
        """Record the generation runs behind ``used`` (one model, mode, template and settings),
        read under ``seeds``, for the decisions' summary."""
        for run_id in sorted(set(used["run_id"])):
            mode = used["mode"].iloc[0]
            entry = self.used["generation_runs"].setdefault((run_id, mode), {
                "model": used["model"].iloc[0], "mode": mode, "template": used["template"].iloc[0],
                "settings": used["settings"].iloc[0], "seeds": []})
            entry["seeds"] = sorted(set(entry["seeds"]) | {int(s) for s in seeds})

    # --- lengths ---------------------------------------------------------------------------

    def lengths(self, unit: str, over: str, mode: str, tokenizer: str | None) -> np.ndarray:
        key = (unit, over, mode if over == "context+option" else None, tokenizer)
        if key not in self._lengths:
            tok = self._tokenizer(tokenizer) if unit == "tokens" else None
            self._lengths[key] = lengths.measure(lengths.texts(self.items, over, mode), unit, tok)
        return self._lengths[key]

    def _tokenizer(self, name: str):
        if name not in self._tokenizers:
            self._tokenizers[name] = tokenizer_for(name)
            self.used["tokenizers"][name] = tokenizer_identity(name, self._tokenizers[name])
        return self._tokenizers[name]


def tokenizer_identity(name: str, tok) -> dict:
    """Name, class and a hash of the tokenizer's files, so token counts can be reproduced."""
    folder = Path(getattr(tok, "name_or_path", "") or "")
    files = sorted(f for f in folder.glob("*") if f.is_file() and
                   (f.name.startswith("tokenizer") or f.name in ("vocab.json", "merges.txt", "special_tokens_map.json")))
    return {"name": name, "class": type(tok).__name__, "path": str(folder),
            "files": {f.name: file_sha256(f) for f in files}}


def annotator_record(annotator: str, round: int, frame: pd.DataFrame) -> dict:
    """What the decisions' summary says of the annotation records a filter read; the digest of
    each item's status and result tells records redone with other answers apart."""

    def distinct(col):
        return sorted({v for v in frame[col] if v is not None and v == v})
    answers = sorted(canonical_json([r.item_id, r.status, r.result]) for r in frame.itertuples())
    return {"annotator": annotator, "round": round, "records": len(frame),
            "status": {k: int(v) for k, v in frame["status"].value_counts().sort_index().items()},
            "model_snapshots": distinct("model_snapshot"), "prompt_versions": distinct("prompt_version"),
            "run_ids": distinct("run_id"), "records_sha256": sha256_text(canonical_json(answers))}


def answers_record(ws, model: str) -> dict:
    """What a filter read of ``model``'s stored answers: their runs and a digest of every answer,
    so a release can tell answers re-imported or added since from those the decisions rest on."""
    runs = [r[0] for r in ws.conn.execute("SELECT run_id FROM answer_runs WHERE model = ? ORDER BY run_id", (model,))]
    rows = ws.conn.execute("SELECT item_id, run, source, choice FROM answers WHERE model = ? "
                           "ORDER BY item_id, run, source", (model,)).fetchall()
    rows = [list(r) for r in rows]
    return {"model": model, "run_ids": runs, "answers": len(rows), "answers_sha256": sha256_text(canonical_json(rows))}


def verdicts_record(frame: pd.DataFrame) -> dict:
    """What a filter read of the verdicts: how many per kind of source, and a digest of them all."""
    rows = sorted(canonical_json([r.source, r.kind, r.item_id, r.verdict]) for r in frame.itertuples())
    return {"verdicts": len(frame), "sources": int(frame["source"].nunique()) if len(frame) else 0,
            "verdicts_sha256": sha256_text(canonical_json(rows))}


def changed_inputs(ws, inputs: dict) -> str | None:
    """The first score or annotation input a filter read (its summary's ``inputs``) that the
    workspace no longer holds as it was: a label re-scored or re-imported, an annotator's records
    redone. None when all are as read. Decisions made from other numbers must not be released."""
    tables = set(ws.tables())
    expected: dict[tuple[str, str], tuple[set, set, set]] = {}
    for run in inputs["score_runs"]:
        runs, forms, shots = expected.setdefault((run["model"], run["mode"]), (set(), set(), set()))
        runs.add(run["run_id"])
        forms.update(run.get("formulations") or ["cloze"])
        shots.update(run.get("fewshots") or [0])
    for (model, mode), (runs, forms, shots) in sorted(expected.items()):
        now = set() if "scores" not in tables else {r[0] for r in ws.conn.execute(
            f"SELECT DISTINCT run_id FROM scores WHERE model = ? AND mode = ? AND formulation IN "
            f"({', '.join('?' * len(forms))}) AND fewshot IN ({', '.join('?' * len(shots))})",
            (model, mode, *sorted(forms), *sorted(shots)))}
        if now != runs:
            return (f"the scores of {model!r} in mode {mode} (runs {', '.join(sorted(runs))}; the workspace now holds "
                    f"{', '.join(sorted(now)) or 'none'})")
    from annotate.store import read_annotations
    for entry in inputs["annotators"]:
        frame = read_annotations(ws, round=entry["round"], annotator=entry["annotator"]) \
            if "annotations" in tables else None
        now = annotator_record(entry["annotator"], entry["round"], frame) if frame is not None else {}
        if {key: now.get(key) for key in entry} != entry:  # a summary from before records_sha256: what it has
            return f"the round-{entry['round']} records of annotator {entry['annotator']!r}"
    for entry in inputs.get("answers", ()):
        if answers_record(ws, entry["model"]) != entry:
            return f"the stored answers of {entry['model']!r}"
    if "verdicts" in inputs and verdicts_record(all_verdicts(ws, ws.items())) != inputs["verdicts"]:
        return "the verdicts on the items (imported, reviewers', annotators')"
    return None

