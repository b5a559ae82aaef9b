"""A local causal LM as annotator, answering by constrained choice.

Each question has a closed set of allowed answers (yes/no, or option letters). The model is shown
the round's instructions, the item and one question, and the answer with the highest
log-likelihood is taken, so every reply is valid by construction. A small model such as the
default ``smollm2-135m`` gives weak labels; records name the annotator so reports can tell.

Round 1 asks one yes/no question per problem label (none -> ``high_quality``); round 2 asks for
the best and worst letters, a yes/no per other option for "equally good", and a yes/no for
"all implausible". The questions live in ``prompts/local.v1.yaml`` (continuation items) and
``prompts/local.question.v1.yaml`` (question items) and are part of the version.
"""
from __future__ import annotations

import hashlib
import json
from functools import cached_property

import yaml

from annotate.prompts import PROMPT_DIR, VERSION, kind_of, letters, load_prompt, render_item
from curate.errors import CurateError


def questions_file(kind: str):
    return PROMPT_DIR / (f"local.{VERSION}.yaml" if kind == "continuation" else f"local.{kind}.{VERSION}.yaml")


class LocalAnnotator:
    """Loads the model once; ``annotate(item, round)`` -> (result, raw)."""

    def __init__(self, name: str, *, device: str = "cpu"):
        from scoring.models import resolve

        self.name = name
        self.ref = resolve(name)
        self.device = device
        self._questions = {}
        self._lengths: dict[str, int] = {}   # token counts of texts every item repeats (instructions, questions)

    def questions(self, kind: str) -> dict:
        if kind not in self._questions:
            self._questions[kind] = yaml.safe_load(questions_file(kind).read_text(encoding="utf-8"))
        return self._questions[kind]

    @cached_property
    def loaded(self):
        from scoring.models import load
        return load(self.ref, device=self.device)

    @property
    def model(self):
        return self.loaded[0]

    @property
    def tokenizer(self):
        return self.loaded[1]

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
        """The chat-formatted text as (instructions, item, after the question). The instructions
        are the same for every item of a round and the item text for every question about it, so
        each is run through the model once and its cache reused."""
        marker = "\x00QUESTION\x00"
        instructions = load_prompt(round, kind=kind_of(item)).instructions
        messages = [{"role": "system", "content": instructions.split("\n\nAnswer only")[0]},
                    {"role": "user", "content": render_item(item, round) + "\n\n" + marker}]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        before, _, after = text.rpartition(marker)  # the last one is ours: the item text may hold it too
        split = before.index("<|im_start|>user") if "<|im_start|>user" in before else 0
        return before[:split], before[split:], after

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def _extend(self, cache, text: str):
        """The KV cache of ``cache`` (None: empty) followed by ``text``; ``cache`` is not modified."""
        import copy

        import torch

        ids = self._encode(text)
        if not ids:
            return cache
        past = copy.deepcopy(cache) if cache is not None else None
        with torch.no_grad():
            return self.model(input_ids=torch.tensor([ids], device=self.device), past_key_values=past,
                              use_cache=True, logits_to_keep=1).past_key_values

    def instructions_cache(self, text: str):
        """The instructions' KV cache, computed once per distinct text (one per round)."""
        cached = self.__dict__.setdefault("_instruction_caches", {})
        if text not in cached:
            cached[text] = self._extend(None, text)
        return cached[text]

    def choose_all(self, parts: tuple[str, str, str], asks: list[tuple[str, list[str]]]) -> list[tuple[int, list[float]]]:
        """For each (question, answers): the index of the likeliest answer and every answer's
        log-likelihood (sum over its tokens) after instructions + item + question + after."""
        import copy

        import torch

        instructions, item_text, after = parts
        prefix = self._extend(self.instructions_cache(instructions), item_text)
        out = []
        with torch.no_grad():
            for question, answers in asks:
                tail = self._encode(question + after)
                a_ids = [self._encode(a) for a in answers]
                if all(len(a) == 1 for a in a_ids):  # one forward pass scores every one-token answer
                    logits = self.model(input_ids=torch.tensor([tail], device=self.device), logits_to_keep=1,
                                        past_key_values=copy.deepcopy(prefix)).logits[0, -1]
                    logprobs = torch.log_softmax(logits.float(), dim=-1)
                    scores = [logprobs[a[0]].item() for a in a_ids]
                    out.append((max(range(len(scores)), key=scores.__getitem__), scores))
                    continue
                scores = []
                for ids_a in a_ids:
                    ids = torch.tensor([tail + ids_a], device=self.device)
                    logits = self.model(input_ids=ids, past_key_values=copy.deepcopy(prefix),
                                        use_cache=True).logits[0].float()
                    logprobs = torch.log_softmax(logits[len(tail) - 1:-1], dim=-1)
                    scores.append(logprobs.gather(1, torch.tensor(ids_a, device=self.device)[:, None]).sum().item())
                out.append((max(range(len(scores)), key=scores.__getitem__), scores))
        return out

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

    @cached_property
    def context_length(self) -> int:
        from scoring.run import max_length
        return max_length(self.model, self.tokenizer)

    def prompt_length(self, item: dict, round: int) -> int:
        """Tokens of the longest sequence the model reads for ``item``: instructions, item,
        question and answer. Past the model's context its answers would be meaningless."""
        instructions, item_text, after = self.chat_parts(item, round)
        _, asks = self.asks(item, round)
        longest = max(self._length(q + after) + max(self._length(a) for a in answers) for q, answers in asks)
        return self._length(instructions) + len(self._encode(item_text)) + longest

    def _length(self, text: str) -> int:
        if text not in self._lengths:
            self._lengths[text] = len(self._encode(text))
        return self._lengths[text]

    def check_lengths(self, items: list[dict], round: int) -> None:
        """Refuse the run before anything is stored when an item does not fit the context."""
        for item in items:
            n = self.prompt_length(item, round)
            if n > self.context_length:
                raise CurateError(f"item {item['item_id']}: annotating it takes {n} tokens, more than the "
                                  f"{self.context_length} of {self.name}'s context; leave it out (--limit, filters) "
                                  f"or use a model with a longer context")

    def annotate(self, item: dict, round: int) -> tuple[dict, str]:
        keys, asks = self.asks(item, round)
        picked = dict(zip(keys, self.choose_all(self.chat_parts(item, round), asks)))
        raw = json.dumps({k: {"answer": asks[i][1][picked[k][0]], "logprobs": [round6(x) for x in picked[k][1]]}
                          for i, k in enumerate(keys)}, ensure_ascii=False)
        if round == 1:
            labels = [k for k in keys if picked[k][0] == 0]  # answer 0 is "yes"
            return {"labels": labels or ["high_quality"]}, raw
        return {"best": picked["best"][0], "worst": picked["worst"][0],
                "all_implausible": picked["all_implausible"][0] == 0,
                "equally_good": [int(k.split(":")[1]) for k in keys if k.startswith("equally_good:") and picked[k][0] == 0],
                }, raw


def round6(x: float) -> float:
    return float(f"{x:.6g}")

