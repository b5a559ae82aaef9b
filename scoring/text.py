"""Text scores: how familiar a model finds an item's own text, the reference-free membership
signals of the contamination literature, from one batched forward pass per batch of items.

The text is the item as the benchmark writes it: its full-mode prompt, the delimiter and the gold
option (``item_text``), scored as one continuation after an empty context (the model's BOS, else
EOS, as ``scoring.encode`` encodes an empty context), so every token of the text is predicted.
Per item and model, from the log-probability ``log p(x_t)`` of each predicted token:

- ``loss``: the mean negative log-likelihood, ``-mean_t log p(x_t)``;
- ``zlib``: ``loss`` divided by the length in bytes of the zlib-compressed UTF-8 text (Carlini et
  al. 2021, as Shi et al. 2024 compute it);
- ``min_k_K``: the mean of the lowest K% of the ``log p(x_t)`` (Min-K% Prob, Shi et al. 2024);
- ``min_kpp_K``: the mean of the lowest K% of ``(log p(x_t) - mu_t) / sigma_t``, where ``mu_t``
  and ``sigma_t`` are the mean and standard deviation of ``log p(z)`` for ``z`` drawn from the
  model's next-token distribution at that position (Min-K%++, Zhang et al. 2025).

The lowest K% are ``max(1, int(n * K / 100))`` tokens (the papers' ``int``, but at least one, so
a short text still gets a number). Higher Min-K% and Min-K%++ and lower loss and zlib point to
text the model has seen; they are suspicion, not proof.

The hidden states come from the engine's runners (``scoring.engine.hidden_states``), the logits
from the model's own head (``scoring.logits.own_logits``) a few hundred rows at a time, and the
log-softmax and its moments in float32 a few rows at a time, as for the option scores.
"""
from __future__ import annotations

import time
import uuid
import zlib
from dataclasses import dataclass, field

import numpy as np
import torch

from curate import formulations as forms
from curate.errors import CurateError
from scoring import ENGINE_VERSION
from scoring.encode import Encoder, Request, encode_pair
from scoring.engine import HEAD_LOGITS, REDUCE_ROWS, architecture, hidden_states, pack, runner_for
from scoring.logits import own_logits
from scoring.options import DEFAULTS

K = (10, 20)  # the percentages stored (min_k_10, min_k_20, min_kpp_10, min_kpp_20)


def item_text(item: dict) -> str:
    """The item as the benchmark writes it: the full-mode context, delimiter and gold option
    (Winogrande: the sentence with the gold option filled in)."""
    s = forms.scored(item, "full", "cloze")
    gold = item["gold"]
    return s.contexts[gold] + s.delimiter + s.continuations[gold]


@dataclass
class TextRequest:
    """One item's text as the engine scores it: a one-token prefix and one continuation."""
    item_index: int
    text: str
    request: Request
    flags: set = field(default_factory=set)

    @property
    def n_input(self) -> int:
        return self.request.n_input


def build(tokenizer, texts: list[tuple[int, str]], *, max_length: int) -> list[TextRequest]:
    """A ``TextRequest`` per (item index, text), tokenized in one batched call. A text longer than
    the model's window keeps its first ``max_length`` tokens (flagged ``truncated``)."""
    encoder = Encoder(tokenizer)
    encoder.prefetch([t for _, t in texts], special=False)
    out = []
    for index, text in texts:
        prefix, cont, _ = encode_pair(encoder, "", text)
        flags = set()
        if len(cont) > max_length:
            cont = cont[:max_length]
            flags.add("truncated")
        if not cont:
            flags.add("empty")
        out.append(TextRequest(index, text, Request(list(prefix), [list(cont)], [0]), flags))
    return out


def token_stats(model, hidden: torch.Tensor, source: np.ndarray, target: np.ndarray):
    """For each prediction: ``log p(target)`` at hidden state ``source``, and the mean and standard
    deviation of ``log p(z)`` under that position's next-token distribution (float32 softmax)."""
    logprob, mu, sigma = (np.zeros(len(source)) for _ in range(3))
    states = hidden[torch.from_numpy(source).to(hidden.device)]
    step = max(REDUCE_ROWS, HEAD_LOGITS // model.get_output_embeddings().weight.shape[0] // REDUCE_ROWS * REDUCE_ROWS)
    for start in range(0, len(source), step):
        logits = own_logits(model, states[start:start + step])
        for sub in range(0, len(logits), REDUCE_ROWS):
            rows = slice(start + sub, start + min(sub + REDUCE_ROWS, len(logits)))
            lp = torch.log_softmax(logits[sub:sub + REDUCE_ROWS].float(), dim=-1)
            p = lp.exp()
            live = p > 0  # a token the model rules out (-inf) adds nothing to either moment
            mean = torch.where(live, p * lp, 0).sum(-1)
            var = torch.where(live, p * (lp - mean[:, None]) ** 2, 0).sum(-1)
            want = torch.from_numpy(target[rows]).to(lp.device)
            logprob[rows] = lp[torch.arange(len(lp), device=lp.device), want].double().cpu().numpy()
            mu[rows], sigma[rows] = mean.double().cpu().numpy(), var.sqrt().double().cpu().numpy()
    return logprob, mu, sigma


def lowest_mean(values: np.ndarray, k: int) -> float:
    """Mean of the lowest ``k``% of ``values`` (at least one value)."""
    n = max(1, int(len(values) * k / 100))
    return float(np.mean(np.sort(values)[:n]))


def metrics(text: str, logprob: np.ndarray, mu: np.ndarray, sigma: np.ndarray) -> dict:
    """The stored signals of one text from its per-token log-probabilities and moments (module
    docstring); None for each when the text has no predicted token."""
    zlib_bytes = len(zlib.compress(text.encode("utf-8")))
    out = {"n_tokens": len(logprob), "zlib_bytes": zlib_bytes}
    if not len(logprob):
        return out | {m: None for m in ("loss", "zlib", *(f"min_k_{k}" for k in K), *(f"min_kpp_{k}" for k in K))}
    loss = float(-np.mean(logprob))
    standard = (logprob - mu) / np.maximum(sigma, np.finfo(np.float32).tiny)
    out |= {"loss": loss, "zlib": loss / zlib_bytes}
    out |= {f"min_k_{k}": lowest_mean(logprob, k) for k in K}
    out |= {f"min_kpp_{k}": lowest_mean(standard, k) for k in K}
    return out


@torch.inference_mode()
def score_texts(model, requests: list[TextRequest], *, pad_id: int, runner: str | None = None) -> list[dict]:
    """The metrics of each text, all from one forward pass (``runner``: default ``runner_for``)."""
    runner = runner or runner_for(model)
    batch = pack([r.request for r in requests])
    hidden = hidden_states(model, batch, runner, pad_id=pad_id)
    logprob, mu, sigma = token_stats(model, hidden, batch.source, batch.target)
    ends = np.cumsum([len(r.request.conts[0]) for r in requests])
    return [metrics(r.text, logprob[e - len(r.request.conts[0]):e], mu[e - len(r.request.conts[0]):e],
                    sigma[e - len(r.request.conts[0]):e]) for r, e in zip(requests, ends)]


def batches(requests: list[TextRequest], batch_tokens: int) -> list[list[TextRequest]]:
    """Longest first, each batch's rows x longest row within ``batch_tokens`` (a longer text alone)."""
    out, current = [], []
    for req in sorted(requests, key=lambda r: (-r.n_input, r.item_index)):
        if current and (len(current) + 1) * current[0].n_input > batch_tokens:
            out.append(current)
            current = []
        current.append(req)
    return out + ([current] if current else [])


def self_check(model, requests: list[TextRequest], dtype: str, *, pad_id: int, items: int, names) -> dict:
    """Before anything is stored: the first ``items`` texts' summed log-probability by the engine
    against the model's own plain forward (``scoring.reference``); a CurateError when they differ."""
    from scoring import reference
    chosen = [r for r in requests if r.request.conts[0]][:items]
    if not chosen:
        return {"items": 0, "max_abs_diff": 0.0}
    ours = [-m["loss"] * m["n_tokens"] for m in score_texts(model, chosen, pad_id=pad_id)]
    theirs = [res.cont_sums[0] for res in reference.score(model, [r.request for r in chosen])]
    for r, a, b in zip(chosen, ours, theirs):
        allowed = reference.allowed_difference(dtype, len(r.request.conts[0]), b)
        if abs(a - b) > allowed:
            raise CurateError(f"self-check failed: {architecture(model)} in {dtype} through the {runner_for(model)} "
                              f"runner, {names(r)}: text log-probability {a:.6f} here, {b:.6f} by the model's own "
                              f"forward (allowed difference {allowed:.2g}); nothing was stored")
    return {"items": len(chosen), "max_abs_diff": max(abs(a - b) for a, b in zip(ours, theirs))}


def text_score_workspace(root, model: str, *, dtype: str = DEFAULTS["dtype"], device: str = DEFAULTS["device"],
                         batch_tokens: int = DEFAULTS["batch_tokens"], limit: int | None = DEFAULTS["limit"],
                         label: str | None = None, replace: bool = DEFAULTS["replace"], show_progress: bool = True,
                         self_check_items: int = DEFAULTS["self_check"]) -> dict:
    """Store the text scores of every item (the first ``limit``) of ``root`` under ``label``
    (default ``model``). Resumable: an item whose stored row has this model, tokenizer, dtype,
    engine version and the item's content hash is not recomputed; each batch commits on its own.
    A label holding another model's, tokenizer's or dtype's text scores is refused unless
    ``replace`` deletes them first. Returns a summary (items, computed, cached, tokens, seconds)."""
    from tqdm import tqdm

    from curate.lock import work_lock
    from curate.store import Workspace
    from scoring.models import DTYPES, check_device, load, resolve
    from scoring.run import max_length, tokenizer_hash, versions
    from scoring.store import add_run
    from scoring.text_store import open_text_scores, stored_keys, write_text_scores

    if dtype not in DTYPES:
        raise CurateError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    if batch_tokens < 1:
        raise CurateError("--batch-tokens must be positive")
    check_device(device)
    start = time.perf_counter()
    Workspace.open(root).close()
    ref = resolve(model)
    label = label or model
    with work_lock(root, f"text-scores {label}", command="text-scores"):
        lm, tokenizer = load(ref, dtype=dtype, device=device, scoring_only=True)
        runner = runner_for(lm)
        key = (ref.weights_hash, tokenizer_hash(tokenizer), dtype)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        ws = open_text_scores(root)
        try:
            items = ws.items()[:limit] if limit else ws.items()
            stored = stored_keys(ws, label)
            other = [i for i, k in stored.items() if k[1:4] != key]
            if other and not replace:
                raise CurateError(f"label {label!r} already holds text scores of another model, tokenizer or dtype "
                                  f"({len(other)} items, e.g. {other[0]}); use another --label to keep both, or "
                                  f"--replace to delete them first")
            if other:
                stored = {}
            done = {i for i, k in stored.items() if k[1:] == (*key, ENGINE_VERSION)}
            todo = [(i, item_text(it)) for i, it in enumerate(items)
                    if not (it["item_id"] in done and stored[it["item_id"]][0] == it["content_hash"])]
            requests = build(tokenizer, todo, max_length=max_length(lm, tokenizer))
            embeddings = lm.get_input_embeddings().num_embeddings
            too_big = [r for r in requests if max(r.request.prefix + r.request.conts[0]) >= embeddings]
            if too_big:
                raise CurateError(f"item {items[too_big[0].item_index]['item_id']}: the tokenizer gives token ids "
                                  f"the model has no embedding for: the tokenizer does not belong to this model")

            def name(r):
                return f"item {items[r.item_index]['item_id']}"
            plan = batches(requests, batch_tokens)
            checked = self_check(lm, [r for b in plan for r in b if r.n_input <= batch_tokens], dtype, pad_id=pad_id,
                                 items=self_check_items, names=name)
            run_id = f"text:{uuid.uuid4().hex[:16]}"
            with ws.transaction():  # a run that computes nothing records nothing
                if other:
                    ws.conn.execute("DELETE FROM text_scores WHERE model = ?", (label,))
                if requests:
                    add_run(ws, run_id=run_id, model=label, origin="text", model_hash=key[0], tokenizer_hash=key[1],
                            dtype=dtype, device=device, engine=ENGINE_VERSION,
                            info={"model": model, "path": ref.path, "revision": ref.revision, "text": "full prompt + "
                                  "delimiter + gold option", "k": list(K), "batch_tokens": batch_tokens, "limit": limit,
                                  "runner": runner, "architecture": architecture(lm), "self_check": checked,
                                  "versions": versions(), "replaced_rows": len(other)})
            tokens, loop_start = 0, time.perf_counter()
            bar = tqdm(total=len(requests), unit="item", desc=f"text scores {label}", disable=not show_progress,
                       dynamic_ncols=True)
            for batch in plan:
                rows = []
                for r, m in zip(batch, score_texts(lm, batch, pad_id=pad_id, runner=runner)):
                    item = items[r.item_index]
                    rows.append(m | {"model": label, "item_id": item["item_id"], "content_hash": item["content_hash"],
                                     "flags": ",".join(sorted(r.flags)) or None, "run_id": run_id})
                with ws.transaction():
                    write_text_scores(ws, rows)
                tokens += sum(r.n_input for r in batch)
                bar.update(len(batch))
                bar.set_postfix_str(f"{tokens / (time.perf_counter() - loop_start):.0f} tok/s")
            bar.close()
        finally:
            ws.close()
    return {"items": len(items), "computed": len(requests), "cached": len(items) - len(requests), "tokens": tokens,
            "seconds": round(time.perf_counter() - start, 3),
            "score_seconds": round(time.perf_counter() - loop_start, 3),
            "run_id": run_id, "label": label, "runner": runner, "self_check": checked, "replaced_rows": len(other)}
