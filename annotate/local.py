"""A local causal LM as annotator, answering by constrained choice.

Each question has a closed set of allowed answers (yes/no, or option letters). The model is shown
the round's instructions, the item and one question, and the answer with the highest
log-likelihood is taken, so every reply is valid by construction. A small model such as the
default ``smollm2-135m`` gives weak labels; records name the annotator so reports can tell.

Round 1 asks one yes/no question per problem label (none -> ``high_quality``); round 2 asks for
the best and worst letters, a yes/no per other option for "equally good", and a yes/no for
"all implausible". The questions live in ``prompts/local.v1.yaml`` (continuation items) and
``prompts/local.question.v1.yaml`` (question items) and are part of the version.

The log-likelihoods come from a scoring backend (``scoring.backends``: the engine, unless the
annotator is made with another), the one place they are computed. A prompt is
encoded in its three parts (instructions, item, question turn), as this annotator always has, so
the model reads the same tokens as before; each answer is encoded after its question turn as the
engine encodes a continuation (``scoring.encode.encode_pair``, lm-eval's rule: the turn's
trailing newline moves into the answer, so an answer's log-likelihood also counts that newline,
the same for every answer). Each question is one engine request (its prompt, then its answers).
Many items' questions are scored in one forward pass (``BATCH_TOKENS``) by the backend's
``score_requests`` (the engine's: ``scoring.shared_prefix.score_shared``, which computes the
instructions once per batch and an item once for all its questions); each item is stored as soon
as its batch is done, so a killed run resumes, and the request key is unchanged, so a run begun
before this change resumes too. Before a run is recorded, the backend's own checks (the engine's
runner probe, when it loads) and its self-check (on the first questions, scored as the run scores
them) run, as for ``curate score``. The annotate stage closes the backend (``close``).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property

import yaml

from annotate.prompts import PROMPT_DIR, VERSION, kind_of, letters, load_prompt, render_item
from curate.core.errors import CurateError

# Tokens per batch as its items would feed them each alone (about 14 HellaSwag items); the batch
# feeds about half, since the instructions are computed once for all of them.
BATCH_TOKENS = 8192
SELF_CHECK_QUESTIONS = 2  # questions of the first item checked against the model's own plain forward


def questions_file(kind: str):
    return PROMPT_DIR / (f"local.{VERSION}.yaml" if kind == "continuation" else f"local.{kind}.{VERSION}.yaml")


@dataclass
class Question:
    """One question of one item as the engine scores it: ``request`` is its prompt and, as
    continuations, its answers. ``longest`` counts the tokens of its longest sequence."""
    item_id: str
    key: str
    answers: list[str]
    request: object  # scoring.encode.Request
    longest: int

    @property
    def requests(self) -> list:  # the self-check's view of a unit
        return [self.request]

    @property
    def max_row(self) -> int:
        return self.request.n_input


class LocalAnnotator:
    """Loads the model once, on a scoring backend (``backend``: the engine by default);
    ``annotate_all(items, round)`` -> (item, result, raw) per item; ``close()`` when done."""

    def __init__(self, name: str, *, device: str = "cpu", backend: str = "engine"):
        from scoring.models import resolve

        self.name, self.backend = name, backend
        self.ref = resolve(name)
        self.device = device
        self._questions = {}

    def questions(self, kind: str) -> dict:
        if kind not in self._questions:
            self._questions[kind] = yaml.safe_load(questions_file(kind).read_text(encoding="utf-8"))
        return self._questions[kind]

    @cached_property
    def scorer(self):
        """The model loaded on the backend (on first use: a run with nothing to ask loads nothing)."""
        from types import SimpleNamespace

        from scoring.backends import open_backend
        return open_backend(self.backend, self.ref, SimpleNamespace(dtype="float32", device=self.device,
                                                                    batch_tokens=BATCH_TOKENS))

    @property
    def model(self):
        """The engine's model (its own forward is what the tests compare with)."""
        return self.scorer.lm

    @property
    def tokenizer(self):
        return self.scorer.tokenizer

    def close(self) -> None:
        """The backend closed, when it was opened."""
        if "scorer" in self.__dict__:
            self.scorer.close()

    @property
    def snapshot(self) -> str:
        return f"{self.name}@{self.ref.weights_hash or self.ref.revision or 'unpinned'}"

    @cached_property
    def params(self) -> dict:
        return {"decoding": "constrained-choice", "scoring": "sum-logprob", "dtype": "float32"}

    def prompt_version(self, round: int, kind: str = "continuation") -> str:
        digest = hashlib.sha256(load_prompt(round, kind=kind).version.encode() + questions_file(kind).read_bytes())
        return "sha256:" + digest.hexdigest()

    # --- asking ---------------------------------------------------------------------------

    def chat_parts(self, item: dict, round: int) -> tuple[str, str, str]:
        """The chat-formatted text as (instructions, item, after the question): the instructions
        are the same for every item of a round and the item text for every question about it."""
        marker = "\x00QUESTION\x00"
        instructions = load_prompt(round, kind=kind_of(item)).instructions
        messages = [{"role": "system", "content": instructions.split("\n\nAnswer only")[0]},
                    {"role": "user", "content": render_item(item, round) + "\n\n" + marker}]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        before, _, after = text.rpartition(marker)  # the last one is ours: the item text may hold it too
        split = before.index("<|im_start|>user") if "<|im_start|>user" in before else 0
        return before[:split], before[split:], after

    def asks(self, item: dict, round: int) -> tuple[list[str], list[tuple[str, list[str]]]]:
        """The result keys and, for each, the question and its allowed answers."""
        q = self.questions(kind_of(item))
        yes_no = q["yes_no"]
        opts = letters(len(item["options"]))
        if round == 1:
            keys = list(q["round1"])
            return keys, [(q["round1"][k], yes_no) for k in keys]
        others = [i for i in range(len(opts)) if i != item["gold"]]
        keys = ["best", "worst", "all_implausible"] + [f"equally_good:{i}" for i in others]
        texts = [q["round2"]["best"], q["round2"]["worst"], q["round2"]["all_implausible"]] + [
            q["round2"]["equally_good"].format(letter=opts[i], gold=opts[item["gold"]]) for i in others]
        return keys, [(t, opts if k in ("best", "worst") else yes_no) for k, t in zip(keys, texts)]

    def item_questions(self, item: dict, round: int) -> list[Question]:
        """The item's questions as engine requests. A prompt is encoded in its three parts
        (instructions, item, question turn), as this annotator always has, so the model reads
        the tokens it read before; each answer is encoded after its question turn as the engine
        encodes a continuation (``encode_pair``)."""
        from scoring.encode import Encoder, Request, encode_pair

        encoder = Encoder(ChatPieces(self.tokenizer))
        instructions, item_text, after = self.chat_parts(item, round)
        shown = encoder(instructions) + encoder(item_text)
        keys, asks = self.asks(item, round)
        out = []
        for key, (question, answers) in zip(keys, asks):
            pairs = [encode_pair(encoder, question + after, answer) for answer in answers]
            prompt, conts = shown + pairs[0][0], [cont for _, cont, _ in pairs]
            out.append(Question(item["item_id"], key, answers, Request(prompt, conts, list(range(len(conts)))),
                                len(prompt) + max(len(cont) for cont in conts)))
        return out

    @property
    def context_length(self) -> int:
        return self.scorer.window

    def check_lengths(self, items: list[dict], round: int) -> None:
        """Refuse the run before anything is stored when an item does not fit the context."""
        for item in items:
            n = max(q.longest for q in self.item_questions(item, round))
            if n > self.context_length:
                raise CurateError(f"item {item['item_id']}: annotating it takes {n} tokens, more than the "
                                  f"{self.context_length} of {self.name}'s context; leave it out (--limit, filters) "
                                  f"or use a model with a longer context")

    def check(self, items: list[dict], round: int) -> dict:
        """What refuses a run before it is recorded: an item past the context, a model the backend
        cannot score exactly (the engine's runner probe, as it loads), and numbers that differ
        from the model's own plain forward on the first questions, scored as the run scores them
        (the backend's self-check, as ``curate score`` runs it). Returns the self-check's record."""
        if not items:  # nothing to ask: the weights need not even load
            return {"items": 0, "note": "nothing to annotate"}
        self.check_lengths(items, round)
        return self.scorer.self_check(self.item_questions(items[0], round), items=SELF_CHECK_QUESTIONS,
                                      names=lambda q: f"item {q.item_id}, question {q.key}",
                                      score=self.scorer.score_requests)

    def annotate_all(self, items: list[dict], round: int):
        """Yields (item, result, raw) for each of ``items`` in order, scoring them a batch of about
        ``BATCH_TOKENS`` tokens at a time (an item counts what it would feed alone)."""
        batch, size = [], 0
        for item in items:
            questions = self.item_questions(item, round)
            tokens = fed_alone([q.request for q in questions])
            if batch and size + tokens > BATCH_TOKENS:
                yield from self.score_batch(batch, round)
                batch, size = [], 0
            batch.append((item, questions))
            size += tokens
        yield from self.score_batch(batch, round)

    def score_batch(self, batch: list[tuple[dict, list[Question]]], round: int):
        """One forward pass for every question of the batch's items."""
        questions = [q for _, qs in batch for q in qs]
        results = iter(self.scorer.score_requests([q.request for q in questions]))
        for item, qs in batch:
            picked = {}
            for q, result in zip(qs, results):
                scores = result.cont_sums
                picked[q.key] = (max(range(len(scores)), key=scores.__getitem__), scores)
            yield (item, *self.reply(picked, qs, round))

    def reply(self, picked: dict, questions: list[Question], round: int) -> tuple[dict, str]:
        """The result and the raw record from each question's (chosen index, log-likelihoods)."""
        answers = {q.key: q.answers for q in questions}
        keys = list(answers)
        raw = json.dumps({k: {"answer": answers[k][picked[k][0]], "logprobs": [round6(x) for x in picked[k][1]]}
                          for k in keys}, ensure_ascii=False)
        if round == 1:
            labels = [k for k in keys if picked[k][0] == 0]  # answer 0 is "yes"
            return {"labels": labels or ["high_quality"]}, raw
        return {"best": picked["best"][0], "worst": picked["worst"][0],
                "all_implausible": picked["all_implausible"][0] == 0,
                "equally_good": [int(k.split(":")[1]) for k in keys if k.startswith("equally_good:") and picked[k][0] == 0],
                }, raw


class ChatPieces:
    """The tokenizer for pieces of one chat-formatted text: the chat template writes the special
    tokens the model expects, so none are added to a piece (a BOS in front of the question would
    be a token the model never reads there)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, texts, add_special_tokens: bool = True):
        return self.tokenizer(texts, add_special_tokens=False)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def fed_alone(requests) -> int:
    """Tokens the requests feed when scored together with nothing else (``score_shared``): the
    prefix they all share once, the rest of each prefix and each continuation's own."""
    first, shortest = requests[0].prefix, min(len(r.prefix) for r in requests)
    shared = 0
    while shared < shortest and all(r.prefix[shared] == first[shared] for r in requests):
        shared += 1
    return shared + sum(len(r.prefix) - shared + sum(max(len(c) - 1, 0) for c in r.conts) for r in requests)


def round6(x: float) -> float:
    return float(f"{x:.6g}")
