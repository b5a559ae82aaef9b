"""The options of `curate generate`, declared once: ``curate.core.options`` derives the click options
and the options object (``GenerateOptions``) ``generate.run.Generate`` takes whole. The Claude options
are `curate annotate`'s (``annotate.options.claude_options``)."""
from __future__ import annotations


from annotate.options import LIMIT, QUIET, claude_options
from curate.core.options import Option, defaults, options_class
from scoring.models import DTYPES
from scoring.options import label_of, modes_of

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


def seeds_of(value) -> list[int]:
    """The seeds: a count N (seeds 0..N-1) or the seeds themselves."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= MAX_SEEDS:
            raise ValueError(f"is not in the range 1 <= x <= {MAX_SEEDS}")
        return list(range(value))
    seeds = sorted(set(value))
    if not seeds or any(not isinstance(k, int) or k < 0 for k in seeds):
        raise ValueError("give a positive count (seeds 0..N-1) or non-negative seeds")
    return seeds


def template_of(value: str) -> str:
    from generate.prompts import template_names
    if value not in template_names():
        raise ValueError(f"unknown template {value!r}; choose from {', '.join(template_names())}")
    return value


GENERATE = [
    Option("model", default="smollm2-135m",
           help="A local model, local:NAME or NAME (built-in name, folder, GGUF file or Hub id), or anthropic:MODEL."),
    Option("modes", default="full,zero", convert=modes_of, help="Comma-separated prompt modes."),
    Option("template", default="numbered", convert=template_of,
           help="Prompt wording (generate/templates/NAME.yaml): numbered or question."),
    Option("label", convert=label_of, help="Model name stored with the answers (default: --model)."),
    Option("seeds", int, 5, min=1, max=MAX_SEEDS, convert=seeds_of,
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
#: The generate stage's options: one object, every value checked on construction.
GenerateOptions = options_class("GenerateOptions", GENERATE)
