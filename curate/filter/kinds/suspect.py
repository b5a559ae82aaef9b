"""suspect: the item ranks among the likeliest broken under the named models (``curate.validity``'s
``suspect_score``, the default ranking: the pooled log-odds for models of spread ability, votes
against the key for models alike, the combination named in the export's ``suspect_basis``),
with every verdict the workspace holds pooled in (judges', reviewers', the annotators'; the
decisions record a digest of them). Flags the items the ranking makes suspects, or its highest
``top`` items, or its highest ``top_share``."""
from __future__ import annotations

import numpy as np

from curate.filter.kinds import _validity
from curate.filter.kinds._validity import needs  # noqa: F401 (the kind's needs)

SCHEMA = _validity.schema(
    "Likely broken: the item is a suspect of the default ranking (suspect_score) under the named models, every "
    "verdict on the items pooled in: by default the items above its own cut, or its highest `top` items, or its "
    "highest `top_share` of the items (at most one of the two). Give `models` (scored, with `mode` and "
    "`normalization`), `answers` (models read from their stored answers alone), or both.",
    top={"type": "integer", "minimum": 1}, top_share={"type": "number", "exclusiveMinimum": 0, "maximum": 1}) | {
    "required": [], "anyOf": [{"required": ["models", "mode", "normalization"]}, {"required": ["answers"]}],
    "not": {"required": ["top", "top_share"]}}


def evaluate(spec: dict, inputs) -> np.ndarray:
    table = _validity.table(spec | {"verdicts": True}, inputs)
    score = table["suspect_score"].to_numpy(float)
    if "top" in spec or "top_share" in spec:
        k = spec["top"] if "top" in spec else int(np.ceil(spec["top_share"] * len(score)))
        flagged = np.zeros(len(score), dtype=bool)
        flagged[np.argsort(-np.nan_to_num(score, nan=-np.inf), kind="stable")[:k]] = True
        return flagged
    return table["suspect"].fillna(False).to_numpy(bool)
