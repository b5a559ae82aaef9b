"""Generating replies with a local causal LM: batched, left-padded ``model.generate``.

Any model the scorer can load works (``scoring.models``: built-in names, folders, GGUF files,
Hub ids). Prompts go through the model's chat template when it has one, else they are the
template's plain text. Prompts are tokenized once, sorted by length and generated in batches of
``batch_size`` rows with left padding, so padding stays small and the rows of a batch finish
together.

Temperature 0 is greedy decoding (top-p does not apply). Above 0, every row samples from its own
``torch.Generator`` seeded from (item content, seed, mode, template), on the CPU: a row's random
draws do not depend on which rows share its batch, or on the device. Its reply is therefore the
same in any batch unless the batch's different padding moves a token's probability across a
draw (float rounding, 1e-6 scale); the README states what a test measured.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

from curate.errors import CurateError


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


class LocalGenerator:
    """Loads the model once; ``prompt`` builds a prompt, ``generate`` answers a batch of them."""

    backend = "local"

    def __init__(self, name: str, *, dtype: str = "float32", device: str = "cpu"):
        from scoring.models import load_tokenizer, resolve
        from scoring.run import tokenizer_hash

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
            "model_hash": self.ref.weights_hash or self._hub_hash(), "tokenizer_hash": tokenizer_hash(self.tokenizer),
            "chat_template": "sha256:" + hashlib.sha256(template.encode()).hexdigest() if template else None,
            "dtype": dtype,
        }

    def _hub_hash(self) -> str:
        from scoring.run import model_hash
        return model_hash(self.ref, self.model)

    @cached_property
    def model(self):
        from scoring.models import load
        model, _ = load(self.ref, dtype=self.dtype, device=self.device)
        return model

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

    def generate(self, encoded: list[list[int]], *, temperature: float, top_p: float, max_new_tokens: int,
                 sample_seeds: list[int] | None = None) -> list[Output]:
        """One batch: left-padded ids in, one Output per row."""
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        batch = self.tokenizer.pad({"input_ids": encoded}, padding=True, return_tensors="pt").to(self.device)
        config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                                  eos_token_id=self.eos_ids, pad_token_id=self.tokenizer.pad_token_id)
        processors = LogitsProcessorList()
        if temperature > 0:
            processors.append(sampler_class()(temperature, top_p, sample_seeds))
        with torch.no_grad():
            out = self.model.generate(**batch, generation_config=config, logits_processor=processors)
        new = out[:, batch["input_ids"].shape[1]:].tolist()
        return [self._output(row) for row in new]

    def _output(self, ids: list[int]) -> Output:
        end = next((i for i, t in enumerate(ids) if t in self.eos_ids), None)
        kept = ids if end is None else ids[:end]
        text = self.tokenizer.decode(kept, skip_special_tokens=True)
        return Output(text, len(ids) if end is None else end + 1, "length" if end is None else "eos")
