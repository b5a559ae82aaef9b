"""Generating replies with a local causal LM: batched, left-padded ``model.generate``.

Any model the scorer can load works (``scoring.models``: built-in names, folders, GGUF files,
Hub ids). Prompts go through the model's chat template when it has one, else they are the
template's plain text. The caller sorts prompts by length and hands them over in batches, so
padding stays small and the rows of a batch finish together. The tokens every prompt of a run
shares (the chat template's system turn) go through the model once; each batch starts from a
copy of their key/value cache.

Temperature 0 is greedy decoding (top-p does not apply). Above 0, every row samples from its own
CPU ``torch.Generator`` seeded from (item content, seed): a row's random draws do not depend on
which rows share its batch, or on the device. Its reply is therefore the same in any batch unless
the batch's different padding moves a token's probability across a draw (float rounding, 1e-6
scale; the tests and the benchmark found no such case).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property, lru_cache

from curate.core.errors import CurateError


#: Shorter shared prefixes are not worth a cached forward pass of their own.
MIN_PREFIX = 8


@dataclass(frozen=True)
class Output:
    text: str
    new_tokens: int
    finish: str          # eos | length


def sampler_class():
    """The per-row sampling step as a transformers LogitsProcessor (imported lazily: torch)."""
    import torch
    from transformers import LogitsProcessor, TemperatureLogitsWarper, TopPLogitsWarper

    class RowSampler(LogitsProcessor):
        """Temperature and top-p (transformers' own warpers), then one draw per row from that
        row's generator; returns scores where only the drawn token is finite, so the greedy step
        that follows picks it."""

        def __init__(self, temperature: float, top_p: float, seeds: list[int]):
            self.warpers = [TemperatureLogitsWarper(temperature)] + ([TopPLogitsWarper(top_p)] if top_p < 1 else [])
            self.generators = [torch.Generator(device="cpu").manual_seed(s) for s in seeds]

        def __call__(self, input_ids, scores):
            for warp in self.warpers:
                scores = warp(input_ids, scores)
            probs = torch.softmax(scores.float(), dim=-1).cpu()
            picked = torch.stack([torch.multinomial(p, 1, generator=g) for p, g in zip(probs, self.generators)])
            out = torch.full_like(scores, -float("inf"))
            return out.scatter_(1, picked.to(scores.device), 0.0)

    return RowSampler


@lru_cache(maxsize=1)
def loaded_model(ref, dtype: str, device: str):
    """The weights, kept for the next run in the same process (tests, notebooks, audits)."""
    from scoring.models import load
    model, _ = load(ref, dtype=dtype, device=device)
    return model


class LocalGenerator:
    """Loads the model once; ``prompt`` builds a prompt, ``generate`` answers a batch of them."""

    backend = "local"

    def __init__(self, name: str, *, dtype: str = "float32", device: str = "cpu"):
        from scoring.models import load_tokenizer, resolve
        from scoring.models import tokenizer_hash

        self.name, self.dtype, self.device = name, dtype, device
        self.ref = resolve(name)
        self.tokenizer = load_tokenizer(self.ref)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        template = getattr(self.tokenizer, "chat_template", None)
        self.chat = bool(template)
        # A local file is identified by its hash, so a run with nothing left to do never loads
        # the weights; a Hub id is identified by the commit its config was read from.
        self.identity = {
            "model_hash": self.ref.weights_hash, "tokenizer_hash": tokenizer_hash(self.tokenizer),
            "chat_template": "sha256:" + hashlib.sha256(template.encode()).hexdigest() if template else None,
            "dtype": dtype,
        }

    @cached_property
    def model(self):
        return loaded_model(self.ref, self.dtype, self.device)

    @cached_property
    def eos_ids(self) -> list[int]:
        return self._eos_ids()

    def _eos_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id
        ids = [ids] if isinstance(ids, int) else list(ids or [])
        if self.tokenizer.eos_token_id is not None and self.tokenizer.eos_token_id not in ids:
            ids.append(self.tokenizer.eos_token_id)
        if not ids:
            raise CurateError(f"model {self.name!r} names no end-of-sequence token; it cannot stop a reply")
        return ids

    def prompt(self, template, instructions: str, user: str) -> str:
        from generate.prompts import plain_text

        if not self.chat:
            return plain_text(template, instructions, user)
        messages = [{"role": "system", "content": instructions}, {"role": "user", "content": user}]
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def encode(self, prompts: list[str]) -> list[list[int]]:
        """Token ids of each prompt (a chat-formatted prompt already holds its special tokens)."""
        return self.tokenizer(prompts, add_special_tokens=not self.chat)["input_ids"]

    def shared_prefix(self, encoded: list[list[int]]) -> int:
        """How many leading tokens every prompt shares (the chat template's system turn and the
        template's opening words), leaving each prompt at least one token of its own; 0 when the
        model's cache cannot be reused that way (only plain per-layer key/value caches can)."""
        if not encoded or not self._plain_cache:
            return 0
        first, shortest = encoded[0], min(len(e) for e in encoded)
        n = 0
        while n < shortest - 1 and all(e[n] == first[n] for e in encoded):
            n += 1
        return n if n >= MIN_PREFIX else 0

    @cached_property
    def _plain_cache(self) -> bool:
        import torch
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        with torch.no_grad():
            cache = self.model(input_ids=torch.tensor([[self.eos_ids[0]]], device=self.device), use_cache=True,
                               logits_to_keep=1).cache  # transformers 5 name (past_key_values warns)
        return type(cache) is DynamicCache and all(type(layer) is DynamicLayer for layer in cache.layers)

    def _prefix_cache(self, ids: tuple[int, ...]):
        """The key/value cache of ``ids`` for one row, computed once per prefix."""
        import torch

        cached = self.__dict__.setdefault("_prefix_caches", {})
        if ids not in cached:
            cached.clear()
            with torch.no_grad():
                cached[ids] = self.model(input_ids=torch.tensor([list(ids)], device=self.device), use_cache=True,
                                         logits_to_keep=1).cache
        return cached[ids]

    def generate(self, encoded: list[list[int]], *, temperature: float, top_p: float, max_new_tokens: int,
                 sample_seeds: list[int] | None = None, prefix: int = 0) -> list[Output]:
        """One batch of token ids in, one Output per row. Rows are left-padded; with ``prefix`` > 0
        (from ``shared_prefix``) the first ``prefix`` tokens, the same in every row, come from one
        cached forward pass and the padding sits between them and each row's own tokens (the
        attention mask hides it; positions count only real tokens)."""
        import copy

        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        width = max(len(e) for e in encoded) - prefix
        pad = self.tokenizer.pad_token_id
        ids = [e[:prefix] + [pad] * (width - len(e) + prefix) + e[prefix:] for e in encoded]
        mask = [[1] * prefix + [0] * (width - len(e) + prefix) + [1] * (len(e) - prefix) for e in encoded]
        kwargs = {"input_ids": torch.tensor(ids, device=self.device),
                  "attention_mask": torch.tensor(mask, device=self.device)}
        if prefix:
            cache = copy.deepcopy(self._prefix_cache(tuple(encoded[0][:prefix])))
            cache.batch_repeat_interleave(len(encoded))
            kwargs["cache"] = cache  # transformers 5 name (past_key_values is deprecated)
        config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                                  eos_token_id=self.eos_ids, pad_token_id=pad)
        processors = LogitsProcessorList()
        if temperature > 0:
            processors.append(sampler_class()(temperature, top_p, sample_seeds))
        with torch.no_grad():
            out = self.model.generate(**kwargs, generation_config=config, logits_processor=processors)
        new = out[:, len(ids[0]):].tolist()
        return [self._output(row) for row in new]

    def _output(self, ids: list[int]) -> Output:
        end = next((i for i, t in enumerate(ids) if t in self.eos_ids), None)
        kept = ids if end is None else ids[:end]
        text = self.tokenizer.decode(kept, skip_special_tokens=True)
        return Output(text, len(ids) if end is None else end + 1, "length" if end is None else "eos")
