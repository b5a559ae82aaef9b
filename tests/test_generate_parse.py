"""Reading generated replies, shuffling options and building prompts: pure functions, on the real
HellaSwag items where items are needed."""
from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest
from scipy import stats

from conftest import HELLASWAG
from generate.parse import parse_reply
from generate.prompts import load_template, numbers_text, plain_text, render, shown_options, shuffle_order, \
    template_names

OPTIONS = ["is using wrap to wrap a pair of skis.", "is ripping level tiles off.", "is holding a rubik's cube.",
           "starts pulling up roofing on a roof."]


@pytest.mark.parametrize("reply, status, shown, method", [
    ("3", "strict", 3, "number"),
    (" 3\n", "strict", 3, "number"),
    ("The answer is 3.", "lenient", 3, "number-in-text"),
    ("(2)", "lenient", 2, "number-in-text"),
    ("Ending 4: starts pulling up roofing on a roof.", "lenient", 4, "number-in-text"),
    ("1. is using wrap to wrap", "lenient", 1, "number-in-text"),
    ("He starts pulling up roofing", "lenient", 4, "option-text"),
    ("is ripping level tiles off", "lenient", 2, "option-text"),
])
def test_readable_replies(reply, status, shown, method):
    parsed = parse_reply(reply, OPTIONS)
    assert (parsed.status, parsed.shown, parsed.method) == (status, shown, method)


@pytest.mark.parametrize("reply, why", [
    ("", "no number from 1 to 4"),
    ("I am not sure which one.", "no number from 1 to 4"),
    ("7", "number 7 is not between 1 and 4"),
    ("1 or 2", "several allowed numbers: 1, 2"),
    ("3.5", "no number"),
    ("2. is holding a rubik's cube.", "number 2 but the text of option 3"),
    ("is using wrap, is ripping level tiles off, is holding a rubik's cube", "about equally"),
])
def test_unreadable_replies_say_why(reply, why):
    parsed = parse_reply(reply, OPTIONS)
    assert parsed.status == "unparsed" and parsed.shown is None and parsed.method is None
    assert why in parsed.detail


def hellaswag_items(n):
    from curate.items.adapters import get_adapter
    adapter = get_adapter("hellaswag")
    with gzip.open(HELLASWAG, "rt") as fh:
        rows = [json.loads(line) for line, _ in zip(fh, range(n))]
    return [adapter.to_item(row, i, "validation") for i, row in enumerate(rows)]


def test_shuffle_is_seeded_per_item_and_seed_and_uniform():
    items = hellaswag_items(400)
    orders = {(it["item_id"], s): shuffle_order(it["content_hash"], s, 4) for it in items for s in range(3)}
    assert all(sorted(o) == [0, 1, 2, 3] for o in orders.values())
    again = {(it["item_id"], s): shuffle_order(it["content_hash"], s, 4) for it in items for s in range(3)}
    assert orders == again
    # different seeds of one item, and different items under one seed, are not in lockstep
    assert sum(orders[(it["item_id"], 0)] != orders[(it["item_id"], 1)] for it in items) > 0.8 * len(items)
    assert len({tuple(orders[(it["item_id"], 0)]) for it in items}) == 24
    # where the gold lands is uniform over the four positions (chi-square, 1200 draws)
    gold_at = Counter(orders[(it["item_id"], s)].index(it["gold"]) for it in items for s in range(3))
    assert stats.chisquare([gold_at[p] for p in range(4)]).pvalue > 0.001


def test_render_numbers_the_shuffled_options_and_drops_an_empty_context():
    tpl = load_template("numbered")
    order = [2, 0, 3, 1]
    instructions, user = render(tpl, "A man is sitting on a roof. he", OPTIONS, order)
    assert "numbered 1 to 4" in instructions
    assert "Text: A man is sitting on a roof. he" in user
    assert f"1. {OPTIONS[2]}\n2. {OPTIONS[0]}\n3. {OPTIONS[3]}\n4. {OPTIONS[1]}" in user
    assert shown_options(OPTIONS, order) == [OPTIONS[2], OPTIONS[0], OPTIONS[3], OPTIONS[1]]
    _, bare = render(tpl, "  ", OPTIONS, order)
    assert "Text:" not in bare and bare.startswith("Endings:")
    assert plain_text(tpl, instructions, user).endswith("\nAnswer:")
    q_instr, q_user = render(load_template("question"), "He walks.", OPTIONS, order)
    assert f"(1) {OPTIONS[2]}" in q_user and "Answer with 1, 2, 3 or 4." in q_user
    assert load_template("numbered").hash != load_template("question").hash
    assert numbers_text(2) == "1 or 2" and set(template_names()) >= {"numbered", "question"}


def test_bad_settings_fail_in_one_line_before_any_work(tmp_path):
    from annotate_helpers import small_workspace
    from conftest import run_cli

    ws = small_workspace(tmp_path / "ws", 3)
    cases = [(["--template", "nope"], "unknown template 'nope'"),
             (["--modes", "full,sideways"], "unknown mode(s) sideways"),
             (["--top-p", "0.9"], "--top-p applies only when sampling"),
             (["--model", "anthropic:claude-haiku-4-5", "--temperature", "0"], "accepts no temperature or top-p"),
             (["--model", "anthropic:"], "expected anthropic:MODEL"),
             (["--model", "anthropic:gpt-4o"], "no price known for model 'gpt-4o'")]
    for extra, message in cases:
        proc = run_cli("generate", ws, "--quiet", *extra, check=False, env={"ANTHROPIC_API_KEY": "x"})
        assert proc.returncode == 2 and message in proc.stderr, (extra, proc.stderr)
    from generate.store import open_generations
    with open_generations(ws) as w:
        assert w.tables()["generations"] == 0 and w.tables()["generation_runs"] == 0


def test_a_missing_key_names_the_command_that_needs_it(tmp_path):
    """Without ANTHROPIC_API_KEY, `curate generate` and `curate annotate` each say that they need
    it and what for, in one line, before anything is stored."""
    from annotate_helpers import small_workspace
    from conftest import one_line_error, run_cli

    ws = small_workspace(tmp_path / "ws", 3)
    no_key = {"ANTHROPIC_API_KEY": ""}
    proc = run_cli("generate", ws, "--model", "anthropic:claude-haiku-4-5", "--quiet", check=False, env=no_key)
    one_line_error(proc, "set ANTHROPIC_API_KEY", "to answer with an anthropic: model (the generate stage)")
    proc = run_cli("annotate", ws, "--round", "1", "--annotator", "anthropic:claude-haiku-4-5", "--quiet",
                   check=False, env=no_key)
    one_line_error(proc, "set ANTHROPIC_API_KEY", "to annotate with an anthropic: annotator (the annotate stage)")
