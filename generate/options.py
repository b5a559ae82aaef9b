"""The options of `curate generate`, declared once: ``curate.core.options`` derives the click options
and the defaults ``generate.run.generate_workspace`` takes from this table. The Claude options
are `curate annotate`'s (``annotate.options.claude_options``)."""
from __future__ import annotations


from annotate.options import LIMIT, QUIET, claude_options
from curate.core.options import Option, defaults
from scoring.models import DTYPES

#: Each seed is a full pass over the items; the study used 5.
MAX_SEEDS = 1000
#: Below this, logits / temperature overflow and sampling fails on inf/nan probabilities.
MIN_TEMPERATURE = 0.01


def _temperature(value: float) -> float:
    if not value >= 0:
        raise ValueError("is not in the range x>=0")
    if 0 < value < MIN_TEMPERATURE:
        raise ValueError(f"{value} is below {MIN_TEMPERATURE}, where the sampling probabilities overflow; "
                         "use 0 for greedy decoding")
    return float(value)


GENERATE = [
    Option("seeds", int, 5, min=1, max=MAX_SEEDS,
           help="Number of seeds (0..N-1): each shuffles the options anew (and seeds sampling when --temperature > 0)."),
    Option("temperature", float, min=0, convert=_temperature,
           help="local: 0 (the default) = greedy decoding. Not for anthropic: the API takes no sampling settings."),
    Option("top_p", float, min=0, max=1, min_open=True,
           help="local, with --temperature > 0: nucleus sampling (default 1 = off)."),
    Option("max_new_tokens", int, 8, min=1),
    LIMIT,
    Option("replace", bool, False,
           help="Delete the label's stored answers for this template and settings first (needed when they "
                "were made by another model, dtype or template version)."),
    Option("batch_size", int, 64, min=1, backend="local", help="local: prompts per generate call."),
    Option("dtype", choices=DTYPES, default="float32"),
    Option("device", default="cpu", help="local: cpu, cuda or cuda:N."),
    Option("fewshot", int, 0, min=0, metavar="K",
           help="Show K worked examples before each question: the benchmark's few-shot examples as curate score "
                "--fewshot draws them, each in the template with its gold option's number as the answer."),
    Option("fewshot_pool", metavar="FILE|evaluated",
           help="Where the examples come from, as curate score --fewshot-pool takes it."),
    *claude_options(0, "anthropic: re-ask (with a reminder) when a reply names no option."),
    QUIET,
]

DEFAULTS = defaults(GENERATE)
