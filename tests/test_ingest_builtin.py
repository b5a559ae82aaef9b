"""The built-in adapters against lm-evaluation-harness 0.4.13's own task code, on every item.

lm-eval's task yaml and utils of each benchmark are pointed at the local data file
(benchmarks/lmeval_reference.py) and its requests built without a model; every item's
(context, continuation) pairs in the adapter's default formulation, its gold, and (where lm-eval
reports acc_norm) the choice texts whose lengths normalize it must be equal, character for
character. MMLU runs as lm-eval's 57 subject tasks, in both formulations.
"""
from __future__ import annotations

import pytest

from benchmarks.lmeval_reference import SHARED_DATA, shared_file
from conftest import SHARED, run_cli
from curate.items import formulations
from curate.items.adapters import default_formulation, get_adapter
from curate.items.canonical import PLACEHOLDER
from curate.items.store import Workspace

BENCHMARKS = SHARED / "benchmarks"
DATA = SHARED_DATA


def data_file(name):
    return shared_file(name, BENCHMARKS)


def our_items(name):
    from curate.items.ingest import build_items
    from curate.items.sources import open_source
    path, split = data_file(name)
    source = open_source(str(path), split=split)
    items, _ = build_items(source.rows, get_adapter(name), split=split, where=str(path))
    return items


def requests_of(item, formulation):
    s = formulations.scored(item, "full", formulation)
    return [(c, s.delimiter + t) for c, t in zip(s.contexts, s.continuations)]


def compare(items, reference, formulation):
    assert len(items) == len(reference)
    for item, ref in zip(items, reference):
        assert requests_of(item, formulation) == ref["requests"], item["item_id"]
        assert item["gold"] == ref["gold"], item["item_id"]
        if "acc_norm" in ref["metrics"]:  # lm-eval divides by len(choice): our n_chars must be that
            assert formulations.scored(item, "full", formulation).continuations == ref["choices"], item["item_id"]


@pytest.mark.parametrize("name", sorted(DATA))
def test_requests_equal_lmeval_on_every_item(name):
    from benchmarks.lmeval_reference import lmeval_requests
    items = our_items(name)
    adapter = get_adapter(name)
    compare(items, lmeval_requests(name, data_file(name)[0]), default_formulation(adapter))
    if name == "mmlu":  # the cloze formulation is lm-eval's mmlu_*_continuation
        compare(items, lmeval_requests("mmlu_cloze", data_file(name)[0]), "cloze")


def test_defaults_and_sources():
    assert {n: default_formulation(get_adapter(n)) for n in DATA} == {
        n: ("letters" if n in ("mmlu", "commonsense_qa") else "cloze") for n in DATA}
    items = our_items("mmlu")
    assert len({it["source"] for it in items}) == 57 and items[0]["source"] == "abstract_algebra"


def first(name):
    path, split = data_file(name)
    import gzip
    import json
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return get_adapter(name).to_item(json.loads(fh.readline()), 0, split)


def test_prompt_modes_as_the_ingest_page_says():     # docs/stages/ingest.md, Built-in benchmarks
    """zero keeps only the template's fixed text; placeholder puts the filler before it;
    choice-only is empty (letters: the lettered options alone)."""
    arc = first("arc_easy")
    assert arc["prompts"]["zero"] == "Answer:" and arc["prompts"]["placeholder"] == PLACEHOLDER + "Answer:"
    assert formulations.letters_context(arc, "choice-only").startswith("A. cellular telephone\nB. television")
    assert formulations.letters_context(arc, "zero") == formulations.letters_context(arc, "choice-only")
    assert first("social_iqa")["prompts"]["zero"] == "A:" and first("openbookqa")["prompts"]["zero"] == ""
    mmlu = first("mmlu")
    assert formulations.letters_context(mmlu, "zero") == (
        "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
        "A. 0\nB. 4\nC. 2\nD. 6\nAnswer:")
    assert mmlu["prompts"]["zero"] == "The following are questions (with answers) about abstract algebra.\n\nAnswer:"
    copa = first("copa")
    assert copa["prompts"]["zero"] == "therefore" and copa["options"][0] == " the toilet filled with water."
    wino = first("winogrande")
    zero = formulations.scored(wino, "zero")
    assert zero.contexts == ["Sarah", "Maria"] and zero.continuations == ["always got the easier cases."] * 2
    assert formulations.scored(wino, "choice-only").contexts == ["", ""]
    assert formulations.scored(wino, "choice-only").continuations == ["Sarah", "Maria"]
    assert formulations.display_texts(wino) == [
        "Sarah was a much better surgeon than Maria so Sarah always got the easier cases.",
        "Sarah was a much better surgeon than Maria so Maria always got the easier cases."]


def test_rotated_letters_move_the_gold_letter():
    sciq = first("sciq")
    assert sciq["gold"] == 3
    for k in range(4):
        s = formulations.scored(sciq, "full", formulations.rotated(k))
        assert s.continuations[3] == "ABCD"[(3 + k) % 4]
        assert f"{'ABCD'[(3 + k) % 4]}. darwin\n" in s.contexts[0]
    with pytest.raises(Exception, match="more than 4 options"):
        formulations.scored(sciq, "full", "letters+r4")


def test_cli_init_from_the_shared_folder(tmp_path):
    """`--data` may name the benchmark's folder: the split's file is picked from it."""
    out = run_cli("init", tmp_path / "ws", "--benchmark", "mmlu", "--data", BENCHMARKS / "mmlu", "--split", "dev").stdout
    assert "285 items" in out
    with Workspace.open(tmp_path / "ws") as ws:
        assert ws.meta("formulation") == "letters" and ws.meta("split") == "dev"
    # Items with the new fields (and no native ids) export to every format.
    import pandas as pd
    run_cli("init", tmp_path / "wino", "--benchmark", "winogrande", "--data", BENCHMARKS / "winogrande", "--limit", "4")
    for ext in ("parquet", "csv", "jsonl"):
        run_cli("items", tmp_path / "wino", "--out", tmp_path / f"items.{ext}")
    frame = pd.read_parquet(tmp_path / "items.parquet")
    assert len(frame) == 4 and frame["partial"].iloc[0]["continuation"] == "always got the easier cases."


@pytest.mark.parametrize("name, field, path", [
    ("piqa", "sol2", ("sol2",)), ("social_iqa", "answerB", ("answerB",)), ("sciq", "distractor1", ("distractor1",)),
    ("copa", "choice1", ("choice1",)), ("winogrande", "option2", ("option2",)),
    ("arc_easy", "choices.text[1]", ("choices", "text", 1)), ("mmlu", "choices[1]", ("choices", 1)),
])
@pytest.mark.parametrize("blank", ["", "   ", "\u200b", "\ufeff \u2060"])  # zero-width characters show nothing either
def test_an_empty_or_blank_option_is_refused_naming_its_source_field(name, field, path, blank):
    """The first real row of each built-in with one option emptied or made blank: refused naming
    the benchmark's own field (not the canonical item's 'options/1'), as MMLU and generic do."""
    import copy

    from curate.items.adapters.fields import FieldError
    from curate.items.sources import open_source

    data, split = data_file(name)
    row = copy.deepcopy(open_source(str(data), split=split).rows[0])
    holder = row
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = blank
    with pytest.raises(FieldError) as err:
        get_adapter(name).to_item(row, 0, split)
    assert err.value.field == field


def test_an_mmlu_answer_letter_beyond_the_options_is_named_as_given():
    import copy

    from curate.items.adapters.fields import FieldError
    from curate.items.sources import open_source

    data, split = data_file("mmlu")
    row = dict(copy.deepcopy(open_source(str(data), split=split).rows[0]), answer="K")
    with pytest.raises(FieldError, match=r"answer 'K' is not one of the letters A, B, C, D"):
        get_adapter("mmlu").to_item(row, 0, split)
    assert get_adapter("mmlu").to_item(dict(row, answer="c"), 0, split)["gold"] == 2


def test_a_mistyped_local_path_is_not_tried_on_the_hub(tmp_path):
    """A path that can only be local (a data file suffix, ./, more than OWNER/NAME) and does not
    exist is refused at once as missing, not retried on the Hub for half a minute."""
    for data in ("data/missing.jsonl", "./missing", "a/b/c", "missing.csv.gz"):
        proc = run_cli("init", tmp_path / "ws", "--benchmark", "piqa", "--data", data, check=False)
        assert proc.returncode == 2 and f"{data}: no such file or folder" in proc.stderr, proc.stderr
