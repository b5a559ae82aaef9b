"""Asking Claude through the official ``anthropic`` SDK: one item per Messages request.

Why each piece is here:

- The instructions and tool definitions are the same for every item, so the system block carries
  ``cache_control`` and later requests read that prefix from the prompt cache.
- The SDK's own retries are switched off (``max_retries=0``) and ``with_retries`` retries 408,
  409, 429, 5xx (529 included), timeouts and connection errors itself, with capped exponential
  backoff and the server's ``retry-after``, so the progress bar can count retries.
- Authentication, permission, payment / spend-limit and other request errors will not get better
  by asking again: ``Stop`` ends the run cleanly, with everything answered so far kept.
- The API key is read from ``ANTHROPIC_API_KEY`` only; messages that leave this module pass
  through ``redact`` so the key never reaches a log, the workspace or an export.
"""
from __future__ import annotations

import json
import os
import random
import threading
import time
from dataclasses import dataclass, field

import anthropic

from annotate import prices
from annotate.prompts import Answer, kind_of, load_prompt, read_answer, render_item, tools, SUBMIT
from curate.errors import CurateError

MAX_TOKENS = 400
RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
SPEND_WORDS = ("credit balance", "spend limit", "usage limit", "billing")


class Stop(CurateError):
    """An error that retrying cannot fix (bad key, no credit, bad request): end the run."""


class GaveUp(Exception):
    """Transient errors outlasted the retry budget for one request; the item stays pending."""


@dataclass
class Counters:
    """Shared between worker threads for the progress bar."""
    retrying: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def retried(self) -> None:
        with self.lock:
            self.retrying += 1


def api_key() -> str:
    key = os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        raise CurateError("set ANTHROPIC_API_KEY in the environment to annotate with an anthropic: annotator "
                          "(the key is read from there only and never stored)")
    return key


def redact(text: str) -> str:
    key = os.environ.get("ANTHROPIC_API_KEY")
    return text.replace(key, "[redacted]") if key and text else text


def make_client(*, timeout: float = 60.0, key_header: str | None = None) -> anthropic.Anthropic:
    """A client for ``ANTHROPIC_BASE_URL`` (or the public API). ``key_header`` additionally sends
    the key in that header, for compatible servers that read e.g. ``x-api-key``."""
    key = api_key()
    headers = {key_header: key} if key_header else None
    return anthropic.Anthropic(api_key=key, max_retries=0, timeout=timeout, default_headers=headers)


def request_params(model: str, item: dict, round: int) -> dict:
    """The Messages API body for one item (also the ``params`` of a batch request)."""
    prompt = load_prompt(round, kind=kind_of(item))
    return {
        "model": model,
        "max_tokens": MAX_TOKENS,
        "system": [{"type": "text", "text": prompt.instructions, "cache_control": {"type": "ephemeral"}}],
        "tools": tools(round, len(item["options"])),
        "tool_choice": {"type": "any"},
        "messages": [{"role": "user", "content": render_item(item, round)}],
    }


def estimate_input_tokens(params: dict) -> int:
    """A deliberately high token estimate (3 characters a token) for dry runs and --max-cost."""
    text = json.dumps({k: params[k] for k in ("system", "tools", "messages")})
    return len(text) // 3 + 10


def usage_of(message) -> dict:
    u = message.usage
    return {"input_tokens": u.input_tokens or 0, "output_tokens": u.output_tokens or 0,
            "cache_write_tokens": getattr(u, "cache_creation_input_tokens", None) or 0,
            "cache_read_tokens": getattr(u, "cache_read_input_tokens", None) or 0}


def content_blocks(message) -> list[dict]:
    """Reply blocks as plain dicts, keeping only what can be sent back in a follow-up turn."""
    blocks = []
    for b in message.content:
        if b.type == "text":
            blocks.append({"type": "text", "text": b.text})
        elif b.type == "tool_use":
            blocks.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
        else:
            blocks.append({"type": b.type})
    return blocks


def retry_delay(exc: Exception, attempt: int, backoff: float) -> float:
    delay = backoff * (2 ** attempt) * (0.5 + random.random())
    response = getattr(exc, "response", None)
    after = response.headers.get("retry-after") if response is not None else None
    try:
        delay = max(delay, float(after)) if after is not None else delay
    except ValueError:
        pass
    return min(delay, 60.0)


def is_retryable(exc: Exception) -> bool:
    if isinstance(exc, anthropic.APIConnectionError):  # includes timeouts
        return True
    return isinstance(exc, anthropic.APIStatusError) and exc.status_code in RETRYABLE_STATUS


def stop_message(exc: anthropic.APIStatusError) -> str:
    text = redact(str(getattr(exc, "message", exc)))
    if isinstance(exc, anthropic.AuthenticationError):
        why = "authentication failed (check ANTHROPIC_API_KEY)"
    elif isinstance(exc, anthropic.PaymentRequiredError) or any(w in text.lower() for w in SPEND_WORDS):
        why = "the API refused for billing or spend-limit reasons"
    elif isinstance(exc, anthropic.PermissionDeniedError):
        why = "permission denied"
    else:
        why = f"the API rejected the request (HTTP {exc.status_code})"
    return f"{why}: {text}"


def with_retries(call, *, retries: int, backoff: float, counters: Counters):
    """``call()`` with bounded retries on transient errors; Stop on the ones that must not retry."""
    for attempt in range(retries + 1):
        try:
            return call()
        except anthropic.APIStatusError as exc:
            if exc.status_code not in RETRYABLE_STATUS:
                raise Stop(stop_message(exc)) from None
            last = exc
        except anthropic.APIConnectionError as exc:
            last = exc
        if attempt < retries:
            counters.retried()
            time.sleep(retry_delay(last, attempt, backoff))
    raise GaveUp(redact(f"{type(last).__name__}: {getattr(last, 'message', last)}"))


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


def ask(client: anthropic.Anthropic, model: str, item: dict, round: int, *, retries: int, backoff: float,
        parse_retries: int, counters: Counters) -> Reply:
    """Annotate one item: ask, and when the reply cannot be read, say why and ask again (bounded)."""
    params = request_params(model, item, round)
    messages = list(params["messages"])
    attempts: list[dict] = []
    for _ in range(parse_retries + 1):
        message = with_retries(lambda: client.messages.create(**{**params, "messages": messages}),
                               retries=retries, backoff=backoff, counters=counters)
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
    note = f"That answer could not be used: {answer.problem}. Call {SUBMIT[round]} again with a corrected answer."
    if answer.tool_use_id:
        return [{"type": "tool_result", "tool_use_id": answer.tool_use_id, "is_error": True, "content": note}]
    return [{"type": "text", "text": note}]


def reply_usd(model: str, usage: dict, *, batch: bool) -> float:
    return prices.usd(model, batch=batch, **usage)
