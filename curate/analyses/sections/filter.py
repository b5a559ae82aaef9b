"""Filter decisions (`curate analyze --decisions`, the audit's filter output): how many items each
stage matched and removed, and how many the rules keep."""
from __future__ import annotations

import pandas as pd

from curate.analyses.sections._findings import Flag, Sentence, percent

ORDER = 98
SCORES = False  # decisions are read as `curate filter` wrote them
ABOUT = {"filter": "the `curate filter` decisions read (present: false when none were given): folder, rules name, "
                   "items, kept, removed, and per stage in rule order: description, matched (every item the stage "
                   "matches), removed_here (those no earlier stage removed), left"}


def compute(ctx) -> dict:
    """The decisions' stage table (``Analyze`` read them and checked they were made on
    this workspace)."""
    if ctx.decisions is None:
        return {"filter": {"present": False}}
    d = ctx.decisions
    kept = int(d.frame["kept"].sum())
    stages = [{k: s.get(k) for k in ("stage", "description", "matched", "removed_here", "left")} for s in d.stages]
    return {"filter": {"present": True, "folder": str(d.path), "rules": d.rules, "items": len(d.frame), "kept": kept,
                       "removed": len(d.frame) - kept, "stages": stages}}


def render(m: dict, number: int, out) -> list:
    f = m.get("filter")
    if not f or not f.get("present"):
        return []
    text = (f"The rules `{f['rules']}` keep {f['kept']} of the {f['items']} items and remove {f['removed']}. An item "
            "leaves at the first stage it matches (removed here); matched counts every item a stage matches.")
    return [("h2", f"{number}. Filter decisions"), ("p", text), ("table", pd.DataFrame(f["stages"]))]


def findings(m: dict) -> list:
    """The items the filter removes, by stage (the largest four; past four, the three largest and
    the rest together), so the parts add up to the total."""
    f = m.get("filter")
    if not f or not f.get("present"):
        return []
    removing = sorted((s for s in f["stages"] if s["removed_here"]), key=lambda s: -s["removed_here"])
    shown, rest = (removing, []) if len(removing) <= 4 else (removing[:3], removing[3:])
    by = ", ".join([f"{s['stage']} {s['removed_here']}" for s in shown] +
                   ([f"{len(rest)} other stages {sum(s['removed_here'] for s in rest)}"] if rest else []))
    return [Flag("filter", f["removed"], f["items"], f"removed by the rules {f['rules']}" + (f" ({by})" if by else "")),
            Sentence(f"The filter's rules `{f['rules']}` remove {f['removed']} items "
                     f"({percent(f['removed'], f['items'])}) and keep {f['kept']}.")]
