"""Text scores (loss, zlib, Min-K%, Min-K%++) against a plain transformers forward and numpy, on
every runner that can serve the model; and the stored, resumable, exported run."""
from __future__ import annotations

import zlib

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import one_line_error, run_cli, small_workspace


@pytest.fixture(scope="module")
def smollm2():
    from scoring.models import load, resolve
    return load(resolve("smollm2-135m"))


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    from curate.items.store import Workspace
    ws = Workspace.open(small_workspace(tmp_path_factory.mktemp("text") / "ws", 5))
    try:
        return ws.items()
    finally:
        ws.close()


def plain_metrics(model, tokenizer, text: str) -> dict:
    """The definitions, written out as Shi et al.'s reference code computes them: the tokenizer's
    ids of the text (with whatever BOS it adds), one forward, the log-softmax of logits[:-1] read
    at ids[1:], numpy for the rest."""
    ids = tokenizer(text)["input_ids"]
    with torch.inference_mode():
        lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1).double().numpy()[:-1]
    return numpy_metrics(lp, ids, text)


def numpy_metrics(lp: np.ndarray, ids: list[int], text: str) -> dict:
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


def text_units(tokenizer, items, max_length=8192):
    from scoring.encode import build_units
    from scoring.text import ask_stats, text_spec

    units = build_units(tokenizer, [text_spec(i, it) for i, it in enumerate(items)], max_length=max_length,
                        seq_mean=False)
    for unit in units:
        ask_stats(unit, 0)
    return units


def assert_close(got: dict, expected: dict, why) -> None:
    for name, value in expected.items():
        assert abs(got[name] - value) < 1e-4, (why, name, got[name], value)


def test_text_metrics_equal_a_plain_forward_on_every_runner(smollm2, items):
    from scoring import forward
    from scoring.text import item_text, metrics

    model, tok = smollm2
    texts = [it["prompts"]["full"] + " " + it["options"][it["gold"]] for it in items]
    assert [item_text(it) for it in items] == texts
    units = text_units(tok, items)
    # The text is the full-mode gold row as the engine feeds it; on these items (no BOS added by
    # SmolLM2's tokenizer, no token across the boundary) that is the tokenizer's ids of the text.
    assert [u.requests[0].prefix + u.requests[0].conts[0] for u in units] == [tok(t)["input_ids"] for t in texts]
    expected = [plain_metrics(model, tok, t) for t in texts]
    runners = forward.runnable(model)
    assert set(runners) == {"llama", "packed", "padded", "sequences"}
    for runner in runners:
        results = forward.score_requests(model, [u.requests[0] for u in units], pad_id=tok.pad_token_id or 0,
                                        runner=runner)  # one batch, all items
        for res, e, text in zip(results, expected, texts):
            assert_close(metrics(text, *res.stats), e, (runner, text[:30]))


def test_text_statistics_of_split_long_and_truncated_rows_equal_a_plain_forward(smollm2, items):
    """A row longer than --batch-tokens is scored in pieces (score_long); a row longer than the
    window is cut from the left as the option scores cut it, and the text is what remains."""
    from scoring import forward
    from scoring.text import item_text, metrics

    model, tok = smollm2
    units = text_units(tok, items)
    pieces = forward.score_requests(model, [u.requests[0] for u in units], pad_id=0, max_tokens=16)
    for res, it in zip(pieces, items):
        assert_close(metrics(item_text(it), *res.stats), plain_metrics(model, tok, item_text(it)), "pieces")
    cut = text_units(tok, items, max_length=16)
    assert all("truncated" in u.flags[0] for u in cut)
    for res, u, it in zip(forward.score_requests(model, [u.requests[0] for u in cut], pad_id=0), cut, items):
        ids = u.requests[0].prefix + u.requests[0].conts[0]
        assert len(ids) == 17 and ids == tok(item_text(it))["input_ids"][-17:]
        with torch.inference_mode():
            lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1).double().numpy()[:-1]
        assert_close(metrics(item_text(it), *res.stats), numpy_metrics(lp, ids, item_text(it)), "truncated")


def test_a_prefix_cached_row_gets_the_statistics_of_its_whole_text(smollm2, items):
    """Rows sharing a long prefix (an instruction) take it from the prefix cache; the statistics
    of the cached part are computed once and joined to the rest; option scores do not move."""
    from scoring import prefix_cache
    from scoring.encode import Request
    from scoring.text import item_text, metrics

    model, tok = smollm2
    instruction = "Read the start of a short story and pick the ending a careful reader would expect. " * 4
    texts = [instruction + item_text(it) for it in items]
    units = text_units(tok, [{**it, "prompts": {**it["prompts"], "full": instruction + it["prompts"]["full"]}}
                             for it in items])
    assert [u.requests[0].prefix + u.requests[0].conts[0] for u in units] == [tok(t)["input_ids"] for t in texts]
    requests = [u.requests[0] for u in units]
    shared = prefix_cache.shared_lengths(requests)
    assert min(shared) >= prefix_cache.MIN_SHARED
    for prefix_lp in (True, False):
        for r in requests:
            r.prefix_lp = prefix_lp
        caches = prefix_cache.Caches(model, 2**30)
        got = prefix_cache.score_with_caches(model, requests, shared, caches, pad_id=0)
        assert caches.prefixes == 1
        for res, text in zip(got, texts):
            assert_close(metrics(text, *res.stats), plain_metrics(model, tok, text), ("cached", prefix_lp))
        plain = [Request(r.prefix, r.conts, r.options, r.purpose, r.prefix_lp) for r in requests]
        without = prefix_cache.score_with_caches(model, plain, shared, prefix_cache.Caches(model, 2**30), pad_id=0)
        assert [(r.prefix_sum, r.cont_sums, r.cont_greedy) for r in got] == \
            [(r.prefix_sum, r.cont_sums, r.cont_greedy) for r in without]


def test_text_scores_stored_resumed_and_exported(tmp_path):
    from curate.items.store import Workspace
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
    from curate.items.store import Workspace
    from scoring.text_store import text_scores

    with Workspace.open(small_workspace(tmp_path / "ws", 2)) as w:
        assert text_scores(w).empty


def stored(ws, sql: str) -> list:
    from curate.items.store import Workspace
    with Workspace.open(ws) as w:
        return [tuple(r) for r in w.conn.execute(sql)]


OPTION_SCORES = "SELECT item_id, option_index, logprob_sum, seq_mean, is_greedy, n_tokens FROM scores ORDER BY 1, 2"
TEXT_SCORES = ("SELECT item_id, loss, zlib, min_k_10, min_k_20, min_kpp_10, min_kpp_20, n_tokens, flags "
               "FROM text_scores ORDER BY 1")


@pytest.mark.parametrize("seq_mean", ["0-shot", "none"])
def test_the_full_pass_stores_the_standalone_text_scores_and_the_same_option_scores(tmp_path, smollm2, seq_mean):
    """`curate score --text-scores` reads the text scores off the full-mode pass: they equal
    `curate text-scores`' and a plain forward's (within 1e-4), and not one option score moves."""
    from scoring.run import Score
    from scoring.text import item_text
    from scoring.text_run import TextScores

    model, tok = smollm2
    plain, both = small_workspace(tmp_path / "plain", 4), small_workspace(tmp_path / "both", 4)
    common = {"quiet": True, "seq_mean": seq_mean, "batch_tokens": 400}
    Score.with_options(plain, model="smollm2-135m", modes=["full"], **common).run()
    summary = Score.with_options(both, model="smollm2-135m", modes=["full"], text_scores=True, **common).run()
    assert summary["text_computed"] == 4 and summary["computed"] == 4
    assert stored(plain, OPTION_SCORES) == stored(both, OPTION_SCORES)
    assert TextScores.with_options(plain, model="smollm2-135m", quiet=True).run()["computed"] == 4
    # the standalone pass finds the full pass's rows current: same definition, same version
    assert TextScores.with_options(both, model="smollm2-135m", quiet=True).run()["computed"] == 0
    texts = {it["item_id"]: item_text(it) for it in stored_items(both)}
    for alone, full in zip(stored(plain, TEXT_SCORES), stored(both, TEXT_SCORES)):
        assert alone[0] == full[0] and alone[7:] == full[7:]
        assert np.allclose(alone[1:7], full[1:7], rtol=0, atol=1e-4), (alone, full)
        expected = plain_metrics(model, tok, texts[full[0]])
        assert np.allclose(full[1:7], [expected[k] for k in ("loss", "zlib", "min_k_10", "min_k_20", "min_kpp_10",
                                                              "min_kpp_20")], rtol=0, atol=1e-4)


def execute(ws, statement: str) -> None:
    from curate.items.store import Workspace
    with Workspace.open(ws) as w:
        w.conn.execute(statement)
        w.conn.commit()


def stored_items(ws) -> list[dict]:
    from curate.items.store import Workspace
    with Workspace.open(ws) as w:
        return w.items()


def test_text_scores_of_the_full_pass_resume_and_commit_with_the_option_scores(tmp_path, monkeypatch):
    """Each batch's option and text scores commit together: a run killed in a batch stores
    neither for its items, and the next run computes exactly what is missing."""
    import scoring.run
    from curate.core.errors import CurateError
    from scoring.run import Score
    from scoring.text_run import TextScores

    ws = small_workspace(tmp_path / "ws", 6)
    run = {"quiet": True, "batch_tokens": 500}
    Score.with_options(ws, model="smollm2-135m", modes=["full"], limit=2, **run).run()  # option scores only, for two items
    first = stored(ws, "SELECT item_id, run_id FROM scores ORDER BY 1, option_index")
    writes = []

    def dies_on_the_second_batch(w, rows):
        writes.append(len(rows))
        if len(writes) == 2:
            raise KeyboardInterrupt("killed")
        return real(w, rows)
    real = scoring.run.write_text_scores
    monkeypatch.setattr(scoring.run, "write_text_scores", dies_on_the_second_batch)
    with pytest.raises(KeyboardInterrupt):
        Score.with_options(ws, model="smollm2-135m", modes=["full"], text_scores=True, **run).run()
    monkeypatch.undo()
    texts = {r[0] for r in stored(ws, "SELECT item_id FROM text_scores")}
    options = {r[0] for r in stored(ws, "SELECT item_id FROM scores")}
    assert len(texts) == writes[0] and 0 < len(texts) < 6
    assert options == texts | {r[0] for r in first}  # the killed batch left neither kind of row
    again = Score.with_options(ws, model="smollm2-135m", modes=["full"], text_scores=True, **run).run()
    assert again["text_computed"] == 6 - len(texts)
    assert len(stored(ws, "SELECT item_id FROM text_scores")) == 6
    # the option rows stored before keep their run: an item whose options were stored is not rescored
    assert stored(ws, "SELECT item_id, run_id FROM scores WHERE item_id IN (%s) ORDER BY 1, option_index"
                  % ",".join(f"'{r[0]}'" for r in first)) == first
    last = Score.with_options(ws, model="smollm2-135m", modes=["full"], text_scores=True, **run).run()
    assert last["computed"] == 0 and last["text_computed"] == 0
    # rows of the old definition (no text version with their run) are recomputed, never mixed
    execute(ws, "UPDATE score_runs SET info_json = json_remove(info_json, '$.text_version')")
    assert Score.with_options(ws, model="smollm2-135m", modes=["full"], text_scores=True, **run).run()["text_computed"] == 6
    # another dtype's text scores under the label: refused, as `curate text-scores` refuses it
    execute(ws, "DELETE FROM text_scores")
    assert TextScores.with_options(ws, model="smollm2-135m", quiet=True).run()["computed"] == 6
    execute(ws, "UPDATE score_runs SET dtype = 'bfloat16' WHERE origin = 'text'")
    with pytest.raises(CurateError, match="already holds text scores of another model, tokenizer or dtype"):
        Score.with_options(ws, model="smollm2-135m", modes=["full"], text_scores=True, **run).run()


def test_text_scores_need_the_full_mode_cloze_row(tmp_path):
    ws = small_workspace(tmp_path / "ws", 2)
    proc = run_cli("score", str(ws), "--model", "smollm2-135m", "--modes", "zero", "--text-scores", "--quiet",
                   check=False)
    one_line_error(proc, "--text-scores reads each item's text off its full-mode cloze 0-shot row")
    done = run_cli("score", str(ws), "--model", "smollm2-135m", "--modes", "full", "--text-scores", "--quiet")
    assert "2 text scores computed" in done.stdout
