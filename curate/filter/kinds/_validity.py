"""What the item-validity kinds share (label_error, several_correct, no_right_answer, easy,
misfit): the named models' response matrix, item statistics and label-error suspects, from
``curate.validity`` (issue 28), worked out once per run; their schema; above-or-top-share cuts.
``models`` are read from their scores; ``answers`` names models read from their stored answers
alone, without probabilities (``scoring.answers``: curate generate, imported Inspect logs,
lm-eval samples, tables of choices; issue 40), pooled with them.

Not a kind itself (its name starts with ``_``); see ``curate.filter.kinds``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from curate.filter.kinds._common import FEWSHOT, MODE, MODELS, NORMALIZATION

FORMULATION = {"description": "cloze or letters (default: the workspace's, lm-eval's choice for its benchmark).",
               "type": "string", "pattern": "^(cloze|letters)$"}
#: Item validity's shot count: named, or the one with the most of the named models.
VALIDITY_FEWSHOT = {**FEWSHOT, "description": "Read the scores made after this many shots (curate score --fewshot "
                                              "K); default: the shot count with the most of the named models "
                                              "scored (ties: the fewest shots)."}
ANSWERS = {"description": "Models read from their stored answers alone, without probabilities (curate generate, "
                          "curate import-answers), pooled with the scored models: each read as sure of its answer as "
                          "its accuracy; default: none.",
           "type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string", "minLength": 1}}


def schema(description: str, **properties) -> dict:
    """A kind reading the named models' scores in a mode, normalization and formulation."""
    return {"description": description, "type": "object", "additionalProperties": False,
            "required": ["models", "mode", "normalization"],
            "properties": {"models": MODELS, "answers": ANSWERS, "mode": MODE, "normalization": NORMALIZATION,
                           "formulation": FORMULATION, "fewshot": VALIDITY_FEWSHOT, **properties}}


def cut_schema(description: str, default: float) -> dict:
    """A score kind: the score is above ``above`` (default ``default``) or among the highest
    ``top_share`` of the items (at most one of the two)."""
    return schema(f"{description} Flags an item whose score is above `above` (default {default:.3g}) or among the "
                  "highest `top_share` of the items (0.05: the top 5%).",
                  above={"type": "number"}, top_share={"type": "number", "exclusiveMinimum": 0, "maximum": 1}) | {
        "not": {"required": ["above", "top_share"]}}


def needs(spec: dict, *, default_formulation: str) -> list[tuple[str, tuple]]:
    """The named models' scores (with no shot count named, the one ``curate.audit.plan`` works
    out from the supply by item validity's rule, ``ByRule``), and the stored answers of each
    model in ``answers``."""
    from curate.validity.item_options import ByRule

    formulation = spec.get("formulation", default_formulation)
    models = spec.get("models", ())
    fewshot = spec["fewshot"] if "fewshot" in spec else ByRule(tuple(models))
    return [("scores", (model, spec["mode"], spec["normalization"], formulation, fewshot)) for model in models] \
        + [("answers", (model,)) for model in spec.get("answers", ())]


def table(spec: dict, inputs) -> pd.DataFrame:
    """Item statistics and suspect scores of the spec's models, one row per item in row order,
    from the scores ``curate.validity.item_table.choose`` picks (as the report and the review's
    ``suspects`` queue do)."""
    from curate.validity.item_table import Choice, choose, stored_conditions

    if not spec.get("models"):  # answers alone (the suspect kind): no scores to choose among
        key = ("validity", (), tuple(spec["answers"]), spec.get("mode", "full"), None, None, 0,
               bool(spec.get("verdicts", False)))
        choice = Choice(spec.get("mode", "full"), "answers", 0)
        return inputs.cached(key, lambda: _compute(spec, choice.formulation, choice.fewshot, inputs))
    choice = inputs.cached(("validity-choice", tuple(spec["models"]), spec["mode"], spec.get("formulation"),
                            spec.get("fewshot")),
                           lambda: choose(stored_conditions(inputs.ws), inputs.ws.meta("formulation", "cloze"),
                                          mode=spec["mode"], formulation=spec.get("formulation"),
                                          fewshot=spec.get("fewshot"), models=spec["models"]))
    key = ("validity", tuple(spec["models"]), tuple(spec.get("answers", ())), spec["mode"], spec["normalization"],
           choice.formulation, choice.fewshot, bool(spec.get("verdicts", False)))
    return inputs.cached(key, lambda: _compute(spec, choice.formulation, choice.fewshot, inputs))


def _compute(spec: dict, formulation: str, fewshot: int, inputs) -> pd.DataFrame:
    from curate.core.errors import CurateError
    from curate.validity.item_table import item_table, stored_answers, with_verdicts
    from scoring.store import read_scores

    named = list(spec.get("answers", ()))
    answers = stored_answers(inputs.ws, named) if named else None
    missing = [m for m in named if answers is None or m not in set(answers["model"])]
    if missing:
        raise CurateError(f"answers: no stored answers of model {missing[0]!r} (curate generate or curate "
                          "import-answers store them)")
    for model in named:  # what the decisions rest on, in the filter's summary and a release's manifest
        inputs.used_answers(model)

    if not spec.get("models"):  # answers alone: the models in `answers` make the ranking
        _, found = item_table(pd.DataFrame(), inputs.items, models=named, mode=spec.get("mode", "full"), answers=answers)
        found = with_verdicts(found, inputs.verdicts() if spec.get("verdicts", False) else None)
        return found.set_index("item_id").reindex(inputs.item_ids)
    if "scores" not in inputs.ws.tables():  # stops the run, saying the workspace holds no scores
        inputs.predictions(spec["models"], spec["mode"], spec["normalization"], formulation, fewshot=fewshot)
    scores = read_scores(inputs.ws, models=spec["models"], modes=[spec["mode"]], formulations=[formulation],
                         fewshots=[fewshot])
    # Every model must predict every item (the run stops naming what is missing); records the runs
    # read. From the same scores: they are read once.
    inputs.predictions(spec["models"], spec["mode"], spec["normalization"], formulation, fewshot=fewshot,
                       scores=scores)
    _, found = item_table(scores, inputs.items, models=spec["models"] + named, mode=spec["mode"],
                          formulation=formulation, normalization=spec["normalization"], fewshot=fewshot, answers=answers)
    found = with_verdicts(found, inputs.verdicts() if spec.get("verdicts", False) else None)
    return found.set_index("item_id").reindex(inputs.item_ids)


def above_cut(values: pd.Series, spec: dict, default: float) -> np.ndarray:
    """``values`` above ``spec['above']`` (default ``default``), or in its top ``top_share``."""
    values = values.to_numpy(dtype=float)
    if "top_share" in spec:
        return values >= np.quantile(values, 1 - spec["top_share"], method="higher")
    return values > spec.get("above", default)
