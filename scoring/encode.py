"""Turning (context, options) into the token sequences the engine scores, as lm-eval does.

lm-evaluation-harness 0.4.13 (``TemplateLM.loglikelihood`` / ``_encode_pair``) encodes a causal
pair like this, and so do we, so our ``logprob_sum`` is its number:

- trailing spaces of the context move to the front of the continuation;
- ``whole = encode(context + continuation)``, ``ctx = encode(context)`` and the continuation's
  tokens are ``whole[len(ctx):]`` (the model is then fed ``ctx + those``, not ``whole``);
- an empty context becomes the prefix token (BOS, else EOS), unless the continuation already
  starts with it, in which case its first token serves as the context;
- a context whose text already starts with the prefix token's text (a chat template's BOS) is
  encoded without the tokenizer's special tokens, so it gets no second BOS.

The continuation is ``delimiter + option`` (lm-eval's ``target_delimiter``, " " by default).
Options may each have their own context (lm-eval's partial scoring, Winogrande); options whose
contexts encode to the same tokens share one request, so a shared context is computed once.

The study's whole-sequence mean (``seq_mean``) is over ``tokenizer(context + delimiter + option)``
with the tokenizer's default special tokens. When those tokens are exactly the lm-eval
sequence, it comes from the same forward pass; otherwise (an empty context, a token merged
across the boundary) an extra sequence is scored for it alone. A sequence longer than the model's
window is cut from the left as lm-eval cuts its own: to its last ``max_length + 1`` tokens, and
the option is flagged ``truncated``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


@dataclass
class Request:
    """One packed row: a shared prefix, then each continuation attending to it alone.

    ``prefix_lp`` asks for the log-probabilities of the prefix's own tokens (for seq_mean).
    ``purpose`` is "ll" (lm-eval log-likelihoods) or "seq" (a seq_mean-only sequence).
    ``stats``: the index of one continuation whose row (prefix, then that continuation) also gets
    per-token statistics (``Result.stats``, for text scores); None: none.
    """
    prefix: list[int]
    conts: list[list[int]]
    options: list[int]
    purpose: str = "ll"
    prefix_lp: bool = False
    stats: int | None = None

    @property
    def n_input(self) -> int:
        """Tokens fed to the model: the prefix plus each continuation minus its last token."""
        return len(self.prefix) + sum(max(len(c) - 1, 0) for c in self.conts)


@dataclass
class Result:
    """What scoring one ``Request`` gives (by the engine and by the plain reference alike): sum of
    the prefix tokens' log-probs (from the second token on; 0 when not asked), and each
    continuation's log-prob sum and whether it is the greedy continuation. ``stats`` (when the
    request asked for them): (log p(x_t), mean and standard deviation of log p(z) under the
    next-token distribution) for every predicted token of the prefix and that continuation."""
    prefix_sum: float
    cont_sums: list[float]
    cont_greedy: list[bool]
    stats: tuple | None = None


@dataclass
class Unit:
    """Everything scored for one (item, mode, formulation): requests plus how to assemble the
    results. ``options`` are the continuation texts (without the delimiter)."""
    item_index: int
    mode: str
    options: list[str]
    requests: list[Request] = field(default_factory=list)
    flags: list[set] = field(default_factory=list)          # per option
    n_tokens: list[int] = field(default_factory=list)       # per option (lm-eval continuation)
    seq_len: list[int] = field(default_factory=list)        # per option: len(tokenizer(ctx+delim+opt))
    formulation: str = "cloze"
    fewshot: int = 0                                        # shots in its context (curate.items.fewshot)

    @property
    def n_input(self) -> int:
        return sum(r.n_input for r in self.requests)

    @property
    def max_row(self) -> int:
        return max(r.n_input for r in self.requests)


def prefix_token_id(tokenizer) -> int:
    """lm-eval's token for an empty context: BOS, else EOS."""
    return tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id


class Encoder:
    """Token ids of strings, memoized; ``prefetch`` fills the memo with one batched call to the
    fast tokenizer (its Rust side runs in parallel), which is far quicker than one call each."""

    def __init__(self, tokenizer):
        self.tokenizer, self.memo = tokenizer, {}
        self._prefix_text = None

    @property
    def prefix_text(self) -> str:
        """The prefix token's text (lm-eval's ``decode(prefix_token_id)``)."""
        if self._prefix_text is None:
            token = prefix_token_id(self.tokenizer)
            self._prefix_text = "" if token is None else self.tokenizer.decode(token)
        return self._prefix_text

    def prefetch(self, strings, special: bool = True) -> None:
        todo = list({s for s in strings if (s, special) not in self.memo})
        if todo:
            ids = self.tokenizer(todo, add_special_tokens=special)["input_ids"]
            self.memo.update(((s, special), i) for s, i in zip(todo, ids))

    def __call__(self, string: str, special: bool = True) -> list[int]:
        if (string, special) not in self.memo:
            self.prefetch([string], special)
        return self.memo[(string, special)]


class Spec(NamedTuple):
    """What ``build_units`` builds one unit from (the arguments of ``build_unit``)."""
    item_index: int
    mode: str
    context: str | list[str]  # one context for every option, or one per option
    options: list[str]
    delimiter: str = " "
    formulation: str = "cloze"
    fewshot: int = 0


def per_option(context: str | list[str], n: int) -> list[str]:
    return [context] * n if isinstance(context, str) else list(context)


def needed_strings(context: str | list[str], options: list[str], delimiter: str = " ") -> list[tuple[str, bool]]:
    """Every (string, add_special_tokens) that ``build_unit`` encodes for this item and mode."""
    out = []
    for ctx, o in zip(per_option(context, len(options)), options):
        out += [(delimiter + o, False)] if ctx == "" else [(ctx.rstrip(), True), (ctx + delimiter + o, True)]
        out.append((ctx + delimiter + o, True))
    return out


def build_units(tokenizer, specs, *, max_length: int, seq_mean=True, chunk: int = 2000) -> list["Unit"]:
    """``build_unit`` for many specs (``Spec`` or tuples of its fields), tokenizing in batches.
    ``seq_mean``: for every spec, or a function of a spec's shot count."""
    wants = seq_mean if callable(seq_mean) else lambda fewshot: seq_mean
    units = []
    specs = [Spec(*s) for s in specs]
    for start in range(0, len(specs), chunk):
        encoder = Encoder(tokenizer)
        part = specs[start:start + chunk]
        wanted = [pair for s in part for pair in needed_strings(s.context, s.options, s.delimiter)]
        for special in (True, False):
            encoder.prefetch([s for s, sp in wanted if sp == special], special)
        units += [build_unit(encoder, s.item_index, s.mode, s.context, s.options, max_length=max_length,
                             seq_mean=wants(s.fewshot), delimiter=s.delimiter, formulation=s.formulation,
                             fewshot=s.fewshot)
                  for s in part]
    return units


def encode_pair(encode, context: str, continuation: str) -> tuple[list[int], list[int], bool]:
    """(context tokens, continuation tokens, boundary_merged) exactly as lm-eval 0.4.13.
    ``encode`` is an Encoder (or a tokenizer, wrapped in one)."""
    if not isinstance(encode, Encoder):
        encode = Encoder(encode)
    if context == "":
        cont = encode(continuation, special=False)
        prefix = prefix_token_id(encode.tokenizer)
        if cont and cont[0] == prefix:
            return cont[:1], cont[1:], False
        return [prefix], cont, False
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    special = not (encode.prefix_text and context.startswith(encode.prefix_text))
    whole = encode(context + continuation, special)
    ctx = encode(context, special)
    return ctx, whole[len(ctx):], whole[:len(ctx)] != ctx


def build_unit(encode, item_index: int, mode: str, context: str | list[str], options: list[str], *,
               max_length: int, seq_mean: bool = True, **spec) -> Unit:
    """The requests that score every option of one item in one mode and formulation: option j
    is ``delimiter + options[j]`` after ``context`` (or after ``context[j]``, one per option).
    ``encode``: an Encoder or a tokenizer; ``spec``: ``Spec``'s other fields (delimiter,
    formulation, fewshot)."""
    if not isinstance(encode, Encoder):
        encode = Encoder(encode)
    delimiter = Spec(item_index, mode, context, options, **spec).delimiter
    contexts = per_option(context, len(options))
    unit = Unit(item_index, mode, options, formulation=spec.get("formulation", "cloze"), fewshot=spec.get("fewshot", 0))
    groups: dict[tuple, Request] = {}
    pairs = []
    for j, (context, option) in enumerate(zip(contexts, options)):
        ctx, cont, merged = encode_pair(encode, context, delimiter + option)
        flags = set()
        if context == "":
            flags.add("empty-context")
        if merged:
            flags.add("boundary-merge")
        if not cont:
            flags.add("empty-continuation")
        # lm-eval truncates context+continuation from the left to max_length + 1 tokens.
        overflow = len(ctx) + len(cont) - (max_length + 1)
        if overflow > 0:
            ctx = ctx[overflow:]
            flags.add("truncated")
        pairs.append((ctx, cont))
        unit.flags.append(flags)
        unit.n_tokens.append(len(cont))
        request = groups.setdefault(tuple(ctx), Request(list(ctx), [], []))
        request.conts.append(list(cont))
        request.options.append(j)
    unit.requests.extend(r for r in groups.values())
    if not seq_mean:
        return unit
    wholes = []
    for j, (c, option) in enumerate(zip(contexts, options)):
        whole = encode(c + delimiter + option)
        if len(whole) > max_length + 1:  # as lm-eval truncates: the last max_length + 1 tokens
            whole = whole[-(max_length + 1):]
            unit.flags[j].add("truncated")
        wholes.append(whole)
    unit.seq_len = [len(w) for w in wholes]
    # A request whose sequences are exactly the whole texts gives their seq_mean in the same pass.
    rest = []
    for request in unit.requests:
        if all(wholes[j] == pairs[j][0] + pairs[j][1] and "truncated" not in unit.flags[j] for j in request.options):
            request.prefix_lp = True
        else:
            rest += request.options
    if rest:
        unit.requests.extend(seq_requests([wholes[j] for j in sorted(rest)], sorted(rest)))
    return unit


def seq_requests(wholes: list[list[int]], options: list[int] | None = None) -> list[Request]:
    """Rows scoring each whole sequence from its first token on: one row sharing the common
    prefix when the sequences have one, else one row per sequence. ``options`` are the option
    indices of ``wholes`` (default 0, 1, ...)."""
    options = list(range(len(wholes))) if options is None else options
    shortest = min(len(w) for w in wholes)
    common = 0
    while common < shortest - 1 and all(w[common] == wholes[0][common] for w in wholes):
        common += 1
    if common == 0:
        return [Request(w[:1], [w[1:]], [j], purpose="seq", prefix_lp=True) for j, w in zip(options, wholes)]
    return [Request(wholes[0][:common], [w[common:] for w in wholes], list(options), purpose="seq", prefix_lp=True)]
