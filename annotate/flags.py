"""What annotations say about items: per annotator, item and measure, whether it is flagged.

Round 1 gives labels; round 2 gives derived flags: ``wrong_gold`` (the annotator's best
option is not the gold), ``multiple_correct`` (some other option is equally good),
``all_implausible``, ``best_is_worst`` (one option named both best and worst: an answer that
contradicts itself, kept as given and counted) and, from any round, ``refused``. The report's
label rates (``curate.analyses.annotations``) and the review browser read the same flags.
"""
from __future__ import annotations

import pandas as pd

from annotate.store import LABELS

ROUND2_FLAGS = ("wrong_gold", "multiple_correct", "all_implausible", "best_is_worst")


def item_flags(round1: pd.DataFrame, round2: pd.DataFrame, gold: pd.Series) -> pd.DataFrame:
    """One row per (annotator, item, measure) that is flagged, plus the denominators: columns
    annotator, measure, item_id, source, flagged (bool), over the items the measure applies to."""
    rows = []
    for frame, rnd in ((round1, 1), (round2, 2)):
        for rec in frame.itertuples(index=False):
            base = {"annotator": rec.annotator, "item_id": rec.item_id, "source": rec.source or "(none)"}
            rows.append(base | {"measure": f"refused_round{rnd}", "flagged": rec.status == "refused"})
            if rec.status != "valid":
                continue
            if rnd == 1:
                labels = set(rec.result["labels"])
                rows.extend(base | {"measure": label, "flagged": label in labels} for label in LABELS)
            else:
                r = rec.result
                rows.append(base | {"measure": "wrong_gold", "flagged": r["best"] != gold[rec.item_id]})
                rows.append(base | {"measure": "multiple_correct", "flagged": bool(r["equally_good"])})
                rows.append(base | {"measure": "all_implausible", "flagged": bool(r["all_implausible"])})
                rows.append(base | {"measure": "best_is_worst", "flagged": r["best"] == r["worst"]})
    return pd.DataFrame(rows, columns=["annotator", "item_id", "source", "measure", "flagged"])
