"""The demo benchmark: its plants are documented, true of the data, ingestible, and countable."""
from __future__ import annotations

import collections
import json
import re

import numpy as np
import pandas as pd
import pytest
from rapidfuzz import fuzz

from conftest import run_cli
from curate import demo
from curate.audit.config import load_config
from curate.core.errors import CurateError, InputError
from curate.filter.decisions import decide, stage_table
from curate.items.store import Workspace

ROWS = [json.loads(line) for line in demo.benchmark_path().read_text(encoding="utf-8").splitlines()]
PLANTS = demo.load_plants()

# The generic-adapter mapping of the demo, as a user types it (audit.yaml says the same).
INIT_ARGS = ["--benchmark", "generic", "--name", "demo", "--question", "context", "--choices", "endings",
             "--answer", "label", "--answer-format", "index", "--zero-column", "start",
             "--source-column", "domain", "--id-columns", "id", "--template", "{topic}: {question} {start}"]


def spread(options: list[str]) -> float:
    lengths = [len(o) for o in options]
    return (max(lengths) - min(lengths)) / max(lengths)


def rows_of(kind: str) -> list[int]:
    return sorted(r for r, p in PLANTS.items() if kind in (p.kinds or (demo.CLEAN,)))


def test_every_row_has_its_ground_truth():
    assert len(ROWS) == 40 and sorted(PLANTS) == list(range(40))
    counts = collections.Counter(k for p in PLANTS.values() for k in p.kinds or [demo.CLEAN])
    assert counts == {**{k: 4 for k in demo.KINDS}, demo.CLEAN: 12}
    assert all(len(r["endings"]) == 4 for r in ROWS)
    assert collections.Counter(r["label"] for r in ROWS) == {0: 10, 1: 10, 2: 10, 3: 10}
    assert len({r["id"] for r in ROWS}) == 40


def test_plants_are_true_of_the_data():
    """What each kind promises and an audit can check without a model holds row by row."""
    for row, plant in PLANTS.items():
        options, gold = ROWS[row]["endings"], ROWS[row]["label"]
        gold_longest = len(options[gold]) == max(map(len, options))
        if "long_gold" in plant.kinds:
            assert gold_longest and spread(options) > 0.3, row
        else:  # nothing a GoldenSwag-style length stage would remove
            assert spread(options) <= 0.3 and not (gold_longest and spread(options) > 0.15), row
        closest = max(fuzz.ratio(a, b) for i, a in enumerate(options) for b in options[i + 1:])
        if "two_right" in plant.kinds:
            assert plant.also_right not in (None, gold)
            assert fuzz.ratio(options[gold], options[plant.also_right]) >= 80, row
        else:
            assert closest < 80 and plant.also_right is None, row
        if "wrong_gold" in plant.kinds:
            assert plant.true_gold not in (None, gold), row
        else:
            assert plant.true_gold is None, row


def test_readme_documents_every_row():
    text = (demo.DEMO_DIR / "README.md").read_text(encoding="utf-8")
    table = {int(row): (kinds, what) for row, kinds, what in
             re.findall(r"^\| (\d+) \| ([^|]+) \| [^|]+ \| ([^|]+) \|$", text, flags=re.M)}
    assert sorted(table) == list(range(40))
    for row, plant in PLANTS.items():
        kinds, what = table[row]
        assert kinds.strip() == (", ".join(plant.kinds) or demo.CLEAN), row
        assert what.startswith(plant.note), row
    for kind in demo.KINDS:
        assert f"`{kind}`" in text


def test_demo_rules_read_only_what_the_demo_produces(tmp_path):
    from curate.filter.rules import load_rules

    rules = load_rules(demo.rules_path())
    config = load_config(cwd=tmp_path)
    conditions = [next(iter(s["when"])) for s in rules["stages"]]
    assert not {"labels", "answer", "status"} & set(conditions)  # the 135M annotator's labels are noise
    scored = [s["when"]["correct"] for s in rules["stages"] if "correct" in s["when"]]
    assert {c["mode"] for c in scored} <= {m for o in config.options("score") for m in o.modes}
    assert {m for c in scored for m in c["models"]} <= {o.model for o in config.options("score")}


def test_demo_ingests_with_the_generic_adapter(tmp_path):
    ws = tmp_path / "ws"
    proc = run_cli("init", ws, "--data", demo.benchmark_path(), *INIT_ARGS)
    assert "40 items (home" in proc.stdout
    with Workspace.open(ws) as w:
        items = w.items()
        raws = w.raw_rows()
    assert [it["gold"] for it in items] == [r["label"] for r in ROWS]
    assert [it["native_ids"]["id"] for it in items] == [r["id"] for r in ROWS]
    assert items[5]["prompts"]["zero"] == ROWS[5]["start"]
    assert items[5]["prompts"]["full"].startswith(ROWS[5]["topic"] + ": ")
    assert len(raws) == 40
    # the embedded audit config maps the columns exactly as the command line above
    adapter = load_config(cwd=tmp_path, check_files=False).options("ingest")[0].adapter
    assert [adapter.to_item(r, i, "validation")["content_hash"] for i, r in enumerate(ROWS)] == \
           [it["content_hash"] for it in items]


def decisions_for(stage_rows: dict[str, set[int]]) -> tuple[pd.DataFrame, list[str]]:
    """A decision log built by the filter's own ``decide``: stages in order, first match removes."""
    items = [{"item_id": f"demo/validation/{row}", "row_index": row, "source": ROWS[row]["domain"]}
             for row in range(40)]
    names = list(stage_rows)
    masks = [np.array([row in stage_rows[name] for row in range(40)]) for name in names]
    return decide(items, names, masks), names


def test_score_plants_counts_matched_and_removed_here():
    stages = {
        "refused": set(),
        "length_spread": set(rows_of("long_gold")),
        "near_duplicate": set(rows_of("two_right")) | {rows_of(demo.CLEAN)[0]},
        "choice_only": set(rows_of("answer_without_question")) | set(rows_of("long_gold"))
                       | set(rows_of("nonsense_options")[:3]),
    }
    frame, names = decisions_for(stages)
    matched = demo.score_plants(frame, PLANTS, names)
    assert list(matched.index) == ["planted", "refused", "length_spread", "near_duplicate", "choice_only", "removed"]
    assert list(matched.columns) == [*demo.KINDS, "clean"]
    assert matched.loc["planted"].tolist() == [4, 4, 4, 4, 4, 4, 4, 12]
    assert matched.loc["refused"].sum() == 0
    assert matched.loc["length_spread"].to_dict() == {**dict.fromkeys(matched.columns, 0), "long_gold": 4}
    assert matched.loc["near_duplicate", "two_right"] == 4 and matched.loc["near_duplicate", "clean"] == 1
    assert matched.loc["choice_only", ["answer_without_question", "long_gold", "nonsense_options"]].tolist() == [4, 4, 3]

    first = demo.score_plants(frame, PLANTS, names, count="first")
    assert first.loc["choice_only", "long_gold"] == 0  # already removed by the length stage
    assert first.loc["choice_only", ["answer_without_question", "nonsense_options"]].tolist() == [4, 3]
    assert first.loc["removed"].to_dict() == matched.loc["removed"].to_dict() == {
        "typo_prompt": 0, "typo_correct": 0, "nonsense_options": 3, "two_right": 4, "wrong_gold": 0,
        "answer_without_question": 4, "long_gold": 4, "clean": 1}
    # removed here, summed over stages, is everything removed
    assert first.drop(["planted", "removed"]).sum().to_dict() == first.loc["removed"].to_dict()
    # each demo item has at most one kind, so every stage's row sums to the filter's own table
    table = stage_table(frame, names)
    per_stage = ["planted", "removed"]
    assert table["matched"].tolist() == matched.drop(per_stage).sum(axis=1).tolist()
    assert table["removed_here"].tolist() == first.drop(per_stage).sum(axis=1).tolist()


def test_an_item_with_two_kinds_counts_under_both():
    plants = {0: demo.Plant(0, ("typo_prompt", "long_gold"), "both"), 1: demo.Plant(1, (), "clean")}
    frame = pd.DataFrame({"item_id": ["d/v/0", "d/v/1"], "row_index": [0, 1], "kept": [False, True],
                          "first_stage": ["length", None], "matched": [["length"], []]})
    table = demo.score_plants(frame, plants, ["length"])
    assert table.to_dict("index") == {
        "planted": {"typo_prompt": 1, "long_gold": 1, "clean": 1},
        "length": {"typo_prompt": 1, "long_gold": 1, "clean": 0},
        "removed": {"typo_prompt": 1, "long_gold": 1, "clean": 0}}


@pytest.mark.parametrize("change, message", [
    (lambda f, n: (f.drop(columns="first_stage"), n), "lack the column(s) first_stage"),
    (lambda f, n: (f, ["other"]), "stage(s) length_spread that are not in the stage list"),
    (lambda f, n: (f, n + ["removed"]), "not planted or removed"),
    (lambda f, n: (f.iloc[1:], n), "1 planted but not decided [0]"),
    (lambda f, n: (pd.concat([f, f.iloc[:1]]), n), "repeat row_index [0]"),
    (lambda f, n: (f.assign(row_index=f["row_index"] + 1), n), "1 decided but not planted [40]"),
])
def test_score_plants_refuses_a_mismatched_log(change, message):
    frame, names = change(*decisions_for({"length_spread": set(rows_of("long_gold"))}))
    with pytest.raises(CurateError, match=re.escape(message)):
        demo.score_plants(frame, PLANTS, names)


def test_bad_plants_file_is_named(tmp_path):
    data = json.loads(demo.plants_path().read_text())
    data["items"]["3"]["kinds"] = ["typo"]
    bad = tmp_path / "plants.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(InputError) as caught:
        demo.load_plants(bad)
    assert caught.value.path == str(bad) and caught.value.field == "items/3/kinds/0"


def test_demo_plants_cli(tmp_path):
    out = tmp_path / "decisions"
    out.mkdir()
    frame, names = decisions_for({"length_spread": set(rows_of("long_gold")), "never": set()})
    frame.to_parquet(out / "decisions.parquet")
    stage_table(frame, names).to_csv(out / "stages.csv", index=False)
    proc = run_cli("demo", "plants", out, "--out", tmp_path / "caught.csv")
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["typo_prompt", *list(demo.KINDS)[1:], "clean"]
    assert lines[3].split() == ["length_spread", "0", "0", "0", "0", "0", "0", "4", "0"]
    caught = pd.read_csv(tmp_path / "caught.csv")
    assert caught["stage"].tolist() == ["planted", "length_spread", "never", "removed"]
    assert caught.set_index("stage").loc["never"].sum() == 0
    proc = run_cli("demo", "plants", tmp_path, check=False)
    assert proc.returncode == 2 and "no decisions.parquet here" in proc.stderr
    proc = run_cli("demo", "plants", out, "--out", tmp_path / "caught.txt", check=False)
    assert proc.returncode == 2 and "use a .jsonl, .parquet, .csv file" in proc.stderr and proc.stdout == ""
    # decisions made on another benchmark's rows: matched by row number, they would mean nothing
    frame.assign(item_id=frame["item_id"].str.replace("demo/", "hellaswag/", regex=False)).to_parquet(
        out / "decisions.parquet")
    proc = run_cli("demo", "plants", out, check=False)
    assert proc.returncode == 2 and "these decisions are on hellaswag items, not the demo" in proc.stderr


def test_model_free_demo_stages_catch_exactly_their_plants(tmp_path):
    """The demo rules' stages that need no annotator or scorer, run by the real filter on the
    ingested demo: near-duplicates catch the two_right plants, the length stages the long_gold
    plants, and nothing else."""
    import yaml

    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions

    ws = tmp_path / "ws"
    run_cli("init", ws, "--data", demo.benchmark_path(), *INIT_ARGS)
    rules = yaml.safe_load(demo.rules_path().read_text())
    rules["stages"] = [s for s in rules["stages"] if s["name"] in ("near-duplicate", "length-spread", "gold-longest")]
    assert len(rules["stages"]) == 3
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    Filter(ws, FilterOptions(rules=tmp_path / "rules.yaml", out=tmp_path / "out")).run()
    frame, stages = demo.load_decisions(tmp_path / "out")
    table = demo.score_plants(frame, PLANTS, stages)
    caught = table.drop("planted")
    assert caught.loc["near-duplicate"].to_dict() == {**dict.fromkeys(table.columns, 0), "two_right": 4}
    assert caught.loc["length-spread"].to_dict() == {**dict.fromkeys(table.columns, 0), "long_gold": 4}
    assert caught.loc["gold-longest"].sum() == 0

    # ... and the embedded config's release settings publish the 32 items left, offline
    from curate.release import Release
    from curate.release.options import ReleaseOptions
    from curate.release.manifest import verify_dir

    [release] = load_config(cwd=tmp_path).options("release")
    manifest = Release(ws, ReleaseOptions(decisions=tmp_path / "out", name=release.name, version=release.version,
                                          to=str(release.to), license=release.license)).run()
    left = [r for r in range(40) if r not in set(rows_of("two_right")) | set(rows_of("long_gold"))]
    assert manifest["counts"] == {"items": 40, "kept": 32, "removed": 8,
                                  "kept_by_source": dict(collections.Counter(ROWS[r]["domain"] for r in left))}
    assert manifest["kept"] == [f"demo/validation/{r}" for r in left]
    assert manifest["source"]["license"] == "mit"
    assert verify_dir(tmp_path / "demo-out" / "release" / "demo-clean" / "0.1.0") == []


def test_unreadable_plants_file_is_named(tmp_path):
    bad = tmp_path / "plants.json"
    bad.write_text('{"benchmark": "b.jsonl",\n "items": {')
    with pytest.raises(InputError, match="not valid JSON: .* at line 2"):
        demo.load_plants(bad)
    with pytest.raises(InputError, match="plants file not found"):
        demo.load_plants(tmp_path / "none.json")
