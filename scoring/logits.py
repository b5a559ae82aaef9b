"""Output logits computed by the model's own code, for the hidden states we want.

Many architectures do more after the output projection than the projection: Cohere multiplies by
``logit_scale``, Gemma 2 and 3 soft-cap, Granite divides by ``logits_scaling``, and others do
their own thing; a list of such transforms kept here would always be behind. So the head is run
as the model runs it: its own ``forward`` (everything after the decoder, whatever it is), with the
decoder swapped for a stand-in that returns the hidden states we hand it. We need only the states
that predict a wanted token, a few hundred at a time, which the model's ``forward`` cannot be asked
for directly.

``scoring.llama_folder.LlamaWeights`` (our own load of a plain Llama) has no transformers
``forward``: its head is the projection alone, as in LlamaForCausalLM, so it is applied directly.

``input_device`` and ``decoder_name`` say where a model's input ids go and where its decoder sits,
for the engine and the plain reference (``scoring.reference``) alike.
"""
from __future__ import annotations

import torch
from torch import nn


class DecoderOutput:
    """A decoder's output as a model's ``forward`` reads it: the hidden states first (by name or
    index); anything else it asks for (router logits, cross-attentions, cache) is None."""

    def __init__(self, states: torch.Tensor):
        self.last_hidden_state = states

    def __getitem__(self, index):
        return (self.last_hidden_state,)[index]

    def __getattr__(self, name):  # only reached for names not set above
        return None


class GivenStates(nn.Module):
    """Stands in for a model's decoder: returns the hidden states it was given. What else the
    model's ``forward`` reads off its decoder comes from the real one (Falcon-H1 multiplies its
    logits by the decoder's ``lm_head_multiplier``), except its modules, which are stand-ins too
    (OPT's ``forward`` calls ``self.model.decoder``, not ``self.model``). Whatever a model does
    that this misreads is caught by the probe, which compares with the model's own forward."""

    def __init__(self, states: torch.Tensor, decoder: nn.Module):
        super().__init__()
        self.states = states
        object.__setattr__(self, "_real", decoder)  # kept, not registered as a submodule

    def __getattr__(self, name):  # only reached for names this module does not have
        try:
            return super().__getattr__(name)
        except AttributeError:
            value = getattr(self.__dict__["_real"], name)
            return GivenStates(self.states, value) if isinstance(value, nn.Module) else value

    def forward(self, *args, **kwargs) -> DecoderOutput:
        return DecoderOutput(self.states)


def input_device(model) -> torch.device:
    """Where input ids go: the embedding's device (CPU when accelerate keeps it offloaded; its
    hooks move inputs to each layer)."""
    device = model.get_input_embeddings().weight.device
    return torch.device("cpu") if device.type == "meta" else device


def decoder_name(model) -> str:
    """The attribute holding the decoder under the output layer: the one ``base_model_prefix``
    names (``model``, ``transformer``, ...), else ``model`` (Llama 4 names ``language_model`` but
    keeps its decoder as ``model``)."""
    prefix = model.base_model_prefix
    return prefix if prefix and hasattr(model, prefix) else "model"


def own_logits(model, states: torch.Tensor) -> torch.Tensor:
    """(rows, vocabulary) logits of final hidden ``states`` (rows, hidden), as ``model(ids).logits``
    gives them."""
    from scoring.llama_folder import LlamaWeights
    if isinstance(model, LlamaWeights):
        return model.lm_head(states)
    prefix = decoder_name(model)
    decoder = getattr(model, prefix)
    setattr(model, prefix, GivenStates(states[None], decoder))
    try:
        out = model(input_ids=torch.zeros((1, len(states)), dtype=torch.long, device=states.device), use_cache=False)
    finally:
        setattr(model, prefix, decoder)
    return out.logits[0]
