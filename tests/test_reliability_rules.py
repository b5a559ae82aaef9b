"""Reliability, rules and decisions (issue 14, items 7 and 9): a key written twice, an annotator
without records, `filter --out` into a folder it does not own, a cp1252 rules file, and
hand-edited decisions: each one clear line (exit 2), nothing written."""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from annotate_helpers import small_workspace
from conftest import one_line_error, run_cli, unwritable_place

RULES = """name: r
stages:
  - name: first
    when: {ids: {row_index: [1, 2]}}
  - name: second
    when: {field: {name: split_type, in: [indomain]}}
"""


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """20 real rows with valid round-1 records of annotator 'test:a' (a test double: no LLM runs here)."""
    from annotate.store import open_annotations, write_annotation

    root = small_workspace(tmp_path_factory.mktemp("rules") / "ws", n=20)
    with open_annotations(root) as w, w.transaction():
        for it in w.items():
            write_annotation(w, {"annotator": "test:a", "round": 1, "item_id": it["item_id"], "status": "valid",
                                 "result": {"labels": ["high_quality"]}, "raw": "{}", "prompt_version": "sha256:t",
                                 "model_snapshot": None, "request_key": it["item_id"], "content_hash": it["content_hash"]})
    return root


def filter_cli(ws, rules_text, out, tmp_path, *, raw: bytes | None = None, check=False):
    rules = tmp_path / "rules.yaml"
    rules.write_bytes(raw if raw is not None else rules_text.encode())
    return run_cli("filter", ws, "--rules", rules, "--out", out, check=check), rules


@pytest.mark.parametrize("text, key, lines", [
    (RULES + "stages:\n  - name: other\n    when: {ids: {row_index: [3]}}\n", "stages", "lines 2 and 7"),
    (RULES.replace("name: second\n", "name: second\n    name: third\n"), "name", "lines 5 and 6"),
    (RULES.replace("[1, 2]}}", "[1, 2], row_index: [4]}}"), "row_index", "lines 4 and 4"),
])
def test_a_key_written_twice_is_refused_naming_key_and_lines(ws, tmp_path, text, key, lines):
    result, rules = filter_cli(ws, text, tmp_path / "out", tmp_path)
    one_line_error(result, str(rules), f"field '{key}'", f"key '{key}' appears twice ({lines})")
    assert not (tmp_path / "out").exists()


def test_a_merge_key_brings_an_anchors_keys_and_may_override_them(ws, tmp_path):
    """`<<: *anchor` (YAML's merge key, which PyYAML's safe loader reads) works in rules: the
    duplicate-key check looks at the keys written in a mapping, not those merged into it."""
    import pandas as pd

    text = ("name: merged\nstages:\n"
            "  - name: listed\n    when: {length_spread: &spread {unit: chars, over: options, gt: 0.99}}\n"
            "  - name: wider\n    when: {length_spread: {<<: *spread, gt: 0.5}}\n")
    result, _ = filter_cli(ws, text, tmp_path / "out", tmp_path, check=True)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [s["stage"] for s in summary["stages"]] == ["listed", "wider"]
    decisions = pd.read_parquet(tmp_path / "out" / "decisions.parquet")
    assert decisions["matched"].map(lambda m: "wider" in list(m)).sum() >= decisions["matched"].map(
        lambda m: "listed" in list(m)).sum()  # gt 0.5 matches at least what gt 0.99 does


@pytest.mark.parametrize("condition", [
    "status: {is: refused, annotator: 'test:typo', round: 1}",
    "status: {is: missing, annotator: 'test:typo', round: 1}",
    "labels: {any: [nonsense_prompt], annotator: 'test:typo', if_missing: no_match}",
    "answer: {is: best_not_gold, annotator: 'test:a', if_missing: match}",   # 'test:a' has no round-2 records
])
def test_an_annotation_condition_naming_an_annotator_without_records_is_an_error(ws, tmp_path, condition):
    text = f"name: r\nstages:\n  - name: s\n    when: {{{condition}}}\n"
    result, _ = filter_cli(ws, text, tmp_path / "out", tmp_path)
    one_line_error(result, "has no round-", "records in this workspace", "annotators with records: test:a (round 1)")
    assert not (tmp_path / "out").exists()


def test_filter_out_refuses_folders_it_does_not_own(ws, tmp_path):
    release = tmp_path / "release"
    (release / "data").mkdir(parents=True)
    (release / "manifest.json").write_text("{}")
    (release / "README.md").write_text("card")
    result, _ = filter_cli(ws, RULES, release, tmp_path)
    one_line_error(result, f"{release}: is a release folder (it holds manifest.json)")
    assert sorted(p.name for p in release.iterdir()) == ["README.md", "data", "manifest.json"]

    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("mine")
    one_line_error(filter_cli(ws, RULES, other, tmp_path)[0], "is not an earlier `curate filter` output (it holds todo.txt)")
    assert [p.name for p in other.iterdir()] == ["todo.txt"]
    as_file = filter_cli(ws, RULES, other / "todo.txt", tmp_path)[0]           # click refuses it first
    assert as_file.returncode == 2 and "is a file" in as_file.stderr and (other / "todo.txt").read_text() == "mine"

    # Its own earlier output is replaced; an empty folder is fine.
    out = tmp_path / "dec"
    out.mkdir()
    filter_cli(ws, RULES, out, tmp_path, check=True)
    (out / ".audit-fingerprint").write_text("x\n")                         # hidden files (the audit's) are fine
    filter_cli(ws, RULES.replace("[1, 2]", "[3]"), out, tmp_path, check=True)
    assert json.loads((out / "summary.json").read_text())["stages"][0]["matched"] == 1
    # A run killed while writing (the summary is removed first, written last) leaves a folder
    # that is still ours to replace.
    (out / "summary.json").unlink()
    filter_cli(ws, RULES, out, tmp_path, check=True)
    assert json.loads((out / "summary.json").read_text())["stages"][0]["matched"] == 2
    # A folder holding only a rules.yaml of someone's is not: the message names it, not hidden files.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "rules.yaml").write_text("name: mine\n")
    (mine / ".hidden").write_text("x")
    one_line_error(filter_cli(ws, RULES, mine, tmp_path)[0], "is not an earlier `curate filter` output (it holds rules.yaml)")


def test_one_run_at_a_time_writes_an_out_folder(ws, tmp_path):
    """Found by an audit: two `curate filter` runs into one --out could leave one run's decisions
    under the other's summary and rules (a release accepted the mix), and two `curate analyze`
    runs one run's plots beside the other's report. A run now holds the folder while it writes;
    the second is one line and changes nothing. Also: a filter killed during its very first write
    (only a temp file in the folder) no longer makes the folder unusable."""
    from curate.core.lock import folder_lock
    out = tmp_path / "dec"
    filter_cli(ws, RULES, out, tmp_path, check=True)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with folder_lock(out, command="filter"):
        one_line_error(filter_cli(ws, RULES.replace("[1, 2]", "[3]"), out, tmp_path)[0],
                       f"{out}: another `curate filter` is writing into this folder")
        report = tmp_path / "report"
        with folder_lock(report, command="analyze"):
            one_line_error(run_cli("analyze", ws, "--out", report, check=False),
                           f"{report}: another `curate analyze` is writing into this folder")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # A report that fails (no scores here) leaves no folder it made behind.
    one_line_error(run_cli("analyze", ws, "--out", tmp_path / "none", check=False), "no scores or generations")
    assert not (tmp_path / "none").exists()

    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / ".decisions.parquet.k1ll3d.tmp").write_bytes(b"PAR1")
    filter_cli(ws, RULES, killed, tmp_path, check=True)
    assert sorted(p.name for p in killed.iterdir()) == ["decisions.parquet", "rules.yaml", "stages.csv", "summary.json"]


def test_a_cp1252_rules_file_is_one_clear_line(ws, tmp_path):
    text = RULES.replace("name: r\n", "name: r\ndescription: caf\u00e9 rules\n")
    result, rules = filter_cli(ws, None, tmp_path / "out", tmp_path, raw=text.encode("cp1252"))
    one_line_error(result, str(rules), "not UTF-8 text: byte 0xe9 at line 2")
    assert not (tmp_path / "out").exists()


@pytest.fixture
def decisions(ws, tmp_path):
    out = tmp_path / "dec"
    filter_cli(ws, RULES, out, tmp_path, check=True)
    return out


def edit_parquet(path, change):
    frame = pd.read_parquet(path)
    change(frame)
    frame.to_parquet(path, index=False)


@pytest.mark.parametrize("case", ["flip kept", "drop a column", "summary not JSON", "summary without stages",
                                  "summary without outputs", "parquet truncated", "stage renamed, hash updated"])
def test_hand_edited_decisions_are_refused_in_one_line(ws, decisions, tmp_path, case):
    from curate.items.sources import file_sha256

    dec, summary_path = decisions / "decisions.parquet", decisions / "summary.json"
    summary = json.loads(summary_path.read_text())
    if case == "flip kept":
        edit_parquet(dec, lambda f: f.__setitem__("kept", ~f["kept"]))
        expected = "changed after `curate filter` wrote it"
    elif case == "drop a column":
        edit_parquet(dec, lambda f: f.pop("first_stage"))
        expected = "changed after `curate filter` wrote it"
    elif case == "summary not JSON":
        summary_path.write_text(summary_path.read_text()[:-20])
        expected = "not a summary written by `curate filter`"
    elif case == "summary without stages":
        summary.pop("stages")
        summary_path.write_text(json.dumps(summary))
        expected = "not a summary written by `curate filter` (KeyError"
    elif case == "summary without outputs":  # the hashes that reveal edits, deleted with the edit
        edit_parquet(dec, lambda f: f.__setitem__("kept", ~f["kept"]))
        summary.pop("outputs")
        summary_path.write_text(json.dumps(summary))
        expected = "not a summary written by `curate filter` (KeyError: 'outputs')"
    elif case == "parquet truncated":
        dec.write_bytes(dec.read_bytes()[:200])
        summary["outputs"]["decisions.parquet"] = file_sha256(dec)
        summary_path.write_text(json.dumps(summary))
        expected = "cannot be read"
    else:  # a careful editor who also updates the recorded hash: the rows still must agree
        edit_parquet(dec, lambda f: f.__setitem__("matched", [["nope"] if len(m) else [] for m in f["matched"]]))
        summary["outputs"]["decisions.parquet"] = file_sha256(dec)
        summary_path.write_text(json.dumps(summary))
        expected = "do not agree with each other and the stages"
    result = run_cli("release", ws, "--decisions", decisions, "--name", "x", "--version", "0.1.0",
                     "--to", tmp_path / "rel", check=False)
    one_line_error(result, expected)
    assert not (tmp_path / "rel").exists()
    shutil.rmtree(decisions)


def test_if_missing_still_covers_items_an_annotator_skipped(ws, tmp_path):
    from curate.core.errors import CurateError
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions
    from curate.items.store import Workspace

    part = tmp_path / "part"
    shutil.copytree(ws, part)
    with Workspace.open(part) as w:
        w.conn.execute("DELETE FROM annotations WHERE item_id IN (SELECT item_id FROM items WHERE row_index < 5)")
    rules = tmp_path / "r.yaml"
    cond = "labels: {{any: [high_quality], annotator: 'test:a'{}}}"
    rules.write_text(f"name: r\nstages:\n  - name: s\n    when: {{{cond.format('')}}}\n")
    with pytest.raises(CurateError, match="5 of 20 items have no round-1 record from annotator 'test:a'"):
        Filter(part, FilterOptions(rules=rules, out=tmp_path / "d1")).run()
    rules.write_text(f"name: r\nstages:\n  - name: s\n    when: {{{cond.format(', if_missing: no_match')}}}\n")
    assert Filter(part, FilterOptions(rules=rules, out=tmp_path / "d2")).run()["stages"][0]["matched"] == 15


def nested_aliases(levels=7, width=10):
    """A few hundred bytes that stand for width**levels conditions (a "billion laughs")."""
    lines = ["name: r", "stages:", "  - name: s0", "    when: &c0 {ids: {row_index: [1]}}"]
    for k in range(1, levels + 1):
        lines += [f"  - name: s{k}", f"    when: &c{k} {{any: [{', '.join([f'*c{k - 1}'] * width)}]}}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text, expected", [
    (nested_aliases(), "expands to more than 10000 nodes once its aliases are expanded"),
    ("name: r\nstages:\n  - name: s\n    when: " + "{not: " * 1000 + "{ids: {row_index: [1]}}" + "}" * 1000 + "\n",
     "nested deeper than 50 levels"),
    ("name: r\nstages:\n  - name: s\n    when: &r {any: [*r]}\n", "a recursive alias"),
])
def test_rules_too_large_deep_or_recursive_through_aliases_are_one_line(ws, tmp_path, text, expected):
    result, rules = filter_cli(ws, text, tmp_path / "out", tmp_path)       # at once: no hang, no RecursionError
    one_line_error(result, str(rules), expected)
    assert not (tmp_path / "out").exists()


def test_anchors_reused_within_limits_still_work(ws, tmp_path):
    text = ("name: r\nstages:\n  - name: a\n    when: &one {ids: {row_index: [1, 2]}}\n"
            "  - name: b\n    when: {not: *one}\n")
    summary = filter_cli(ws, text, tmp_path / "out", tmp_path, check=True)[0]
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["stages"][1]["matched"] == 18, summary


@pytest.mark.parametrize("how", ["chmod", "through a file"])
def test_filter_out_in_an_unwritable_place_is_one_line(ws, tmp_path, how):
    _, named = unwritable_place(tmp_path, how)
    result, _ = filter_cli(ws, RULES, named / "dec", tmp_path)
    one_line_error(result, f"{named / 'dec'}: cannot be written", str(named))


SPREAD = "name: r\nstages:\n  - name: spread\n    when: {length_spread: {unit: chars, over: options, %s}}\n"


@pytest.mark.parametrize("text, expected", [
    (SPREAD % "gt: .nan", ["field 'stages/0/when/length_spread/gt'", "gt nan is not a finite number"]),
    (SPREAD % "le: .inf", ["field 'stages/0/when/length_spread/le'", "le inf is not a finite number"]),
    (SPREAD % "ge: 0.5, lt: 0.3", ["field 'stages/0/when/length_spread'", "ge 0.5 and lt 0.3 leave no value"]),
    (SPREAD % "gt: 0.4, le: 0.4", ["gt 0.4 and le 0.4 leave no value"]),
    (SPREAD % "gt: 1", ["a relative spread lies between 0 and 1"]),
    (SPREAD % "lt: 0", ["a relative spread lies between 0 and 1"]),
    (RULES.replace("split_type", "native_ids.nosuch"),
     ["stage 'second': field: no item has 'native_ids.nosuch'", "split_type"]),
    (RULES.replace("[indomain]", "[indomian]"),
     ["stage 'second': field: split_type is never 'indomian' in this workspace", "indomain, zeroshot"]),
])
def test_rules_that_could_match_nothing_by_mistake_are_refused(ws, tmp_path, text, expected):
    """NaN or empty bounds, a misspelt field or value: each silently matched no item (every item
    kept); now one line naming the rules file and where, nothing written."""
    result, rules = filter_cli(ws, text, tmp_path / "out", tmp_path)
    one_line_error(result, str(rules), *expected)
    assert not (tmp_path / "out").exists()


def test_spread_bounds_that_can_match_still_filter(ws, tmp_path):
    """Equal inclusive bounds and a null field value are still accepted."""
    text = (SPREAD % "ge: 0, le: 0") + "  - name: missing\n    when: {field: {name: split_type, in: [null, indomain]}}\n"
    filter_cli(ws, text, tmp_path / "out", tmp_path, check=True)
    assert (tmp_path / "out" / "summary.json").exists()


def test_a_wrong_value_inside_a_condition_is_named_not_its_neighbours(ws, tmp_path):
    """`unit: characters` was reported as "Unevaluated properties are not allowed ('over', 'unit'
    were unexpected)"; the value at fault comes first now."""
    result, rules = filter_cli(ws, SPREAD.replace("unit: chars", "unit: characters") % "gt: 0.2",
                               tmp_path / "out", tmp_path)
    one_line_error(result, "field 'stages/0/when/length_spread/unit'", "'characters' is not one of")
