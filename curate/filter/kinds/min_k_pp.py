"""min_k_pp: the item's own text looks memorised by a model (Min-K%++, from `curate score --mode
text`): its score is above a value, or in the top share of the benchmark's items."""
from __future__ import annotations

import numpy as np

from curate.core.errors import CurateError

SCHEMA = {
    "description": "Min-K%++ of the item's own text under a model (stored by text scoring) is above `above`, or "
                   "among the highest `top_share` of the items' (0.05: the top 5%). Higher means more likely seen in "
                   "training: a suspicion, not proof. k is 10 or 20 (percent of the text's tokens; default 20).",
    "type": "object",
    "additionalProperties": False,
    "required": ["model"],
    "oneOf": [{"required": ["above"]}, {"required": ["top_share"]}],
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "k": {"enum": [10, 20]},
        "above": {"type": "number"},
        "top_share": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    },
}


def evaluate(spec: dict, inputs) -> np.ndarray:
    from scoring.text_store import text_scores

    column = f"min_kpp_{spec.get('k', 20)}"
    frame = text_scores(inputs.ws)
    mine = frame[frame["model"] == spec["model"]]
    if mine.empty:
        have = sorted(frame["model"].unique())
        raise CurateError(f"min_k_pp: no text scores of model {spec['model']!r} in {inputs.ws.root}; "
                          + (f"text-scored models: {', '.join(have)}" if have else
                             "run `curate text-scores` first"))
    values = mine.set_index("item_id")[column].reindex(inputs.item_ids).to_numpy(dtype=float)
    missing = int(np.isnan(values).sum())
    if missing:
        raise CurateError(f"min_k_pp: {missing} items have no text score of {spec['model']!r} (first: "
                          f"{inputs.item_ids[int(np.flatnonzero(np.isnan(values))[0])]}); score them first")
    if "above" in spec:
        return values > spec["above"]
    cut = np.quantile(values, 1 - spec["top_share"], method="higher")
    return values >= cut
