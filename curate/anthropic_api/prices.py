"""The one model table: what each Claude model annotators may use costs, and the two token
counts a worst-case cost needs. Nothing else in the toolkit knows these numbers.

Per model (matched by the longest name prefix, so dated snapshots such as
"claude-3-5-haiku-20241022" find their family):

- ``input`` / ``output``: USD per million tokens (Anthropic's pricing page). Prompt-cache writes
  (5-minute cache) cost 1.25x the input price and cache reads 0.1x; the Message Batches API
  halves every price.
- ``cache_minimum``: the shortest prompt prefix, in tokens, the API caches for this model; a
  ``cache_control`` mark on a shorter prefix is silently ignored (Anthropic's prompt-caching
  documentation, "Cache limitations": 1024 for Sonnet 4.5, Sonnet 4, Sonnet 3.7, Opus 4.1 and
  Opus 4; 2048 for Haiku 3.5 and Haiku 3; 4096 for Opus 4.5 and Haiku 4.5).
- ``tool_prompt``: tokens of the system prompt the API adds to every request that has tools,
  with ``tool_choice`` "any" as annotation sends (Anthropic's tool-use pricing documentation:
  313 for the Claude 4 models and Sonnet 3.7, 340 for Haiku 3.5 and Haiku 3). They are billed
  as input but are not in the request body, so an input bound must add them.

Newer models (checked 2026-11-24 against Anthropic's model pages and pricing page): Opus 4.6,
4.7 and 4.8 cost $5 / $25 like Opus 4.5 (before they had rows here, "claude-opus-4-6" fell to the
"claude-opus-4" row and was priced at $15 / $75); Sonnet 4.6 costs $3 / $15. Their minimum
cacheable prefix is 4096 for Opus 4.6 and 1024 for Sonnet 4.6 and Opus 4.8 (documented); Opus
4.7's is not documented and 1024 is used: a mark on a shorter prefix is only ignored, and the
worst case prices every marked token as a cache write anyway. They are Claude 4 models (313
tool-prompt tokens).

``UNSUPPORTED``: families Anthropic documents as thinking by default (Sonnet 5, Opus 5, and the
5.5, Haiku 5.5, Fable and Mythos models; the 5.5 models and Fable 5.1 on also answer a forced
``tool_choice`` with a 400). Annotation asks with a forced tool call and a 400-token reply
budget, and generation with ``--max-new-tokens``; thinking would spend that budget before the
answer, so these are refused with the reason, before anything is asked, instead of failing or
returning cut-off replies.

``retirement``: the date the installed anthropic SDK says a model stops answering (its own
deprecation list, the one it warns from), so a plan can say so before a run is started.

Update this table when prices or limits change.
"""
from __future__ import annotations

import datetime
import re
from typing import NamedTuple

from curate.core.errors import CurateError


class Model(NamedTuple):
    input: float
    output: float
    cache_minimum: int
    tool_prompt: int


MODELS = {
    "claude-opus-4-8": Model(5.00, 25.00, 1024, 313),
    "claude-opus-4-7": Model(5.00, 25.00, 1024, 313),
    "claude-opus-4-6": Model(5.00, 25.00, 4096, 313),
    "claude-sonnet-4-6": Model(3.00, 15.00, 1024, 313),
    "claude-opus-4-5": Model(5.00, 25.00, 4096, 313),
    "claude-opus-4-1": Model(15.00, 75.00, 1024, 313),
    "claude-opus-4": Model(15.00, 75.00, 1024, 313),
    "claude-sonnet-4-5": Model(3.00, 15.00, 1024, 313),
    "claude-sonnet-4": Model(3.00, 15.00, 1024, 313),
    "claude-3-7-sonnet": Model(3.00, 15.00, 1024, 313),
    "claude-haiku-4-5": Model(1.00, 5.00, 4096, 313),
    "claude-3-5-haiku": Model(0.80, 4.00, 2048, 340),
    "claude-3-haiku": Model(0.25, 1.25, 2048, 340),
}
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.10
BATCH_FACTOR = 0.50


#: name prefix -> why annotation and generation refuse the model.
_THINKS = ("thinks by default (adaptive thinking), which would spend the reply budget (annotation: "
           "400 tokens) before the answer")
_THINKS_NO_FORCED_TOOL = _THINKS + ", and answers a forced tool choice with a 400"
UNSUPPORTED = {
    "claude-sonnet-5-5": _THINKS_NO_FORCED_TOOL, "claude-opus-5-5": _THINKS_NO_FORCED_TOOL,
    "claude-sonnet-5": _THINKS, "claude-opus-5": _THINKS, "claude-haiku-5": _THINKS,
    "claude-fable-": _THINKS, "claude-mythos-": _THINKS,
}
SUPPORTED_HINT = "claude-sonnet-4-6, claude-opus-4-8 or claude-haiku-4-5"


#: What may follow a table row's name in a model id: the "-0" of the first Claude 4 aliases
#: (claude-opus-4-0), a snapshot date, or "-latest". Anything else is another model: priced by
#: a mere prefix, "claude-opus-4-10" would cost Opus 4.1's $15/$75 and a typo would pass.
_SUFFIX = re.compile(r"(-0)?(-\d{8})?|-latest")


def model_info(model: str) -> Model:
    refused = [p for p in UNSUPPORTED if model.startswith(p)]
    if refused:
        raise CurateError(f"model {model!r} is not supported: it {UNSUPPORTED[max(refused, key=len)]}; "
                          f"use {SUPPORTED_HINT}")
    matches = [p for p in MODELS if model.startswith(p) and _SUFFIX.fullmatch(model[len(p):])]
    if not matches:
        raise CurateError(f"no price known for model {model!r}; add it to curate/anthropic_api/prices.py "
                          f"(known: {', '.join(sorted(MODELS))})")
    return MODELS[max(matches, key=len)]


def price(model: str) -> tuple[float, float]:
    """(input, output) USD per million tokens."""
    info = model_info(model)
    return info.input, info.output


def usd(model: str, *, input_tokens: int = 0, output_tokens: int = 0, cache_write_tokens: int = 0,
        cache_read_tokens: int = 0, batch: bool = False) -> float:
    """Cost of one request's usage. ``input_tokens`` excludes the cached parts, as the API reports."""
    inp, out = price(model)
    total = (input_tokens * inp + output_tokens * out + cache_write_tokens * inp * CACHE_WRITE_FACTOR
             + cache_read_tokens * inp * CACHE_READ_FACTOR) / 1_000_000
    return total * (BATCH_FACTOR if batch else 1.0)


def retirement(model: str) -> str | None:
    """The date the installed anthropic SDK gives for ``model``'s end of life, or None. The SDK
    keeps this list to warn from (``DEPRECATED_MODELS``); where a later SDK moves it, no date is
    known rather than an error."""
    try:
        from anthropic.resources.messages import messages
    except ImportError:
        return None
    dates = getattr(messages, "DEPRECATED_MODELS", None)
    return dates.get(model) if isinstance(dates, dict) else None


def retirement_note(spec: str, *, today: datetime.date | None = None) -> str | None:
    """A line warning that the Claude model of ``spec`` ("anthropic:MODEL", as annotators and
    generators are named) retires, or None (another backend, or no date known)."""
    backend, _, model = spec.partition(":")
    if backend != "anthropic" or not (when := retirement(model)):
        return None
    day = _sdk_date(when)
    if day is not None and day <= (today or datetime.date.today()):
        return (f"note: {model} reaches its end of life on {when} (the anthropic SDK's deprecation list), a date "
                f"that has come: Anthropic's API no longer answers it, only a gateway that still serves it can; "
                f"choose another model ({SUPPORTED_HINT})")
    return (f"note: {model} reaches its end of life on {when} (the anthropic SDK's deprecation list); "
            f"requests after that date fail, so finish before then or choose another model ({SUPPORTED_HINT})")


def _sdk_date(text: str) -> datetime.date | None:
    """"November 30th, 2026" (the SDK's way) as a date; None for any other shape."""
    match = re.fullmatch(r"([A-Z][a-z]+) (\d{1,2})(?:st|nd|rd|th)?, (\d{4})", text.strip())
    try:
        return datetime.datetime.strptime(" ".join(match.groups()), "%B %d %Y").date() if match else None
    except ValueError:
        return None
