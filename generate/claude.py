"""Asking Claude for a generated answer, through the shared client and retries.

``curate.anthropic_api.client`` supplies the client (key from ``ANTHROPIC_API_KEY`` only, SDK retries off),
``with_retries`` (408/409/429/5xx/529, timeouts and connection errors retried with backoff;
authentication, permission, billing and bad-request errors stop the run) and the usage reading;
``curate.anthropic_api.prices`` prices every reply. What is particular to generation lives here: a plain
text request (no tools), the optional re-ask when a reply cannot be read, and the worst-case
cost of one request with its re-asks, which ``--max-cost`` reserves before sending
(``curate.anthropic_api.spend``, which also writes each request to the ledger before it is sent).
"""
from __future__ import annotations

from curate.anthropic_api import client as api, prices
from generate.parse import Parsed, parse_reply
from generate.prompts import numbers_text

REASK = "Please reply with the number of the best option only: {numbers}."


def request_params(model: str, instructions: str, user: str, *, max_new_tokens: int) -> dict:
    """The Messages API body. It carries no sampling settings: the API version the anthropic SDK
    sends (2026-10-21, SDK 2.x) rejects temperature, top_p and top_k, so Claude samples with its
    own defaults and its replies are not reproducible from a seed (the seed still fixes the
    option order)."""
    return {"model": model, "max_tokens": max_new_tokens, "system": instructions,
            "messages": [{"role": "user", "content": user}]}


def attempt_bounds(params: dict, k: int, parse_retries: int) -> list[float]:
    """The most each request of a unit can cost, its first ask and every re-ask: the input bound
    of ``curate.anthropic_api.client`` (a token is never less than one UTF-8 byte; framing and the tool
    prompt counted although no tool is sent), every reply at max_tokens, and each re-ask
    resending the conversation so far (the earlier reply, at most max_tokens, and the reminder's
    bytes). ``k``: the number of options."""
    base = api.input_bound({**params, "tools": [], "system": [{"type": "text", "text": params["system"]}]})
    reminder = len(REASK.format(numbers=numbers_text(k)).encode("utf-8"))
    turn = params["max_tokens"] + reminder + 4 * api.BLOCK_OVERHEAD
    return [prices.usd(params["model"], input_tokens=base + a * turn, output_tokens=params["max_tokens"])
            for a in range(parse_retries + 1)]


def worst_case_usd(params: dict, k: int, parse_retries: int) -> float:
    """An upper bound on what one request and all its re-asks can cost (``attempt_bounds``)."""
    return sum(attempt_bounds(params, k, parse_retries))


def reply_text(message) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


def ask(client, params: dict, options: list[str], *, tab, parse_retries: int, retries: int, backoff: float,
        counters: api.Counters) -> tuple[Parsed, list[dict]]:
    """The parsed answer and every reply ({text, stop_reason, usage, model, usd}). An unreadable
    reply is followed by a reminder turn, at most ``parse_retries`` times; a refusal is final and
    unparsed, whatever text came before it. A 200 that is not a message ends the run (Stop).
    Each request goes through ``tab.send`` (``curate.anthropic_api.spend.Tab``: the cap and the ledger)."""
    messages = list(params["messages"])
    attempts: list[dict] = []
    for a in range(parse_retries + 1):
        message = api.with_retries(lambda: tab.send(a, lambda: api.checked_message(
            client, client.messages.create(**{**params, "messages": messages}))),
            client=client, retries=retries, backoff=backoff, counters=counters)
        text, usage = reply_text(message), api.usage_of(message)
        parsed = parse_reply(text, options)
        attempts.append({"text": text, "stop_reason": message.stop_reason, "usage": usage, "model": message.model,
                         "usd": prices.usd(params["model"], **usage)})
        if parsed.status != "unparsed" or message.stop_reason == "refusal":
            break
        messages += [{"role": "assistant", "content": text or "(no reply)"},
                     {"role": "user", "content": REASK.format(numbers=numbers_text(len(options)))}]
    if attempts[-1]["stop_reason"] == "refusal":  # partial text before a refusal is no answer
        parsed = Parsed("unparsed", None, None, "the model refused")
    return parsed, attempts
