"""The scoring engine against its references: transformers' own loss, lm-eval's numbers,
itself scored one item at a time, and itself after a kill -9."""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import HELLASWAG, ROOT, run_cli, save_tiny

FIXTURE = Path(__file__).parent / "fixtures" / "lmeval_hellaswag_smollm2_200.json"


@pytest.fixture(scope="module")
def lm():
    from scoring.models import load, resolve
    return load(resolve("smollm2-135m"))


@pytest.fixture(scope="module")
def small_ws(tmp_path_factory):
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    return Ingest(tmp_path_factory.mktemp("small") / "ws", IngestOptions(data=str(HELLASWAG),
                                                                         limit=12), get_adapter("hellaswag")).run()


def score_items(lm, items, mode, seq_mean=True):
    from scoring.encode import build_unit
    from scoring.forward import score_requests
    from scoring.run import assemble, batches
    model, tok = lm
    units = [build_unit(tok, i, mode, it["prompts"][mode], it["options"], max_length=8192, seq_mean=seq_mean)
             for i, it in enumerate(items)]
    rows = []
    for batch in batches(units, 4096):  # as curate score runs them
        results = score_requests(model, [r for u in batch for r in u.requests], pad_id=tok.pad_token_id,
                                 max_tokens=4096)
        k = 0
        for u in batch:
            rows += assemble(u, results[k:k + len(u.requests)], items[u.item_index], label="m", run_id="r")
            k += len(u.requests)
    order = {it["item_id"]: i for i, it in enumerate(items)}
    return sorted(rows, key=lambda r: (order[r["item_id"]], r["option_index"]))


def test_seq_mean_is_minus_the_transformers_loss(lm, small_ws):
    """Every mode, including the empty choice-only context and a trailing-space placeholder."""
    from curate.items.store import Workspace
    model, tok = lm
    items = Workspace.open(small_ws).items()[:3]
    for mode in ("full", "zero", "placeholder", "choice-only"):
        for row in score_items(lm, items, mode):
            item = items[int(row["item_id"].rsplit("/", 1)[1])]
            enc = tok(item["prompts"][mode] + " " + item["options"][row["option_index"]], return_tensors="pt")
            with torch.no_grad():
                loss = model(**enc, labels=enc["input_ids"]).loss.item()
            assert abs(row["seq_mean"] + loss) < 1e-4, (mode, row["item_id"], row["option_index"])


def test_encoding_follows_lmeval_boundary_rules(lm):
    from scoring.encode import build_unit, encode_pair
    _, tok = lm
    # Trailing context spaces move into the continuation.
    ctx, cont, _ = encode_pair(tok, "The cat sat ", "on the mat")
    assert ctx == tok.encode("The cat sat") and cont == tok.encode("The cat sat on the mat")[len(ctx):]
    # An empty context gets the prefix token (BOS for SmolLM2) and is flagged.
    unit = build_unit(tok, 0, "choice-only", "", ["a dog", "a cat"], max_length=8192)
    assert unit.requests[0].prefix == [tok.bos_token_id]
    assert all("empty-context" in f for f in unit.flags)
    # Too long for the model: truncated from the left and flagged.
    unit = build_unit(tok, 0, "full", "word " * 50, ["end"], max_length=16)
    assert "truncated" in unit.flags[0] and len(unit.requests[0].prefix) + unit.n_tokens[0] == 17


def test_batched_tokenization_and_batch_plan(lm, small_ws):
    """build_units (one batched tokenizer call per chunk) equals build_unit item by item; the
    plan keeps each unit whole and each batch within the token budget (or a lone unit)."""
    from curate.items.store import Workspace
    from scoring.encode import build_unit, build_units
    from scoring.run import batches
    _, tok = lm
    items = Workspace.open(small_ws).items()
    specs = [(i, m, it["prompts"][m], it["options"]) for i, it in enumerate(items)
             for m in ("full", "zero", "placeholder", "choice-only")]
    fast = build_units(tok, specs, max_length=8192, chunk=7)
    slow = [build_unit(tok, *spec, max_length=8192) for spec in specs]
    assert [(u.requests, u.flags, u.n_tokens, u.seq_len) for u in fast] == \
           [(u.requests, u.flags, u.n_tokens, u.seq_len) for u in slow]
    plan = batches(fast, 600)
    assert sorted((u.item_index, u.mode) for b in plan for u in b) == sorted((u.item_index, u.mode) for u in fast)
    for b in plan:
        assert len(b) == 1 or sum(len(u.requests) for u in b) * max(u.max_row for u in b) <= 600


def lmeval_reference():
    if not FIXTURE.is_file():
        pytest.fail(f"missing {FIXTURE}; regenerate with benchmarks/lmeval_reference.py")
    return json.loads(FIXTURE.read_text())


def check_parity(lm, n):
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    ref = lmeval_reference()["items"][:n]
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        ws = Ingest(Path(tmp) / "ws", IngestOptions(data=str(HELLASWAG), limit=n), get_adapter("hellaswag")).run()
        from curate.items.store import Workspace
        items = Workspace.open(ws).items()
    rows = score_items(lm, items, "full", seq_mean=False)  # lm-eval has no seq_mean (checked elsewhere)
    ours = np.array([r["logprob_sum"] for r in rows]).reshape(n, 4)
    theirs = np.array([r["lls"] for r in ref])
    assert np.abs(ours - theirs).max() < 1e-3
    assert [r["is_greedy"] for r in rows] == [int(g) for r in ref for g in r["greedy"]]
    gold = np.array([it["gold"] for it in items])
    chars = np.array([[len(o) for o in it["options"]] for it in items])
    assert list((ours.argmax(1) == gold).astype(float)) == [r["acc"] for r in ref]
    assert list(((ours / chars).argmax(1) == gold).astype(float)) == [r["acc_norm"] for r in ref]


def test_parity_with_lmeval_200_items(lm):
    """Every item of the fixture (lm-eval 0.4.13's own output), in float32."""
    check_parity(lm, 200)


def stored(ws: Path) -> list[tuple]:
    with sqlite3.connect(ws / "workspace.db") as c:
        return c.execute("SELECT model, mode, item_id, option_index, logprob_sum, n_tokens, n_chars, n_bytes, "
                         "is_greedy, seq_mean, flags FROM scores ORDER BY 1, 2, 3, 4").fetchall()


def test_kill_9_resumes_to_identical_results(small_ws, tmp_path):
    """A real `curate score` process is killed (SIGKILL) after its first committed batch; the
    rerun finishes, and the result equals an uninterrupted run's bit for bit; a third run
    computes nothing."""
    args = ["--model", "smollm2-135m", "--modes", "zero", "--limit", "8", "--batch-tokens", "160", "--quiet"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    shutil.copytree(small_ws, whole)
    shutil.copytree(small_ws, killed)
    run_cli("score", whole, *args)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "curate", "score", killed, *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        try:
            with sqlite3.connect(killed / "workspace.db", timeout=30) as c:
                if c.execute("SELECT count(*) FROM scores").fetchone()[0]:
                    break
        except sqlite3.OperationalError:
            pass
        time.sleep(0.2)
    assert proc.poll() is None, "the run ended before it could be killed; lower --batch-tokens"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = len(stored(killed))
    assert 0 < partial < 32
    out = run_cli("score", killed, *args).stdout
    assert stored(killed) == stored(whole)
    again = run_cli("score", killed, *args).stdout
    assert " 0 item-modes computed, 8 cached" in again, again
    assert "item-modes computed" in out


def test_export_scores(small_ws, tmp_path):
    import pandas as pd
    ws = tmp_path / "ws"
    shutil.copytree(small_ws, ws)
    run_cli("score", ws, "--model", "smollm2-135m", "--modes", "choice-only", "--formulations", "cloze,letters",
            "--limit", "2", "--quiet")
    for name in ("s.parquet", "s.csv"):
        run_cli("export", ws, "scores", "--out", tmp_path / name)
    frame = pd.read_parquet(tmp_path / "s.parquet")
    assert len(frame) == 16 and len(pd.read_csv(tmp_path / "s.csv")) == 16
    for col in ("item_id", "row_index", "model", "mode", "formulation", "option_index", "logprob_sum", "n_tokens",
                "n_chars", "n_bytes", "is_greedy", "seq_mean"):
        assert frame[col].notna().all(), col
    # Each row is told apart by the store's own key: cloze and letters scores of one option included.
    assert set(frame["formulation"]) == {"cloze", "letters"}
    assert not frame.duplicated(["model", "mode", "formulation", "item_id", "option_index"]).any()
    # choice-only cloze has no context at all; its letters form has the lettered list as context.
    cloze = frame["formulation"] == "cloze"
    assert set(frame.loc[cloze, "flags"]) == {"empty-context"} and frame.loc[~cloze, "flags"].isna().all()
    runs = sqlite3.connect(ws / "workspace.db").execute("SELECT model_hash, tokenizer_hash, dtype, device, info_json "
                                                        "FROM score_runs").fetchone()
    assert runs[0].startswith("sha256:") and runs[1].startswith("sha256:") and runs[2:4] == ("float32", "cpu")
    assert {"torch", "transformers", "benchcurate"} <= set(json.loads(runs[4])["versions"])


def test_no_seq_mean_then_seq_mean(small_ws, tmp_path):
    """--no-seq-mean stores lm-eval's numbers only; a later default run fills seq_mean in (the
    same logprob_sum), and a --no-seq-mean run after that finds everything cached. (Caching, not
    numbers: a tiny seeded random Llama with SmolLM2's tokenizer keeps the three runs quick.)"""
    from curate.items.store import Workspace
    from scoring.models import load_tokenizer, resolve
    from scoring.store import read_scores
    ws = tmp_path / "ws"
    shutil.copytree(small_ws, ws)
    tiny = save_tiny(tmp_path / "tiny", "llama", load_tokenizer(resolve("smollm2-135m")))
    args = ("--model", tiny, "--modes", "full", "--limit", "3", "--quiet")
    assert "3 item-modes computed" in run_cli("score", ws, *args, "--no-seq-mean").stdout
    first = read_scores(Workspace.open(ws))
    assert first["seq_mean"].isna().all() and first["logprob_sum"].notna().all()
    assert "3 item-modes computed" in run_cli("score", ws, *args).stdout
    second = read_scores(Workspace.open(ws))
    assert second["seq_mean"].notna().all()
    assert np.abs(second["logprob_sum"] - first["logprob_sum"]).max() < 1e-4
    assert "0 item-modes computed, 3 cached" in run_cli("score", ws, *args, "--no-seq-mean").stdout
    # More items with --no-seq-mean: the stored three keep their seq_mean (their batch is run again
    # for the new items, but a unit stored already is not rewritten) and count as cached.
    more = ("--model", tiny, "--modes", "full", "--limit", "6", "--quiet", "--no-seq-mean")
    assert "3 item-modes computed, 3 cached" in run_cli("score", ws, *more).stdout
    third = read_scores(Workspace.open(ws))
    assert third.groupby("row_index")["seq_mean"].apply(lambda v: v.notna().all()).tolist() == [True] * 3 + [False] * 3


def test_bad_arguments_are_one_line_errors(small_ws, tmp_path):
    proc = run_cli("score", small_ws, "--model", "smollm2-135m", "--modes", "full,bogus", check=False)
    assert proc.returncode == 2 and "bogus" in proc.stderr
    proc = run_cli("export", small_ws, "nothing", check=False)
    assert proc.returncode == 2 and "nothing" in proc.stderr
    proc = run_cli("score", tmp_path, "--model", "smollm2-135m", check=False)
    assert proc.returncode == 2 and "not a benchcurate workspace" in proc.stderr
    for args, says in ((["--formulations", ","], "names no formulation"), (["--label", ""], "is empty"),
                       (["--label", "  "], "is empty"), (["--max-memory", "garbage!!"], "has no use with --device cpu")):
        proc = run_cli("score", small_ws, "--model", "smollm2-135m", *args, check=False)
        assert proc.returncode == 2 and says in proc.stderr, (args, proc.stderr)



def test_self_check_lines_give_the_tolerance_and_the_verdict(small_ws, tmp_path):
    """`curate score` and `curate text-scores` print the self-check's largest difference with the
    dtype's tolerance for that number and the verdict (a failure stops the run instead), here in
    bfloat16, the loosest tolerance."""
    import re

    ws = tmp_path / "ws"
    shutil.copytree(small_ws, ws)
    pattern = (r"self-check: .* own forward: passed, largest difference (\S+) within the bfloat16 tolerance "
               r"of (\S+) for that number")
    for args in (("score", ws, "--modes", "full"), ("text-scores", ws)):
        out = run_cli(*args, "--model", "smollm2-135m", "--limit", "2", "--dtype", "bfloat16", "--quiet").stdout
        found = re.search(pattern, out)
        assert found and 0 <= float(found.group(1)) <= float(found.group(2)), out

@pytest.mark.slow
def test_accelerate_data_parallel_merges_into_one_workspace(small_ws, tmp_path):
    """Two real processes (accelerate's torchrun launcher, gloo on CPU) split the items and
    write into one workspace: every option exactly once, one run, the single-process numbers."""
    args = ["--model", "smollm2-135m", "--modes", "zero", "--limit", "6", "--quiet"]
    single, parallel = tmp_path / "single", tmp_path / "parallel"
    shutil.copytree(small_ws, single)
    shutil.copytree(small_ws, parallel)
    run_cli("score", single, *args)
    accelerate = Path(sys.executable).parent / "accelerate"
    proc = subprocess.run([str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                           "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "curate", "score",
                           str(parallel), *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "(process 0 of 2)" in proc.stdout
    a, b = stored(single), stored(parallel)
    assert [r[:4] for r in a] == [r[:4] for r in b] and len(b) == 24
    assert max(abs(x[4] - y[4]) for x, y in zip(a, b)) < 1e-4
    assert [x[5:9] for x in a] == [y[5:9] for y in b]
    with sqlite3.connect(parallel / "workspace.db") as c:
        assert c.execute("SELECT count(DISTINCT run_id) FROM scores").fetchone()[0] == 1
        assert json.loads(c.execute("SELECT info_json FROM score_runs").fetchone()[0])["processes"] == 2
