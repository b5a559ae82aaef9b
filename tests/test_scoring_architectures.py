"""Every architecture transformers 5 offers for the families auditors score, scored exactly.

For each: a tiny model built from its config with seeded random weights (no download), SmolLM2's
tokenizer, real HellaSwag items in all four prompt modes plus a short item, in float32. Sliding
windows are 16 tokens, so the short item's rows fit inside them and the HellaSwag rows do not;
output-layer transforms (Cohere's logit scale, Gemma's soft-capping, Granite's scaling) are set
where they would go unnoticed at their defaults on random weights. Every option's
``logprob_sum``, ``seq_mean`` and ``is_greedy`` must equal a plain one-sequence transformers
forward: ``model(ids).logits`` log-softmaxed for the lm-eval pair, and minus the model's own loss
for ``seq_mean``. Options made of the model's own greedy continuation make ``is_greedy`` true.
"""
from __future__ import annotations

import pytest
import torch

from conftest import HELLASWAG

WINDOW = 16
ARCHITECTURES = {
    "llama": {},
    "llama-llama3-rope": {"model_type": "llama", "rope_parameters": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 32, "rope_theta": 10000.0}},
    "llama-linear-rope": {"model_type": "llama", "rope_parameters": {"rope_type": "linear", "factor": 2.0,
                                                                     "rope_theta": 10000.0}},
    "mistral": {"sliding_window": WINDOW},
    "mixtral": {"sliding_window": WINDOW, "num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen2": {"use_sliding_window": True, "sliding_window": WINDOW, "max_window_layers": 2},
    "qwen2_moe": {"use_sliding_window": True, "sliding_window": WINDOW, "max_window_layers": 2, "num_experts": 4,
                  "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32},
    "qwen3": {"use_sliding_window": True, "sliding_window": WINDOW, "max_window_layers": 2},
    "qwen3_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
    "gemma": {},
    "gemma2": {"sliding_window": WINDOW, "final_logit_softcapping": 1.0, "attn_logit_softcapping": 2.0},
    "gemma3_text": {"sliding_window": WINDOW, "final_logit_softcapping": 1.0,
                    "layer_types": ["sliding_attention", "full_attention"] * 2},
    "olmo": {},
    "olmo2": {},
    "olmoe": {"num_experts": 4, "num_experts_per_tok": 2},
    "gpt_neox": {},
    "gpt2": {},
    "gptj": {"rotary_dim": 8},
    "falcon": {},
    "phi": {},
    "phi3": {"sliding_window": WINDOW},
    "stablelm": {},
    "starcoder2": {"sliding_window": WINDOW},
    "granite": {"logits_scaling": 4.0},
    "granitemoe": {"logits_scaling": 4.0, "num_local_experts": 4, "num_experts_per_tok": 2},
    "cohere": {},
    "cohere2": {"sliding_window": WINDOW},
    # Beyond the list: families the engine used to refuse or misread.
    "opt": {},                                         # its forward calls model.decoder, not model
    "llama4_text": {"attention_chunk_size": WINDOW},   # chunked attention; decoder not at its prefix
    "bloom": {},                                       # ALiBi: the sequences runner
    "mamba": {},                                       # state-space: the sequences runner
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2, "expert_layer_offset": 1,
              "num_experts": 4, "num_experts_per_tok": 2},  # Mamba + attention + experts
}
SHORT = ("He ran", ["home.", "off."])  # rows of a few tokens: inside every window


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models on a shared 2-core machine: one thread is some 30 times faster than two."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def hellaswag(tmp_path_factory):
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from curate.items.store import Workspace
    ws = Ingest(tmp_path_factory.mktemp("arch") / "ws", IngestOptions(data=str(HELLASWAG),
                                                                      limit=30), get_adapter("hellaswag")).run()
    return Workspace.open(ws).items()


@pytest.fixture(scope="module")
def items(hellaswag):
    return hellaswag[:1]


@pytest.fixture(scope="module")
def tokenizer(hellaswag):
    """A byte-level BPE tokenizer of 500 tokens trained on 30 HellaSwag items (a 49k vocabulary
    would make each tiny model's output layer cost more than the rest of it), with SmolLM2's
    conventions: no special token added to text, BOS for an empty context."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    texts = [text for it in hellaswag for text in [it["prompts"]["full"], *it["options"]]]
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=500, special_tokens=["<pad>", "<s>", "</s>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def tiny(name: str, tokenizer, **overrides):
    """A seeded random model of architecture ``name``: 4 layers, width 64, 4 query heads over 2
    key/value heads, the test tokenizer's vocabulary, weights large enough that the logits spread."""
    from transformers import AutoConfig, AutoModelForCausalLM
    extra = {**ARCHITECTURES.get(name, {}), **overrides}
    model_type = extra.pop("model_type", name)
    sizes = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                 initializer_range=0.1, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                 pad_token_id=tokenizer.pad_token_id)
    if model_type == "falcon":  # its head_dim is derived
        sizes.pop("head_dim")
    config = AutoConfig.for_model(model_type, **sizes, **extra)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config).eval()


def greedy_option(model, tokenizer, context: str) -> str | None:
    """The model's own greedy next token after ``context``, as an option text whose lm-eval
    encoding is exactly that token (None when it does not start a word)."""
    from scoring.encode import encode_pair
    ctx, _, _ = encode_pair(tokenizer, context, " x")
    with torch.no_grad():
        best = int(model(input_ids=torch.tensor([ctx]), use_cache=False).logits[0, -1].argmax())
    text = tokenizer.decode([best])
    if not text.startswith(" ") or not text.strip():
        return None
    option = text[1:]
    _, cont, _ = encode_pair(tokenizer, context, " " + option)
    return option if cont == [best] else None


def cases(model, tokenizer, items, others):
    """(mode, context, options): every item in every mode, the short item, and up to three of those
    contexts and of ``others``' (cut after each word) with the model's greedy next token among the
    options, where that token starts a word (so an option can be made of it)."""
    out = [(mode, it["prompts"][mode], it["options"]) for it in items for mode in it["prompts"]]
    out.append(("full", *SHORT))
    candidates, greedy = list(out), []
    for it in others:  # each context cut after each of its words, as more contexts to try
        words = it["prompts"]["full"].split(" ")
        candidates += [("full", " ".join(words[:k]), it["options"]) for k in range(1, len(words) + 1)]
    for mode, context, options in candidates:
        option = greedy_option(model, tokenizer, context)
        if option is not None:
            greedy.append((mode, context, [option, options[0]]))
        if len(greedy) == 3:
            break
    return out + greedy


def reference(model, tokenizer, context: str, option: str) -> dict:
    """The plain one-sequence numbers: lm-eval's pair through ``model(ids).logits``, and the
    study's seq_mean as minus the model's own loss."""
    from scoring.encode import encode_pair
    ctx, cont, _ = encode_pair(tokenizer, context, " " + option)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ctx + cont]), use_cache=False).logits
        logprobs = torch.log_softmax(logits[0].float(), dim=-1)
        picked = logprobs[len(ctx) - 1:-1]
        whole = tokenizer(context + " " + option, return_tensors="pt")
        loss = model(**whole, labels=whole["input_ids"], use_cache=False).loss.item()
    return {"logprob_sum": picked[torch.arange(len(cont)), torch.tensor(cont)].sum().item(),
            "is_greedy": int(bool((picked.argmax(-1) == torch.tensor(cont)).all())), "seq_mean": -loss}


def engine_rows(model, tokenizer, cases_, runner=None) -> list[dict]:
    from scoring.encode import build_unit
    from scoring.forward import score_requests
    from scoring.run import assemble
    units = [build_unit(tokenizer, i, mode, context, options, max_length=512)
             for i, (mode, context, options) in enumerate(cases_)]
    results = score_requests(model, [r for u in units for r in u.requests], pad_id=tokenizer.pad_token_id,
                             runner=runner)
    rows, k = [], 0
    for u in units:
        rows += assemble(u, results[k:k + len(u.requests)], {"item_id": str(u.item_index), "content_hash": ""},
                         label="m", run_id="r")
        k += len(u.requests)
    return rows


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_architecture_scored_as_its_own_forward(name, tokenizer, items, hellaswag):
    from scoring.forward import runner_for
    model = tiny(name, tokenizer)
    all_cases = cases(model, tokenizer, items, hellaswag[1:6])
    rows = engine_rows(model, tokenizer, all_cases)
    expected = [reference(model, tokenizer, context, option) for _, context, options in all_cases
                for option in options]
    assert len(rows) == len(expected)
    for row, ref in zip(rows, expected):
        where = (name, runner_for(model), row["item_id"], row["option_index"])
        assert row["logprob_sum"] == pytest.approx(ref["logprob_sum"], abs=1e-4), where
        if ref["seq_mean"] == ref["seq_mean"]:  # NaN: a one-token sequence predicts nothing
            assert row["seq_mean"] == pytest.approx(ref["seq_mean"], abs=1e-4), where
        else:
            assert row["seq_mean"] is None, where
        assert row["is_greedy"] == ref["is_greedy"], where
    assert any(ref["is_greedy"] for ref in expected), f"{name}: no greedy option was built"


# --- what the engine cannot reproduce is refused, never scored -----------------------------------

def saved(folder, model, tokenizer):
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def score_rows(ws) -> int:
    import sqlite3
    with sqlite3.connect(ws / "workspace.db") as c:
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return sum(c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("scores", "score_runs") if t in tables)


def test_rope_rescaled_by_length_is_refused_past_its_length(tokenizer, tmp_path):
    """Phi-3's ``longrope`` switches its rotary frequencies by the longest position in the forward
    pass, which depends on what shares a batch: past its original length it is refused with the
    reason, and nothing is stored; within it, scored exactly (the short item)."""
    from curate.core.errors import CurateError
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from curate.items.adapters import get_adapter
    from scoring.run import Score
    rope = {"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [4.0] * 8, "rope_theta": 10000.0,
            "original_max_position_embeddings": 32}
    folder = saved(tmp_path / "phi3", tiny("phi3", tokenizer, rope_parameters=rope, original_max_position_embeddings=32),
                   tokenizer)
    ws = Ingest(tmp_path / "ws", IngestOptions(data=str(HELLASWAG), limit=2), get_adapter("hellaswag")).run()
    with pytest.raises(CurateError, match=r"item hellaswag/validation/\d+ \(full\): a sequence of \d+ tokens, but "
                                          r"Phi3ForCausalLM \(phi3\) rescales its rotary embedding past 32 tokens"):
        Score.with_options(ws, model=folder, modes=["full"], quiet=True).run()
    assert score_rows(ws) == 0
    short = tmp_path / "short.jsonl"
    short.write_text('{"q": "He ran", "choices": ["home.", "off."], "answer": 0}\n')
    ws2 = Ingest(tmp_path / "ws2", IngestOptions(data=str(short)),
                 get_adapter("generic", question="q", choices="choices", answer="answer", answer_format="index")).run()
    summary = Score.with_options(ws2, model=folder, modes=["full", "zero"], quiet=True).run()
    assert summary["computed"] == 2 and summary["self_check"]["max_abs_diff"] < 1e-4


class LookAhead:
    """A decoder no runner can serve: after its last layer every position adds the mean hidden
    state of the whole sequence, later tokens included (a made-up architecture, registered with
    transformers under its own model type for this test)."""

    @staticmethod
    def register():
        from transformers import AutoConfig, AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

        class LookAheadConfig(GPT2Config):
            model_type = "lookahead_gpt2"

        class LookAheadModel(GPT2LMHeadModel):
            config_class = LookAheadConfig

            def __init__(self, config):
                super().__init__(config)
                self.transformer.register_forward_hook(self.mix)

            @staticmethod
            def mix(module, args, output):
                output.last_hidden_state = output.last_hidden_state + output.last_hidden_state.mean(1, keepdim=True)
                return output

        try:
            AutoConfig.register("lookahead_gpt2", LookAheadConfig)
            AutoModelForCausalLM.register(LookAheadConfig, LookAheadModel)
        except ValueError:  # registered by an earlier test in this process
            pass
        return LookAheadConfig, LookAheadModel


def test_an_architecture_no_runner_reproduces_is_refused(tokenizer, tmp_path):
    """The probe that picks a runner compares each with the model's own forward; when none agrees
    the run stops before anything is stored, naming the architecture and each runner's worst
    difference."""
    config_class, model_class = LookAhead.register()
    torch.manual_seed(0)
    model = model_class(config_class(vocab_size=len(tokenizer), n_embd=64, n_layer=2, n_head=4,
                                     bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)).eval()
    refused(tmp_path, saved(tmp_path / "lookahead", model, tokenizer),
            r"architecture LookAheadModel \(lookahead_gpt2\) cannot be scored exactly by this engine \(probe "
            r"against its own forward: packed: request \d.*; padded: request \d.*here.*by the model's own forward")


def refused(tmp_path, folder, message):
    """Scoring the model at `folder` on two HellaSwag items stops with `message` (a regex) and
    stores no score row."""
    from curate.items.adapters import get_adapter
    from curate.core.errors import CurateError
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from scoring.run import Score
    ws = Ingest(tmp_path / "ws", IngestOptions(data=str(HELLASWAG), limit=2), get_adapter("hellaswag")).run()
    with pytest.raises(CurateError, match=message):
        Score.with_options(ws, model=folder, modes=["full"], quiet=True).run()
    assert score_rows(ws) == 0


def test_sequences_runner_runs_rows_past_the_batch_budget_whole(tokenizer, items):
    """A Mamba has no attention to take a block mask and no key/value cache to continue from: the
    probe sends it to the sequences runner, and a request longer than the batch budget is scored
    one option at a time, each sequence whole, with the numbers of the batched run."""
    from scoring.encode import build_unit
    from scoring.forward import runner_for, score_requests
    model = tiny("mamba", tokenizer)
    assert runner_for(model) == "sequences"
    requests = [r for mode in ("full", "zero") for r in
                build_unit(tokenizer, 0, mode, items[0]["prompts"][mode], items[0]["options"], max_length=512).requests]
    batched = score_requests(model, requests, pad_id=tokenizer.pad_token_id)
    alone = score_requests(model, requests, pad_id=tokenizer.pad_token_id, max_tokens=8)
    assert max(r.n_input for r in requests) > 8
    for a, b in zip(batched, alone):
        assert a.cont_sums == pytest.approx(b.cont_sums, abs=1e-4) and a.cont_greedy == b.cont_greedy
        assert a.prefix_sum == pytest.approx(b.prefix_sum, abs=1e-4)


def test_a_model_whose_own_forward_fails_is_refused_in_one_line(tokenizer, tmp_path):
    """A CodeGen whose rotary size is larger than its heads cannot run at all: the run stops with
    the model's own error in one line, before anything is stored."""
    refused(tmp_path, saved(tmp_path / "codegen", tiny("codegen", tokenizer, rotary_dim=64), tokenizer),
            r"^architecture CodeGenForCausalLM \(codegen\) cannot be scored: its own forward fails on a plain "
            r"sequence \(RuntimeError: The size of tensor a \(\d+\) must match [^\n]*\)$")
