"""Annotating with Claude: one item per Messages request, through the shared client
(``curate.anthropic_api.client``: the client, retries, byte bounds, token counting).

Why each piece is here:

- The instructions and tool definitions are the same for every item. When that prefix is at
  least the model's minimum cacheable length (``curate/anthropic_api/prices.py``), the system
  block carries ``cache_control`` and later requests read it from the prompt cache; below it the
  API would ignore the mark, so none is sent. The ledger keeps the cache reads the API reports,
  nothing else.
- Spend is bounded before it happens: ``attempt_bounds`` prices each request of an item (every
  re-ask included, each with its longer conversation) at the client's ``input_bound`` and
  ``max_tokens`` per reply, and ``worst_case_usd`` sums them. ``curate/anthropic_api/spend.py``
  reserves them under ``--max-cost`` and keeps a request the client gave up on counted as
  possibly billed.
- A reply that cannot be read is answered with why (``repair_turn``) and asked again, bounded.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import anthropic

from annotate.prompts import Answer, kind_of, load_prompt, read_answer, render_item, tools, SUBMIT
from curate.anthropic_api import prices
from curate.anthropic_api.client import BLOCK_OVERHEAD, Counters, checked_message, content_blocks, count_tokens, \
    usage_of, with_retries

MAX_TOKENS = 400


def request_params(model: str, item: dict, round: int, *, cache: bool = False) -> dict:
    """The Messages API body for one item (also the ``params`` of a batch request); ``cache``
    marks the shared prefix (tools and instructions) for the prompt cache. The instructions
    are those of the item's kind (a question to answer, or a text to continue)."""
    system = {"type": "text", "text": load_prompt(round, kind=kind_of(item)).instructions}
    if cache:
        system["cache_control"] = {"type": "ephemeral"}
    return {
        "model": model,
        "max_tokens": MAX_TOKENS,
        "system": [system],
        "tools": tools(round, len(item["options"])),
        "tool_choice": {"type": "any"},
        "messages": [{"role": "user", "content": render_item(item, round)}],
    }


#: A reply sent back as the assistant turn of a re-ask: at most ``MAX_TOKENS`` of content it was
#: generated as, plus its framing.
ECHO_TOKENS = MAX_TOKENS + 64
#: The repair note of a re-ask is cut to this many UTF-8 bytes, so its tokens are bounded too.
REPAIR_BYTES = 1024
REASK_GROWTH = ECHO_TOKENS + REPAIR_BYTES + 4 * BLOCK_OVERHEAD


def attempt_bounds(params: dict, input_tokens: int, *, attempts: int, batch: bool) -> list[float]:
    """The most each request of an item can cost: ``attempts`` requests (the first ask and its
    re-asks), the k-th carrying k earlier replies and repair notes, each reply ``max_tokens``
    long, every input token priced as a cache write when the prefix is marked for caching (the
    dearest way)."""
    cached = any("cache_control" in block for block in params["system"])
    return [prices.usd(params["model"], output_tokens=params["max_tokens"], batch=batch,
                       **{"cache_write_tokens" if cached else "input_tokens": input_tokens + k * REASK_GROWTH})
            for k in range(attempts)]


def worst_case_usd(params: dict, input_tokens: int, *, attempts: int, batch: bool) -> float:
    """The most an item can cost: the sum of its ``attempt_bounds``."""
    return sum(attempt_bounds(params, input_tokens, attempts=attempts, batch=batch))


def prefix_tokens(client: anthropic.Anthropic | None, model: str, item: dict, round: int, **retry) -> tuple[int, str]:
    """Tokens of the prefix every request shares (tool-use system prompt, tools, instructions)
    and how they were found: the endpoint's count (a request with the prefix minus one without),
    or, where it cannot count, an estimate at 4 bytes a token."""
    params = request_params(model, item, round)
    tiny = {"model": model, "messages": [{"role": "user", "content": "x"}]}
    if client is not None:
        whole = count_tokens(client, {**params, **tiny}, **retry)
        bare = count_tokens(client, tiny, **retry) if whole else None
        if whole is not None and bare is not None:
            return whole - bare, "count_tokens"
    prefix = {"system": params["system"], "tools": params["tools"]}
    estimate = len(json.dumps(prefix, ensure_ascii=False).encode("utf-8")) // 4
    return estimate + prices.model_info(model).tool_prompt, "estimate"


@dataclass
class Reply:
    """One item's outcome: status valid / invalid / refused, every reply kept for ``raw``."""
    status: str
    result: dict | None
    attempts: list[dict]          # {"content", "stop_reason", "problem", "usage", "model"}
    model_snapshot: str | None

    @property
    def raw(self) -> str:
        return json.dumps([{k: a[k] for k in ("content", "stop_reason", "problem")} for a in self.attempts],
                          ensure_ascii=False)


def judge(answer: Answer) -> str | None:
    return None if answer.status in ("valid", "refused") else answer.problem


def ask(client: anthropic.Anthropic, params: dict, item: dict, round: int, *, tab, options, counters: Counters) -> Reply:
    """Annotate one item (``params`` from ``request_params``): ask, and when the reply cannot be
    read, say why and ask again (bounded by ``options.parse_retries``; ``options``: the run's
    ``AnnotateOptions``). Each request goes through ``tab.send`` (``curate.anthropic_api.spend.Tab``:
    the cap and the ledger)."""
    retries, backoff, parse_retries = options.retries, options.backoff, options.parse_retries
    messages = list(params["messages"])
    attempts: list[dict] = []
    for k in range(parse_retries + 1):
        message = with_retries(lambda: tab.send(k, lambda: checked_message(
            client, client.messages.create(**{**params, "messages": messages}))),
            client=client, retries=retries, backoff=backoff, counters=counters)
        blocks = content_blocks(message)
        answer = read_answer(blocks, message.stop_reason, round, item)
        attempts.append({"content": blocks, "stop_reason": message.stop_reason, "problem": judge(answer),
                         "usage": usage_of(message), "model": message.model})
        if answer.status != "unusable":
            return Reply(answer.status, answer.result, attempts, message.model)
        messages += [{"role": "assistant", "content": echo_blocks(blocks)},
                     {"role": "user", "content": repair_turn(answer, round)}]
    return Reply("invalid", None, attempts, attempts[-1]["model"])


def echo_blocks(blocks: list[dict]) -> list[dict]:
    """The reply as the next turn's assistant message: its text and at most its first tool call
    (every tool call sent back needs a tool_result, and we answer only the first)."""
    kept = [b for b in blocks if b["type"] == "text" and b["text"]]
    calls = [b for b in blocks if b["type"] == "tool_use"]
    return kept + calls[:1] or [{"type": "text", "text": "(empty reply)"}]


def repair_turn(answer: Answer, round: int) -> list[dict]:
    """The user turn of a re-ask: why the answer was unusable, cut to ``REPAIR_BYTES``."""
    ending = f". Call {SUBMIT[round]} again with a corrected answer."
    start = "That answer could not be used: "
    room = REPAIR_BYTES - len((start + ending).encode("utf-8"))
    problem = (answer.problem or "").encode("utf-8")[:room].decode("utf-8", errors="ignore")
    note = start + problem + ending
    if answer.tool_use_id:
        return [{"type": "tool_result", "tool_use_id": answer.tool_use_id, "is_error": True, "content": note}]
    return [{"type": "text", "text": note}]
