"""Helpers several report sections share (not a section: its name starts with ``_``)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from curate.analyses import render


def review_data(ctx, scores: pd.DataFrame):
    """The review app's view of the workspace for the report's item pages, from what the report
    read (its stored answers included: none read again)."""
    from curate.review.data import ReviewData
    from scoring.answers import COLUMNS

    answers = ctx.answers if ctx.answers is not None else pd.DataFrame(columns=list(COLUMNS))
    return ReviewData(Path(ctx.root), ctx.items, scores, generations=ctx.gens, answers=answers)


def records(df: pd.DataFrame) -> list[dict]:
    """A table as metrics.json holds it: one mapping per row."""
    return df.to_dict("records")


def named(settings: dict, text: str, formulation: str) -> str:
    """A heading, with the formulation when the report has more than one."""
    return f"{text}, {formulation}" if len(settings["formulations"]) > 1 else text


def p_text(df: pd.DataFrame) -> pd.DataFrame:
    """p-value columns as text, with an exact 0 (below double precision) shown as '< 1e-300'."""
    cols = [c for c in df.columns if c.startswith("p_")]
    return df.assign(**{c: [_p(v) for v in df[c]] for c in cols})


def _p(value) -> str:
    if value is None or pd.isna(value):  # no test was possible (e.g. no parsed answer at all)
        return "n/a"
    return "< 1e-300" if value == 0 else render.fmt(float(value))


def p_value_text(p: float, log10_p: float) -> str:
    """A p-value, and its order of magnitude when it is below double precision."""
    return f"< 1e-300 (log10 p = {log10_p:.1f})" if p == 0 else render.fmt(float(p))
