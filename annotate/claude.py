"""Asking Claude through the official ``anthropic`` SDK: one item per Messages request.

Why each piece is here:

- The instructions and tool definitions are the same for every item. When that prefix is at
  least the model's minimum cacheable length (``annotate/prices.py``), the system block carries
  ``cache_control`` and later requests read it from the prompt cache; below it the API would
  ignore the mark, so none is sent. The ledger keeps the cache reads the API reports, nothing else.
- Spend is bounded before it happens: ``input_bound`` is an upper bound of a request's input
  tokens that needs no API call, ``attempt_bounds`` prices each request of an item (every re-ask
  included, each with its longer conversation) at that bound and ``max_tokens`` per reply,
  ``worst_case_usd`` sums them, and ``count_tokens`` asks the endpoint for its count where it
  offers one (dry runs). ``annotate/spend.py`` reserves them under ``--max-cost`` and keeps a
  request the client gave up on counted as possibly billed.
- The SDK's own retries are switched off (``max_retries=0``) and ``with_retries`` retries 408,
  409, 429, 5xx (529 included), timeouts and connection errors itself, with capped exponential
  backoff and the server's ``retry-after``, so the progress bar can count retries.
- Authentication, permission, payment / spend-limit and other request errors will not get better
  by asking again, nor will an endpoint that answers 200 with HTML or broken JSON: ``Stop`` ends
  the run cleanly, with everything answered so far kept.
- The API key is read from ``ANTHROPIC_API_KEY`` only; messages that leave this module pass
  through ``curate.secrets.redact`` so the key never reaches a log, the workspace or an export.
"""
from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from dataclasses import dataclass, field

import anthropic

from annotate import prices
from annotate.prompts import Answer, kind_of, load_prompt, read_answer, render_item, tools, SUBMIT
from curate.errors import CurateError
from curate.secrets import redact

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


#: An HTTP header name (RFC 9110 token).
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def make_client(*, timeout: float = 60.0, key_header: str | None = None) -> anthropic.Anthropic:
    """A client for ``ANTHROPIC_BASE_URL`` (or the public API). ``key_header`` additionally sends
    the key in that header, for compatible servers that read e.g. ``x-api-key``.

    Settings no request can succeed with fail here, in one line naming the setting: the HTTP
    library would report a key with a line break as a "Connection error" and the run would
    retry it with backoff."""
    key = api_key()
    if any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise CurateError("ANTHROPIC_API_KEY holds a line break or another control character (a trailing "
                          "newline from a file?); remove it")
    if key_header is not None and not HEADER_NAME.fullmatch(key_header):
        raise CurateError(f"--key-header {key_header!r} is not a valid HTTP header name")
    headers = {key_header: key} if key_header else None
    try:
        client = anthropic.Anthropic(api_key=key, max_retries=0, timeout=timeout, default_headers=headers)
    except Exception as exc:  # the HTTP library's InvalidURL and kin
        raise CurateError(bad_base_url(str(exc))) from None
    if client.base_url.scheme not in ("http", "https") or not client.base_url.host:
        raise CurateError(bad_base_url("give http(s)://HOST[:PORT][/PATH]"))
    port = client.base_url.port
    if port is not None and not 0 < port < 65536:  # the HTTP library wraps it into another port
        raise CurateError(bad_base_url(f"port {port} is not a TCP port (1-65535)"))
    return client


def bad_base_url(why: str) -> str:
    url = redact(os.environ.get("ANTHROPIC_BASE_URL") or "")
    return f"ANTHROPIC_BASE_URL {url!r} is not a usable URL: {redact(why)}"


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


# --- how many tokens a request can cost ------------------------------------------------------

#: Framing tokens the API may add around each message or content block, and once per request.
BLOCK_OVERHEAD, REQUEST_OVERHEAD = 8, 32
#: A reply sent back as the assistant turn of a re-ask: at most ``MAX_TOKENS`` of content it was
#: generated as, plus its framing.
ECHO_TOKENS = MAX_TOKENS + 64
#: The repair note of a re-ask is cut to this many UTF-8 bytes, so its tokens are bounded too.
REPAIR_BYTES = 1024
REASK_GROWTH = ECHO_TOKENS + REPAIR_BYTES + 4 * BLOCK_OVERHEAD


def _blocks(params: dict) -> int:
    messages = params["messages"]
    return (len(params["system"]) + len(params["tools"]) + len(messages)
            + sum(len(m["content"]) if isinstance(m["content"], list) else 1 for m in messages))


def input_bound(params: dict) -> int:
    """An upper bound of the input tokens ``params`` is billed for, without asking the API.

    A byte-level tokenizer (as Claude's is) never makes a token of less than one byte: the UTF-8
    bytes of the request's JSON (system, tools and messages: every text the model reads, plus
    JSON syntax) bound the tokens of its content. Added: framing per message and block, and the
    tool-use system prompt the API inserts (not in the body; per model in ``annotate/prices.py``).
    English text runs about 4 bytes a token, so this is roughly 4x the true count."""
    body = {k: params[k] for k in ("system", "tools", "messages")}
    size = len(json.dumps(body, ensure_ascii=False).encode("utf-8"))
    return size + BLOCK_OVERHEAD * _blocks(params) + REQUEST_OVERHEAD + prices.model_info(params["model"]).tool_prompt


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


def count_tokens(client: anthropic.Anthropic, params: dict, *, retries: int, backoff: float,
                 counters: Counters) -> int | None:
    """The endpoint's own count of ``params``' input tokens (``messages.count_tokens``, tool-use
    system prompt included), or None where the endpoint does not offer counting or cannot be
    reached (the caller falls back to ``input_bound``)."""
    fields = {k: params[k] for k in ("model", "system", "tools", "tool_choice", "messages") if k in params}

    def call():
        try:
            counted = client.messages.count_tokens(**fields)
        except anthropic.APIStatusError as exc:
            if exc.status_code in (404, 405, 501):
                return None
            raise
        n = getattr(counted, "input_tokens", None)
        return n if isinstance(n, int) else None
    try:
        return with_retries(call, client=client, retries=retries, backoff=backoff, counters=counters)
    except GaveUp:
        return None


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


def cacheable(tokens: int, model: str) -> bool:
    """Whether the API caches a prefix of ``tokens`` tokens for ``model``."""
    return tokens >= prices.model_info(model).cache_minimum


def usage_of(message) -> dict:
    u = message.usage
    return {"input_tokens": u.input_tokens or 0, "output_tokens": u.output_tokens or 0,
            "cache_write_tokens": getattr(u, "cache_creation_input_tokens", None) or 0,
            "cache_read_tokens": getattr(u, "cache_read_input_tokens", None) or 0}


def not_an_api_reply(client: anthropic.Anthropic, reply, what: str) -> Stop:
    """The Stop for a 200 reply that is not what the API sends (an HTML login page, a proxy's
    error text, a JSON object of another shape)."""
    if isinstance(reply, str):
        shown = " ".join(reply.split())[:80]
        found = f"text, not JSON: {shown!r}" if shown else "an empty body"
    else:
        found = f"JSON without the fields of {what}"
    return Stop(f"{client.base_url} answered HTTP 200 with {found}; that is not the Anthropic API "
                f"(check ANTHROPIC_BASE_URL and any proxy in between)")


def checked_message(client: anthropic.Anthropic, message) -> anthropic.types.Message:
    if (not isinstance(message, anthropic.types.Message) or not isinstance(message.content, list)
            or message.usage is None or message.usage.output_tokens is None):
        raise not_an_api_reply(client, message, "a message")
    return message


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


def with_retries(call, *, client: anthropic.Anthropic, retries: int, backoff: float, counters: Counters):
    """``call()`` with bounded retries on transient errors; Stop on the ones that must not retry.
    ``client``: the one ``call`` uses, so an error names its endpoint."""
    for attempt in range(retries + 1):
        try:
            return call()
        except json.JSONDecodeError as exc:  # a 200 whose JSON body is cut off or garbled
            raise Stop(redact(f"{client.base_url} answered HTTP 200 with broken JSON ({exc.msg} at character "
                              f"{exc.pos}); that is not the Anthropic API (check ANTHROPIC_BASE_URL and any proxy "
                              f"in between)")) from None
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


def ask(client: anthropic.Anthropic, params: dict, item: dict, round: int, *, tab, retries: int, backoff: float,
        parse_retries: int, counters: Counters) -> Reply:
    """Annotate one item (``params`` from ``request_params``): ask, and when the reply cannot be
    read, say why and ask again (bounded). Each request goes through ``tab.send``
    (``annotate.spend.Tab``: the cap and the ledger)."""
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
