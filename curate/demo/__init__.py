"""The demo benchmark: 40 hand-written items with planted defects, and the truth about each.

It lets a newcomer (and the tests) see whether an audit finds what is known to be there. The
files live beside this module as package data:

- ``benchmark.jsonl``: the items, HellaSwag-shaped (topic, context, sentence start, four endings,
  label) so the generic adapter ingests them with the mapping in ``audit.yaml``;
- ``plants.json``: row -> planted defect kinds and a note (``schemas/plants.schema.json``);
- ``audit.yaml``: the embedded ``curate audit`` defaults that run the offline demo;
- ``README.md``: every plant, row by row.

``score_plants`` turns a filter's decision log into "which stage caught how many plants of
each kind", the demo's measure of an audit.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import schemas
from curate.core.errors import CurateError, InputError

if TYPE_CHECKING:  # pandas is imported where used: the CLI imports this package for every command
    import pandas as pd

DEMO_DIR = Path(__file__).parent

#: Plant kinds, in the order tables list them, with what each one means.
KINDS = {
    "typo_prompt": "typos or grammar errors in the context",
    "typo_correct": "typos or grammar errors in the correct answer",
    "nonsense_options": "the incorrect options are word salad or absurd",
    "two_right": "a second option is as right as the gold (a near-paraphrase of it)",
    "wrong_gold": "the labelled answer is wrong; another option is right",
    "answer_without_question": "the right option is obvious from the options alone",
    "long_gold": "the gold option is several times longer than the others",
}
#: The column for items with no plant: what a stage catches there is a false alarm.
CLEAN = "clean"

#: Columns of a decisions frame as `curate filter` writes it (decisions.parquet).
DECISION_COLUMNS = ("item_id", "row_index", "kept", "first_stage", "matched")
#: The rows ``score_plants`` adds around the stages.
SUMMARY_ROWS = ("planted", "removed")


def benchmark_path() -> Path:
    return DEMO_DIR / "benchmark.jsonl"


def plants_path() -> Path:
    return DEMO_DIR / "plants.json"


def config_path() -> Path:
    return DEMO_DIR / "audit.yaml"


def rules_path() -> Path:
    """The demo's filter rules (the file ``audit.yaml`` names)."""
    return DEMO_DIR / "rules.yaml"


@dataclass(frozen=True)
class Plant:
    row: int
    kinds: tuple[str, ...]  # empty for a clean control
    note: str
    true_gold: int | None = None   # wrong_gold: the option that is actually right
    also_right: int | None = None  # two_right: the second right option


def load_plants(path: str | Path | None = None) -> dict[int, Plant]:
    """Row index -> Plant, from a plants file checked against ``schemas/plants.schema.json``."""
    data = schemas.read_checked(path if path is not None else plants_path(), "plants", missing="plants file not found")
    return {int(row): Plant(int(row), tuple(p["kinds"]), p["note"], p.get("true_gold"), p.get("also_right"))
            for row, p in data["items"].items()}


def load_decisions(folder: str | Path) -> tuple[pd.DataFrame, list[str]]:
    """The decisions and the stage names in rule order, from a `curate filter` output folder
    (decisions.parquet, stages.csv); a stage that matched nothing is still listed."""
    folder = Path(folder)
    files = [folder / "decisions.parquet", folder / "stages.csv"]
    for f in files:
        if not f.is_file():
            raise InputError(f"no {f.name} here (run `curate filter` first)", path=str(folder))
    import pandas as pd
    return pd.read_parquet(files[0]), pd.read_csv(files[1])["stage"].astype(str).tolist()


def score_plants(decisions: pd.DataFrame, plants: dict[int, Plant], stages: list[str], *,
                 count: str = "matched") -> pd.DataFrame:
    """How many plants of each kind every filter stage caught.

    ``decisions`` is a `curate filter` decision log: item_id, row_index, kept, first_stage and
    ``matched`` (the names of every stage whose condition held); ``stages`` are the stage names
    in rule order. ``count="matched"`` counts every stage that matched an item;
    ``count="first"`` counts an item only under the stage that removed it.
    Rows: ``planted`` (items of each kind), one per stage, ``removed`` (by any stage).
    Columns: the plant kinds present, in KINDS order, then ``clean`` (false alarms).
    An item with two kinds counts under both. Rows of ``decisions`` and ``plants`` must match
    one to one, so no item is silently left out of the count.
    """
    if count not in ("matched", "first"):
        raise ValueError(f"count must be 'matched' or 'first', got {count!r}")
    _check_log(decisions, plants, stages)
    rows = decisions["row_index"].tolist()
    kinds_of = {row: plants[row].kinds or (CLEAN,) for row in rows}
    present = {k for ks in kinds_of.values() for k in ks}
    columns = [k for k in (*KINDS, CLEAN) if k in present]

    def tally(mask) -> list[int]:
        hit = [row for row, m in zip(rows, mask) if m]
        return [sum(kind in kinds_of[row] for row in hit) for kind in columns]

    matched = [set(m) for m in decisions["matched"]]
    table = {"planted": tally([True] * len(rows))}
    for stage in stages:
        mask = [stage in m for m in matched] if count == "matched" else (decisions["first_stage"] == stage).tolist()
        table[stage] = tally(mask)
    table["removed"] = tally((~decisions["kept"].astype(bool)).tolist())
    import pandas as pd
    frame = pd.DataFrame.from_dict(table, orient="index", columns=columns)
    frame.index.name = "stage"
    return frame


def _check_log(decisions: pd.DataFrame, plants: dict[int, Plant], stages: list[str]) -> None:
    """Refuse a decision log that does not fit the plants or the stage list, naming why."""
    missing = [c for c in DECISION_COLUMNS if c not in decisions.columns]
    if missing:
        raise CurateError(f"decisions lack the column(s) {', '.join(missing)}")
    if len(set(stages)) != len(stages) or set(stages) & set(SUMMARY_ROWS):
        raise CurateError(f"stage names must be unique and not {' or '.join(SUMMARY_ROWS)}: {stages}")
    named = {s for m in decisions["matched"] for s in m} | set(decisions["first_stage"].dropna())
    unknown = sorted(named - set(stages))
    if unknown:
        raise CurateError(f"decisions name stage(s) {', '.join(unknown)} that are not in the stage list {stages}")
    rows = decisions["row_index"].tolist()
    if len(set(rows)) != len(rows):
        dup = sorted({r for r in rows if rows.count(r) > 1})
        raise CurateError(f"decisions repeat row_index {dup[:5]}")
    extra, absent = sorted(set(rows) - set(plants)), sorted(set(plants) - set(rows))
    if extra or absent:
        raise CurateError("decisions and plants cover different rows: "
                          f"{len(extra)} decided but not planted {extra[:5]}, {len(absent)} planted but not decided {absent[:5]}")
