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

Update this table when prices or limits change.
"""
from __future__ import annotations

from typing import NamedTuple

from curate.errors import CurateError


class Model(NamedTuple):
    input: float
    output: float
    cache_minimum: int
    tool_prompt: int


MODELS = {
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


def model_info(model: str) -> Model:
    matches = [p for p in MODELS if model.startswith(p)]
    if not matches:
        raise CurateError(f"no price known for model {model!r}; add it to annotate/prices.py "
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
