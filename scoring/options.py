"""The options of `curate score` (and the audit config's ``scoring`` section), declared once.

``curate.core.options`` derives from this table the command's click options, the config schema's
properties, and ``ScoreOptions``, the one object the score stage (``scoring.run.Score``) takes:
the command and the audit build it, each value checked once, on construction.
"""
from __future__ import annotations

from dataclasses import replace

from curate.core.options import Option, defaults, options_class
from curate.items.canonical import MODES
from scoring.models import DTYPES

SHOTS_PATTERN = "^ *[0-9]+ *(, *[0-9]+ *)*$"
#: Which rows get the study's whole-sequence mean (``seq_mean``): 0-shot rows only (the default:
#: the study defined it on 0-shot prompts; over k shots it mostly measures the shared header, and
#: it costs a third of a 5-shot run), every row, or none (lm-eval's numbers only).
SEQ_MEAN = ("0-shot", "all", "none")


def wants_seq_mean(policy: str, fewshot: int) -> bool:
    """Whether a ``fewshot``-shot row gets ``seq_mean`` under ``policy`` (one of ``SEQ_MEAN``)."""
    return policy == "all" or (policy == "0-shot" and not fewshot)


def shot_counts(value) -> list[int]:
    """The shot counts a ``--fewshot`` value names ("0,5", 5 or [0, 5]), each once, in order."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        if not all(p.isdigit() for p in parts):
            raise ValueError(f"--fewshot {value!r}: expected shot counts such as 0 or 0,5")
        value = [int(p) for p in parts]
    return sorted(set(int(k) for k in value))



def modes_of(value) -> list[str]:
    """The prompt modes a ``--modes`` value names ("full,zero" or a list), each once, in order."""
    modes = list(dict.fromkeys(m.strip() for m in (value.split(",") if isinstance(value, str) else value)
                               if m.strip()))
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ValueError(f"unknown mode(s) {', '.join(bad) or '(none)'}; choose from {', '.join(MODES)}")
    return modes


def formulations_of(value) -> list[str] | None:
    """The formulations a ``--formulations`` value names (cloze, letters, letters+rK, letters+rotations)."""
    from curate.core.errors import CurateError
    from curate.items.formulations import check

    names = [f.strip() for f in (value.split(",") if isinstance(value, str) else value) if f.strip()]
    if not names:  # "," or "": a list that names nothing, as --modes "," is refused
        raise ValueError(f"{value!r} names no formulation; give e.g. cloze or letters")
    try:
        return [check(f) for f in names]
    except CurateError as exc:
        raise ValueError(str(exc)) from None


def label_of(value: str) -> str:
    from curate.core.names import model_name  # the one check of every stored model name

    if not value.strip():  # "" became the model name, " " a label no one can read
        raise ValueError("is empty; give a name, or leave --label out to use --model")
    return model_name(value)


def backend_settings() -> list[Option]:
    """Every backend's own settings (``-o NAME VALUE``, the audit config's keys), declared in its
    file (``scoring.backends``): the score and text-scores tables take them."""
    from scoring.backends import settings
    return settings()


def backend_of(value: str) -> str:
    from scoring.backends import names
    if value not in names():
        raise ValueError(f"no such scoring backend; known: {', '.join(names())}")
    return value


SCORE = [
    Option("model", required=True, help="Built-in name (smollm2-135m), local model folder, GGUF file or Hub id."),
    Option("modes", default=",".join(MODES), convert=modes_of, help="Comma-separated prompt modes."),
    Option("formulations", convert=formulations_of,
           help="Comma-separated: cloze, letters, letters+rK (the list rotated K places) or letters+rotations "
                "(every rotation) [default: the benchmark's, as lm-eval scores it]."),
    Option("label", convert=label_of, help="Model name stored with the scores (default: --model)."),
    Option("backend", default="engine", convert=backend_of, metavar="NAME",
           help="What computes the log-likelihoods (scoring/backends/): engine (benchcurate's own forward; the one "
                "for a CPU, one GPU and k-shot ablations: shared contexts and few-shot headers computed once), vllm "
                "(vLLM in its own environment or a vLLM server; the one for large models on several GPUs or a "
                "cluster: tensor parallel, Ray) or reference (the model's own transformers forward, one row at a "
                "time: slow, exact by definition). docs/scale.md says which suits which job.",
           config="What computes the log-likelihoods: engine, vllm (vLLM in its own environment or a vLLM server) or "
                  "reference (the model's own transformers forward)."),
    Option("dtype", choices=DTYPES, default="float32", config=""),
    Option("device", default="cpu", pattern="^(cpu|cuda(:[0-9]+)?|mps|auto)$",
           help="cpu, cuda, cuda:N, mps, or auto: the model placed over every visible GPU by accelerate.",
           config="cpu, cuda, cuda:N, mps, or auto (the model placed over every visible GPU by accelerate)."),
    Option("batch_tokens", int, 4096, min=1, help="Token budget per forward pass (rows x longest row).",
           config="Token budget per forward batch (rows x longest row)."),
    *backend_settings(),
    Option("limit", int, min=1, help="Score only the first N items."),
    Option("self_check", int, 2, min=0, metavar="N",
           help="Before storing anything, score N units (an item in one mode) also by the model's own plain "
                "forward and stop on a difference over the dtype's tolerance (0: skip).",
           config="Items also scored by the model's own plain forward before anything is stored (0 skips)."),
    Option("replace", bool, False,
           help="Delete the label's stored scores first when they come from another model, tokenizer or dtype "
                "(without it such a run is refused)."),
    Option("quiet", bool, False, help="No progress bar.", aliases=("--no-progress",)),
    Option("text_scores", bool, False,
           help="Also store each item's text scores (loss, zlib, Min-K%, Min-K%++; what `curate text-scores` "
                "stores), read off its full-mode gold row in the same forward pass (needs full mode, cloze, 0 shots).",
           config="Also store each item's text scores (loss, zlib, Min-K%, Min-K%++) from the same forward pass as "
                  "its full-mode scores, instead of a second pass (needs full mode, cloze, 0 shots)."),
    Option("fewshot", default="0", pattern=SHOTS_PATTERN, convert=shot_counts, metavar="K[,K...]",
           help="Shot counts: each item is also scored after K worked examples, built as lm-eval 0.4.13 "
                "builds them (e.g. 0,5); scores are kept per K.",
           config="Shot counts, comma-separated (e.g. '0,5'): each item scored after K examples as lm-eval builds "
                  "them; scores are kept per K."),
    Option("seq_mean", choices=SEQ_MEAN, default="0-shot", aliases=("--no-seq-mean=none",),
           help="Which rows also get the study's whole-sequence mean log-probability (seq_mean; it needs every "
                "context token's log-probability): 0-shot rows only, all (k-shot rows too: over k shots it mostly "
                "measures the shared header, and costs about a third of a 5-shot run), or none (lm-eval's numbers "
                "only; --no-seq-mean)."),
    Option("fewshot_pool", metavar="FILE|evaluated",
           help="Where the shots come from: a file of the benchmark's few-shot split, or 'evaluated' (the "
                "workspace's items, each left out of its own shots) [default: that split from the workspace's "
                "source: the split's file beside a source file, its files in a source folder, or the same Hub "
                "dataset at the same revision].",
           config="A file of the benchmark's few-shot split, or 'evaluated' (the workspace's own items, each left "
                  "out of its own shots); absent: that split from the workspace's source (the split's file beside "
                  "a source file, its files in a source folder, or the same Hub dataset at the same revision)."),
    Option("verify_batch_invariance", int, 0, min=0, metavar="K",
           help="Afterwards re-score K random items one at a time and report the largest difference."),
]

def check_backend_settings(options) -> None:
    """The chosen backend's own settings checked together (its ``Backend.check``: two settings
    that exclude each other), before anything loads."""
    from scoring.backends import backend_class
    backend_class(options.backend).settings_of(options)


DEFAULTS = defaults(SCORE)
#: The score stage's options: one object, every value checked on construction.
ScoreOptions = options_class("ScoreOptions", SCORE, check=check_backend_settings)


def _text(name: str, **changes) -> Option:
    return replace(next(o for o in SCORE if o.name == name), config=None, **changes)


#: `curate text-scores`: `curate score`'s options with the same defaults, said of texts.
TEXT_SCORES = [
    _text("model"),
    _text("label"),
    _text("backend", help="What computes the texts' log-probabilities and their statistics (scoring/backends/): "
                          "engine (benchcurate's own forward) or vllm (vLLM's worker; not through a server); the "
                          "reference computes no statistics."),
    _text("dtype"),
    _text("device", help="cpu, cuda, cuda:N or mps."),
    _text("batch_tokens"),
    *(replace(o, config=None) for o in backend_settings()),
    _text("limit"),
    _text("self_check", help="Before storing anything, score N texts also by the model's own plain forward (0: skip)."),
    _text("replace", help="Delete the label's text scores first when they come from another model, tokenizer or dtype."),
    _text("quiet"),
]
#: The text-scores stage's options.
TextScoresOptions = options_class("TextScoresOptions", TEXT_SCORES, check=check_backend_settings)
