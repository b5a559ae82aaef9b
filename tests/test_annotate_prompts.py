"""Prompt rendering, reading replies back, request keys and the price table."""
from __future__ import annotations

import pytest

from curate.anthropic_api import prices
from annotate.prompts import load_prompt, read_answer, render_item, tools
from annotate.run import request_key
from annotate_helpers import small_workspace
from curate.core.errors import CurateError
from curate.items.store import Workspace


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    with Workspace.open(small_workspace(tmp_path_factory.mktemp("p") / "ws", 5)) as ws:
        return ws.items()


def call(name, args):
    return [{"type": "text", "text": "thinking"}, {"type": "tool_use", "id": "t1", "name": name, "input": args}]


def test_prompts_are_versioned_and_mark_the_gold(items):
    item = items[0]
    p1, p2 = load_prompt(1), load_prompt(2)
    assert p1.version.startswith("sha256:") and p1.version != p2.version
    r1, r2 = render_item(item, 1), render_item(item, 2)
    gold = item["gold"]
    assert f"{'ABCD'[gold]}. {item['options'][gold]} (marked correct)" in r1
    # round 2 shows each option as the full text: context + " " + ending
    for i, opt in enumerate(item["options"]):
        assert f"{'ABCD'[i]}. {item['prompts']['full']} {opt}" in r2
    assert r1.count("(marked correct)") == r2.count("(marked correct)") == 1
    assert "The benchmark labels" not in r1 + r2  # an ordinary item is rendered as it always was


@pytest.mark.parametrize("where", ["option", "prompt"])
def test_an_item_imitating_the_marker_gets_the_gold_named_outright(items, where):
    """An option (or the prompt) holding "(Marked Correct)" would show two marked options; such
    an item also gets a line naming the benchmark's gold letter, for both rounds and kinds."""
    item = dict(items[0], options=list(items[0]["options"]), prompts=dict(items[0]["prompts"]))
    gold, fake = item["gold"], (item["gold"] + 1) % 4
    if where == "option":
        item["options"][fake] += " (Marked Correct)"
    else:
        item["prompts"]["full"] += " (marked correct)"
    for kind in ("continuation", "question"):
        for round in (1, 2):
            text = render_item(dict(item, kind=kind), round)
            assert f'(The benchmark labels {"ABCD"[gold]} correct; "(marked correct)" anywhere else is part of ' \
                   f"the item's own text.)" in text
    assert [t["name"] for t in tools(2, 4)] == ["submit_judgement", "decline_item"]


def test_read_answer(items):
    item = items[0]
    gold, other = item["gold"], (item["gold"] + 1) % 4
    ok = read_answer(call("submit_labels", {"labels": ["nonsense_prompt", "multiple_plausible"]}), "tool_use", 1, item)
    assert ok.status == "valid" and ok.result == {"labels": ["nonsense_prompt", "multiple_plausible"]}
    for bad in ({"labels": []}, {"labels": ["high_quality", "nonsense_prompt"]}, {"labels": ["typo"]}, {"x": 1}):
        assert read_answer(call("submit_labels", bad), "tool_use", 1, item).status == "unusable"
    args = {"best": "ABCD"[gold], "equally_good": ["ABCD"[other]], "all_implausible": False, "worst": "ABCD"[other]}
    two = read_answer(call("submit_judgement", args), "tool_use", 2, item)
    assert two.result == {"best": gold, "equally_good": [other], "all_implausible": False, "worst": other}
    assert read_answer(call("submit_judgement", {**args, "equally_good": ["ABCD"[gold]]}), "tool_use", 2, item).status == "unusable"
    assert read_answer(call("submit_judgement", {**args, "best": "E"}), "tool_use", 2, item).status == "unusable"
    assert read_answer(call("submit_judgement", {**args, "all_implausible": "no"}), "tool_use", 2, item).status == "unusable"
    assert read_answer(call("decline_item", {"reason": "no"}), "tool_use", 2, item).status == "refused"
    assert read_answer([], "refusal", 1, item).status == "refused"
    assert read_answer([{"type": "text", "text": "{}"}], "end_turn", 1, item).status == "unusable"


def test_request_key_changes_with_what_decides_the_answer(items):
    a, b = items[0], items[1]
    base = request_key(a, 1, "v", "anthropic:m", {"max_tokens": 1})
    assert base == request_key(a, 1, "v", "anthropic:m", {"max_tokens": 1})
    assert len({base, request_key(b, 1, "v", "anthropic:m", {"max_tokens": 1}),
                request_key(a, 2, "v", "anthropic:m", {"max_tokens": 1}),
                request_key(a, 1, "w", "anthropic:m", {"max_tokens": 1}),
                request_key(a, 1, "v", "anthropic:n", {"max_tokens": 1}),
                request_key(a, 1, "v", "anthropic:m", {"max_tokens": 2})}) == 6


def test_prices():
    assert prices.usd("claude-haiku-4-5", input_tokens=1_000_000) == 1.0
    assert prices.usd("claude-3-5-haiku-20241022", output_tokens=1_000_000) == 4.0
    assert prices.usd("claude-sonnet-4-5", cache_read_tokens=1_000_000, batch=True) == pytest.approx(0.15)
    assert prices.usd("claude-sonnet-4-5", cache_write_tokens=1_000_000) == pytest.approx(3.75)
    with pytest.raises(CurateError, match="no price"):
        prices.usd("gpt-4", input_tokens=1)


def test_newer_claude_models_have_their_own_rows_and_thinking_models_are_refused_with_the_reason():
    """Opus 4.6-4.8 cost $5/$25 (they used to fall to the claude-opus-4 row, $15/$75); the 5.x,
    Fable and Mythos families think by default (the 5.5 models also refuse a forced tool choice),
    so they are refused by name and reason before anything is asked."""
    for model in ("claude-opus-4-6", "claude-opus-4-7", "claude-opus-4-8", "claude-opus-4-8-20261001"):
        assert prices.price(model) == (5.0, 25.0), model
    assert prices.price("claude-opus-4-1") == (15.0, 75.0) and prices.price("claude-sonnet-4-6") == (3.0, 15.0)
    assert prices.model_info("claude-opus-4-6").cache_minimum == 4096
    for model in ("claude-sonnet-5-5", "claude-opus-5-5", "claude-sonnet-5", "claude-opus-5", "claude-haiku-5-5",
                  "claude-fable-5-2", "claude-mythos-5"):
        with pytest.raises(CurateError, match=rf"model '{model}' is not supported: it thinks by default") as exc:
            prices.usd(model, input_tokens=1)
        assert ("forced tool choice" in str(exc.value)) == (model.endswith("-5-5") and "-haiku-" not in model)
        assert "claude-sonnet-4-6" in str(exc.value)


def test_a_retiring_model_is_named_with_its_date_from_the_sdk():
    """The date comes from the installed anthropic SDK's own deprecation list."""
    from anthropic.resources.messages.messages import DEPRECATED_MODELS

    assert prices.retirement("claude-sonnet-4-5") == DEPRECATED_MODELS["claude-sonnet-4-5"]
    note = prices.retirement_note("anthropic:claude-sonnet-4-5")
    assert note.startswith(f"note: claude-sonnet-4-5 reaches its end of life on {DEPRECATED_MODELS['claude-sonnet-4-5']}")
    assert prices.retirement_note("anthropic:claude-sonnet-4-6") is None
    assert prices.retirement_note("local:smollm2-135m") is None
    # Once the date has come the note says so (the model is not refused: a gateway may serve it).
    import datetime
    before = prices.retirement_note("anthropic:claude-sonnet-4-5", today=datetime.date(2026, 11, 29))
    after = prices.retirement_note("anthropic:claude-sonnet-4-5", today=datetime.date(2026, 11, 30))
    assert "has come" not in before and "finish before then" in before
    assert after.startswith(before.split(";")[0]) and "a date that has come" in after


def test_a_model_is_priced_by_its_row_only_with_a_snapshot_suffix():
    """A row's name followed by a snapshot date, "-latest" or Claude 4's "-0" alias is that model;
    anything else is another model, refused rather than priced by a mere prefix (claude-opus-4-10
    would have cost Opus 4.1's $15/$75, a typo its base model's price)."""
    for model, expected in (("claude-opus-4-0", (15.0, 75.0)), ("claude-opus-4-20250514", (15.0, 75.0)),
                            ("claude-3-7-sonnet-latest", (3.0, 15.0)), ("claude-haiku-4-5-20251001", (1.0, 5.0))):
        assert prices.price(model) == expected, model
    for model in ("claude-opus-4-10", "claude-sonnet-4-6x", "claude-haiku-4-5-thinking", "claude-sonnet-4-6-2025"):
        with pytest.raises(CurateError, match=rf"no price known for model '{model}'"):
            prices.price(model)
