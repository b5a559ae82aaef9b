"""Rules files: schema checks with the path of the bad key, defaults, and the shipped files."""
from __future__ import annotations

import pytest

from conftest import ROOT, run_cli

GOOD = """
name: t
defaults: {tokenizer: smollm2-135m, annotator: "x:y"}
stages:
  - name: spread
    when: {length_spread: {unit: tokens, over: options, gt: 0.3}}
  - name: both
    when:
      all:
        - labels: {any: [nonsense_prompt]}
        - not: {field: {name: source, in: [wikihow]}}
"""


def load(tmp_path, text, **kw):
    from curate.filter.rules import load_rules
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    return load_rules(path, **kw)


def test_defaults_fill_conditions_and_overrides_win(tmp_path):
    rules = load(tmp_path, GOOD, annotator="anthropic:claude-x")
    assert rules["stages"][0]["when"]["length_spread"] == {"unit": "tokens", "over": "options", "gt": 0.3,
                                                           "mode": "full", "tokenizer": "smollm2-135m"}
    assert rules["stages"][1]["when"]["all"][0]["labels"]["annotator"] == "anthropic:claude-x"
    assert rules["text"] == GOOD and rules["sha256"].startswith("sha256:")


@pytest.mark.parametrize("text, where, message", [
    (GOOD.replace("gt: 0.3", "gt: 0.3, bogus: 1"), "stages/0/when/length_spread", "'bogus' was unexpected"),
    (GOOD.replace("nonsense_prompt", "nonsense_promt"), "stages/1/when/all/0/labels/any/0", "is not one of"),
    (GOOD.replace("not:", "nor:"), "stages/1/when/all/1", "'nor' was unexpected"),
    (GOOD.replace("name: both", "name: spread"), "stages/1/name", "used twice"),
    (GOOD.replace("unit: tokens", "unit: chars, tokenizer: t"), "stages/0/when/length_spread/tokenizer", "only applies"),
    (GOOD.replace("name: t\n", ""), "<root>", "'name' is a required property"),
    ("name: t\nstages: [\n", None, "not valid YAML at line"),
])
def test_bad_rules_name_the_path_of_the_bad_key(tmp_path, text, where, message):
    from curate.core.errors import InputError
    with pytest.raises(InputError) as exc:
        load(tmp_path, text)
    assert message in str(exc.value)
    assert str(tmp_path / "rules.yaml") in str(exc.value)
    if where:
        assert exc.value.field == where


def test_missing_annotator_or_tokenizer_is_an_error(tmp_path):
    from curate.core.errors import InputError
    text = GOOD.replace('defaults: {tokenizer: smollm2-135m, annotator: "x:y"}\n', "")
    with pytest.raises(InputError, match="unit 'tokens' needs a tokenizer"):
        load(tmp_path, text)
    with pytest.raises(InputError, match="no annotator named here"):
        load(tmp_path, text, tokenizer="smollm2-135m")


def test_cli_reports_a_bad_rules_file_in_one_line(tmp_path, hellaswag_ws):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: t\nstages:\n  - name: a\n    when: {ids: {row_index: [1], item_id: [x]}}\n")
    result = run_cli("filter", hellaswag_ws, "--rules", bad, "--out", tmp_path / "out", check=False)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {bad}, field 'stages/0/when/ids':")
    assert not (tmp_path / "out").exists()


def test_schema_labels_are_the_annotation_labels():
    import schemas
    from annotate.store import LABELS
    assert tuple(schemas.load("rules")["$defs"]["label_list"]["items"]["enum"]) == LABELS


def test_shipped_rules_files_load():
    from curate.filter.rules import load_rules
    golden = load_rules(ROOT / "rules" / "goldenswag.yaml")
    assert len(golden["stages"]) == 10
    core = load_rules(ROOT / "rules" / "zero-prompt-core.yaml")
    assert [s["name"] for s in core["stages"]] == ["study-refused", "length-spread", "gold-longest", "zero-prompt-core"]
