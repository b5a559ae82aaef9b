"""The Anthropic Messages API client that annotation and generation share, through the official
``anthropic`` SDK.

Why each piece is here:

- The SDK's own retries are switched off (``max_retries=0``) and ``with_retries`` retries 408,
  409, 429, 5xx (529 included), timeouts and connection errors itself, with capped exponential
  backoff and the server's ``retry-after``, so the progress bar can count retries.
- Authentication, permission, payment / spend-limit and other request errors will not get better
  by asking again, nor will an endpoint that answers 200 with HTML or broken JSON: ``Stop`` ends
  the run cleanly, with everything answered so far kept.
- Spend is bounded before it happens: ``input_bound`` is an upper bound of a request's input
  tokens that needs no API call (``curate/anthropic_api/prices.py`` has the tool prompt the API
  adds), and ``count_tokens`` asks the endpoint for its count where it offers one (dry runs).
  ``curate/anthropic_api/spend.py`` reserves the worst cases under ``--max-cost``.
- The API key is read from ``ANTHROPIC_API_KEY`` only; messages that leave this module pass
  through ``curate.core.secrets.redact`` so the key never reaches a log, the workspace or an export.
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

from curate.anthropic_api import prices
from curate.core.errors import CurateError
from curate.core.secrets import redact

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


#: What each stage asks Claude for, as the missing-key error names it.
KEY_USES = {"annotate": "to annotate with an anthropic: annotator (the annotate stage)",
            "generate": "to answer with an anthropic: model (the generate stage)"}


def api_key(stage: str = "annotate") -> str:
    """The key, or an error saying which stage needs it (``stage``: a key of ``KEY_USES``)."""
    key = os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        raise CurateError(f"set ANTHROPIC_API_KEY in the environment {KEY_USES[stage]} "
                          "(the key is read from there only and never stored)")
    return key


#: An HTTP header name (RFC 9110 token).
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def make_client(*, timeout: float = 60.0, key_header: str | None = None,
                stage: str = "annotate") -> anthropic.Anthropic:
    """A client for ``ANTHROPIC_BASE_URL`` (or the public API). ``key_header`` additionally sends
    the key in that header, for compatible servers that read e.g. ``x-api-key``; ``stage`` is
    named when the key is missing.

    Settings no request can succeed with fail here, in one line naming the setting: the HTTP
    library would report a key with a line break as a "Connection error" and the run would
    retry it with backoff."""
    key = api_key(stage)
    if any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise CurateError("ANTHROPIC_API_KEY holds a line break or another control character (a trailing "
                          "newline from a file?); remove it")
    if key_header is not None and not HEADER_NAME.fullmatch(key_header):
        raise CurateError(f"-o key-header {key_header!r} is not a valid HTTP header name")
    headers = {key_header: key} if key_header else None
    try:
        client = anthropic.Anthropic(api_key=key, max_retries=0, timeout=timeout, default_headers=headers)
    except Exception as exc:  # the HTTP library's InvalidURL and kin
        raise CurateError(bad_base_url(str(exc))) from None
    if client.base_url.scheme not in ("http", "https") or not client.base_url.host:
        raise CurateError(bad_base_url("give http(s)://HOST[:PORT][/PATH]"))
    if not _host_name(client.base_url.host):  # the HTTP library percent-escapes what no host may hold
        raise CurateError(bad_base_url(f"{client.base_url.host!r} is no host name or IP address"))
    port = client.base_url.port
    if port is not None and not 0 < port < 65536:  # the HTTP library wraps it into another port
        raise CurateError(bad_base_url(f"port {port} is not a TCP port (1-65535)"))
    return client


#: A DNS name (letters, digits, hyphens, dots; underscores as some internal names have them).
HOST_NAME = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?")


def _host_name(host: str) -> bool:
    """Whether ``host`` (as the HTTP library parsed it) can be connected to: an IP address or
    a DNS name. ``http://user:p@[bad`` parses to the host ``%5Bbad``, which every request would
    fail to resolve, retried with backoff as if the network were down."""
    import ipaddress
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return bool(HOST_NAME.fullmatch(host))


def bad_base_url(why: str) -> str:
    url = redact(os.environ.get("ANTHROPIC_BASE_URL") or "")
    return f"ANTHROPIC_BASE_URL {url!r} is not a usable URL: {redact(why)}"


# --- how many tokens a request can cost ------------------------------------------------------

#: Framing tokens the API may add around each message or content block, and once per request.
BLOCK_OVERHEAD, REQUEST_OVERHEAD = 8, 32


def _blocks(params: dict) -> int:
    messages = params["messages"]
    return (len(params["system"]) + len(params["tools"]) + len(messages)
            + sum(len(m["content"]) if isinstance(m["content"], list) else 1 for m in messages))


def input_bound(params: dict) -> int:
    """An upper bound of the input tokens ``params`` is billed for, without asking the API.

    A byte-level tokenizer (as Claude's is) never makes a token of less than one byte: the UTF-8
    bytes of the request's JSON (system, tools and messages: every text the model reads, plus
    JSON syntax) bound the tokens of its content. Added: framing per message and block, and the
    tool-use system prompt the API inserts (not in the body; per model in ``curate/anthropic_api/prices.py``).
    English text runs about 4 bytes a token, so this is roughly 4x the true count."""
    body = {k: params[k] for k in ("system", "tools", "messages")}
    size = len(json.dumps(body, ensure_ascii=False).encode("utf-8"))
    return size + BLOCK_OVERHEAD * _blocks(params) + REQUEST_OVERHEAD + prices.model_info(params["model"]).tool_prompt


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
