"""Text scores (loss, zlib, Min-K%, Min-K%++) against a plain transformers forward and numpy, on
every runner that can serve the model; and the stored, resumable, exported run."""
from __future__ import annotations

import zlib

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import run_cli, small_workspace


@pytest.fixture(scope="module")
def smollm2():
    from scoring.models import load, resolve
    return load(resolve("smollm2-135m"))


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    from curate.store import Workspace
    ws = Workspace.open(small_workspace(tmp_path_factory.mktemp("text") / "ws", 5))
    try:
        return ws.items()
    finally:
        ws.close()


def plain_metrics(model, tokenizer, text: str) -> dict:
    """The definitions, written out: BOS then the text, one forward, numpy for the rest."""
    ids = [tokenizer.bos_token_id] + tokenizer(text, add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1).double().numpy()[:-1]
    token = lp[np.arange(len(lp)), ids[1:]]
    p = np.exp(lp)
    mu = (p * lp).sum(-1)
    sigma = np.sqrt((p * (lp - mu[:, None]) ** 2).sum(-1))
    z = (token - mu) / sigma
    out = {"loss": -token.mean()}
    out["zlib"] = out["loss"] / len(zlib.compress(text.encode("utf-8")))
    for k in (10, 20):
        n = max(1, int(len(token) * k / 100))
        out[f"min_k_{k}"] = np.sort(token)[:n].mean()
        out[f"min_kpp_{k}"] = np.sort(z)[:n].mean()
    return out


def test_text_metrics_equal_a_plain_forward_on_every_runner(smollm2, items):
    from scoring import engine
    from scoring.text import build, item_text, score_texts

    model, tok = smollm2
    texts = [it["prompts"]["full"] + " " + it["options"][it["gold"]] for it in items]
    assert [item_text(it) for it in items] == texts
    expected = [plain_metrics(model, tok, t) for t in texts]
    requests = build(tok, list(enumerate(texts)), max_length=8192)
    runners = engine.runnable(model)
    assert set(runners) == {"llama", "packed", "padded", "sequences"}
    for runner in runners:
        got = score_texts(model, requests, pad_id=tok.pad_token_id or 0, runner=runner)  # one batch, all items
        for g, e, text in zip(got, expected, texts):
            for name, value in e.items():
                assert abs(g[name] - value) < 1e-4, (runner, text[:30], name, g[name], value)


def test_text_scores_stored_resumed_and_exported(tmp_path):
    from curate.store import Workspace
    from scoring.text_store import text_scores

    ws = small_workspace(tmp_path / "ws", 6)
    first = run_cli("text-scores", str(ws), "--model", "smollm2-135m", "--limit", "4", "--quiet")
    assert "4 computed, 0 cached" in first.stdout
    again = run_cli("text-scores", str(ws), "--model", "smollm2-135m", "--quiet")
    assert "2 computed, 4 cached" in again.stdout
    with Workspace.open(ws) as w:
        frame = text_scores(w)
    assert list(frame.columns) == ["item_id", "model", "loss", "zlib", "min_k_10", "min_k_20", "min_kpp_10",
                                   "min_kpp_20"]
    assert len(frame) == 6 and frame.notna().all().all()
    assert (frame["min_kpp_10"] <= frame["min_kpp_20"]).all() and (frame["min_k_10"] <= frame["min_k_20"]).all()
    out = tmp_path / "t.csv"
    run_cli("export", str(ws), "text-scores", "--out", str(out))
    exported = pd.read_csv(out)
    assert len(exported) == 6 and {"row_index", "n_tokens", "zlib_bytes", "run_id"} <= set(exported.columns)


def test_text_scores_of_an_unscored_workspace_are_an_empty_frame(tmp_path):
    from curate.store import Workspace
    from scoring.text_store import text_scores

    with Workspace.open(small_workspace(tmp_path / "ws", 2)) as w:
        assert text_scores(w).empty
