"""Loading models for scoring: what identifies them, where they are placed, what is refused, and
the checks every run makes before it stores anything.

Tiny random-weight models saved with SmolLM2's tokenizer stand in for large ones (no download);
the Hub is a Hub cache laid out on disk, read offline as huggingface_hub reads its own.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import ROOT, copy_ws, one_line_error, run_cli, save_tiny, small_workspace


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    from scoring.models import load_tokenizer, resolve
    return load_tokenizer(resolve("smollm2-135m"))


@pytest.fixture(scope="module")
def base_ws(tmp_path_factory):
    return small_workspace(tmp_path_factory.mktemp("models") / "ws", 4)


@pytest.fixture()
def ws(base_ws, tmp_path):
    return copy_ws(base_ws, tmp_path / "ws")


def tables(ws: Path) -> dict:
    """Every table of the workspace with its row count: what a refused run must leave as it was."""
    with sqlite3.connect(ws / "workspace.db") as c:
        names = [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: c.execute(f"SELECT count(*) FROM {n}").fetchone()[0] for n in names}


def stored(ws: Path) -> dict:
    """The tables holding rows, migrations aside: a refused run may have created the (empty) score
    tables, never a row in them."""
    return {name: rows for name, rows in tables(ws).items() if rows and name != "migrations"}


def stored_rows(ws: Path) -> list[tuple]:
    with sqlite3.connect(ws / "workspace.db") as c:
        return c.execute("SELECT mode, item_id, option_index, logprob_sum, seq_mean, is_greedy, flags FROM scores "
                         "ORDER BY 1, 2, 3").fetchall()


# --- model loading errors: one line, exit 2, nothing written (issue 14, item 9) ---------------------

def test_bad_models_are_one_line_errors_and_write_nothing(ws, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    fake = tmp_path / "model.gguf"
    fake.write_text("not a model")
    # The Hub unreachable without HF_HUB_OFFLINE: a closed local port stands in for it (no
    # network here); one try, no retries, so the line comes in seconds.
    unreachable = {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}
    cases = [
        (["--model", tmp_path / "no" / "such-model"], "no such file or folder", None),
        (["--model", "nobody-here/no-such-model"], "not a Hub model available here (offline", None),
        (["--model", "nobody-here/no-such-model"], "not a Hub model available here (the Hub cannot be reached",
         unreachable),
        (["--model", empty], "no config.json", None),
        (["--model", fake], "not a GGUF file", None),
    ]
    if not torch.cuda.is_available():
        cases.append((["--model", "smollm2-135m", "--device", "cuda"], "CUDA is not available", None))
    before = tables(ws)
    for args, message, env in cases:
        proc = run_cli("score", ws, *args, "--modes", "zero", "--quiet", check=False, env=env, timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and message in proc.stderr, (args, proc.stderr)
        assert tables(ws) == before, args


def test_local_annotator_with_a_missing_model_is_one_line(ws):
    """``local:MODEL`` resolves through scoring.models: the same one line, and no record."""
    proc = run_cli("annotate", ws, "--round", "1", "--annotator", "local:/nonexistent", check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "'/nonexistent': no such file or folder" in proc.stderr
    assert set(stored(ws)) <= {"meta", "items"}


# --- identity --------------------------------------------------------------------------------------

def test_folder_identity_reads_headers_sizes_and_samples_not_every_byte(tmp_path, smollm2_tokenizer, monkeypatch):
    """A folder is identified by names, sizes, small files and safetensors headers, plus a few
    sampled blocks: a copy has the same identity, a changed config or weight another, and a 3 GB
    weight file costs well under a megabyte of reading."""
    from scoring import models
    folder = save_tiny(tmp_path / "m", "llama", smollm2_tokenizer)
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    assert models.folder_identity(folder) == models.folder_identity(copy)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "rms_norm_eps": 1e-5}))
    assert models.folder_identity(copy) != models.folder_identity(folder)

    big = tmp_path / "big"
    big.mkdir()
    shutil.copy(folder / "config.json", big)
    header = json.dumps({"w": {"dtype": "F32", "shape": [3 << 28], "data_offsets": [0, 3 << 30]}}).encode()
    with open(big / "model.safetensors", "wb") as fh:  # 3 GB, sparse: nothing to read but zeros
        fh.write(len(header).to_bytes(8, "little") + header)
        fh.truncate(8 + len(header) + (3 << 30))
    before = models.folder_identity(big)
    read = []
    real_open = open

    def counting_open(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        original = handle.read

        def read_and_count(*a):
            data = original(*a)
            read.append(len(data))
            return data
        handle.read = read_and_count
        return handle
    monkeypatch.setattr(models, "open", counting_open, raising=False)
    assert models.folder_identity(big) == before
    assert sum(read) < 1 << 20
    size = (big / "model.safetensors").stat().st_size
    with real_open(big / "model.safetensors", "r+b") as fh:  # a weight inside the middle sampled block changes
        fh.seek((size - models.SAMPLE_BYTES) * 4 // (models.SAMPLES - 1) + 100)
        fh.write(b"\x01")
    assert models.folder_identity(big) != before


@pytest.mark.parametrize("hub", ["offline", "unreachable"])
def test_hub_model_is_identified_by_its_commit_offline(ws, tmp_path, smollm2_tokenizer, hub):
    """A Hub id read from the Hub cache is scored at the commit the cache names, and that commit
    is what the stored scores are keyed by: with HF_HUB_OFFLINE set, and with the Hub merely
    unreachable (a closed local port stands in for it; no network here), where the run must not
    wait on retries."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--someone--tiny-qwen2"
    save_tiny(repo / "snapshots" / commit, "qwen2", smollm2_tokenizer)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    if hub == "unreachable":
        env = {**env, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}
    started = time.monotonic()
    run_cli("score", ws, "--model", "someone/tiny-qwen2", "--modes", "zero", "--limit", "2", "--quiet", env=env,
            timeout=120)
    assert time.monotonic() - started < 60
    with sqlite3.connect(ws / "workspace.db") as c:
        model_hash, info = c.execute("SELECT model_hash, info_json FROM score_runs").fetchone()
    assert model_hash == f"hub:someone/tiny-qwen2@{commit}" and json.loads(info)["revision"] == commit


# --- device_map ------------------------------------------------------------------------------------

def test_device_auto_with_disk_offload_scores_as_a_plain_load(ws, tmp_path, smollm2_tokenizer):
    """``--device auto`` places the model with accelerate; here (no GPU) a CPU budget of 30 MB puts
    the embedding and the first layer of a 38 MB Qwen2 in memory and the rest (three 3 MB layers,
    the output layer) on disk, loaded layer by layer as the forward reaches it. The scores equal a
    plain CPU load's. Without ``disk`` in ``--max-memory`` the same model is refused before
    anything is written. (A sharded load over several GPUs cannot be run on this machine.)"""
    from curate.core.errors import CurateError
    from scoring.run import Score
    folder = save_tiny(tmp_path / "qwen2", "qwen2", smollm2_tokenizer, intermediate_size=4096, num_hidden_layers=4)
    plain = Score.with_options(ws, model=str(folder), modes=["zero"], limit=3, label="plain", quiet=True).run()
    before = stored(ws)
    with pytest.raises(CurateError, match=r"does not fit in cpu: 30MB; parts would go to disk.*--max-memory"):
        Score.with_options(ws, model=str(folder), modes=["zero"], limit=3, label="placed", device="auto", max_memory="cpu=30MB", quiet=True).run()
    assert stored(ws) == before
    placed = Score.with_options(ws, model=str(folder), modes=["zero"], limit=3, label="placed", device="auto", max_memory="cpu=30MB,disk", quiet=True).run()
    assert placed["runner"] == "packed" and plain["computed"] == placed["computed"] == 3
    with sqlite3.connect(ws / "workspace.db") as c:
        info = json.loads(c.execute("SELECT info_json FROM score_runs WHERE model = 'placed'").fetchone()[0])
        rows = c.execute("SELECT a.logprob_sum, b.logprob_sum, a.seq_mean, b.seq_mean FROM scores a JOIN scores b "
                         "USING (mode, item_id, option_index) WHERE a.model = 'plain' AND b.model = 'placed'").fetchall()
    assert info["device_map"] == {"cpu": 2, "disk": 6} and info["max_memory"] == "cpu=30MB,disk"
    assert len(rows) == 12 and all(abs(a - b) < 1e-5 and abs(c - d) < 1e-5 for a, b, c, d in rows)


# --- the self-check --------------------------------------------------------------------------------

def test_self_check_is_recorded_and_a_wrong_engine_stops_the_run(ws, tmp_path, smollm2_tokenizer, monkeypatch):
    """A Mistral with a 24-token window: the probe's short rows fit inside it, HellaSwag's do not.
    With the engine's window handling broken on purpose, the probe passes and the self-check
    catches it: the run stops naming the architecture and both numbers, and stores nothing.
    Working, the run records the check (and ``--self-check 0`` records that it was skipped)."""
    from curate.core.errors import CurateError
    from scoring import attention
    from scoring.run import Score
    folder = save_tiny(tmp_path / "mistral", "mistral", smollm2_tokenizer, sliding_window=24)
    before = stored(ws)
    with monkeypatch.context() as patch:
        patch.setattr(attention, "allowed", lambda rule, block, *_: block)  # the model's window ignored
        with pytest.raises(CurateError, match=r"self-check failed: MistralForCausalLM \(mistral\) in float32 through "
                                              r"the packed runner, item hellaswag/validation/\d+ \(full, cloze\) request \d+, "
                                              r"continuation \d+: -\d+\.\d+ here, -\d+\.\d+ by the model's own forward.*"
                                              r"nothing was stored"):
            Score.with_options(ws, model=str(folder), modes=["full"], limit=3, quiet=True).run()
    assert stored(ws) == before
    summary = Score.with_options(ws, model=str(folder), modes=["full"], limit=3, label="checked", quiet=True).run()
    skipped = Score.with_options(ws, model=str(folder), modes=["full"], limit=3, label="unchecked", self_check=0, quiet=True).run()
    with sqlite3.connect(ws / "workspace.db") as c:
        infos = dict(c.execute("SELECT model, info_json FROM score_runs").fetchall())
    check = json.loads(infos["checked"])["self_check"]
    assert check == summary["self_check"] and check["items"] == 2 and check["max_abs_diff"] < 1e-4
    assert check["runner"] == "packed" and check["dtype"] == "float32"
    assert json.loads(infos["unchecked"])["self_check"]["items"] == 0 and skipped["computed"] == 3
    # A --batch-tokens smaller than every row bounds memory below what the plain forward needs for
    # one row: the check is not run, and the run says so (recorded, and a note on stderr).
    tight = Score.with_options(ws, model=str(folder), modes=["full"], limit=3, label="tight", batch_tokens=1, quiet=True).run()
    assert tight["self_check"]["items"] == 0 and "longer than --batch-tokens 1" in tight["self_check"]["note"]
    proc = run_cli("score", ws, "--model", folder, "--modes", "full", "--limit", "3", "--label", "tight2",
                   "--batch-tokens", "1", "--quiet")
    assert "note: self-check not run: every row is longer than --batch-tokens 1" in proc.stderr


# --- long contexts: truncated as lm-eval truncates, memory bounded (issue 14, item 6) ---------------

def long_item_ws(root: Path, context: str) -> Path:
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    data = root.parent / f"{root.name}.jsonl"
    data.write_text(json.dumps({"q": context, "choices": ["the end.", "more of the same."], "answer": 0}) + "\n")
    return Ingest(root, IngestOptions(data=str(data)), get_adapter("generic", question="q", choices="choices",
                                                              answer="answer", answer_format="index")).run()


def words(n: int, seed: int) -> str:
    import random
    rng = random.Random(seed)
    vocabulary = "time people way year day thing man world life hand part child eye place work week case".split()
    return " ".join(rng.choice(vocabulary) for _ in range(n))


def test_a_context_past_the_window_is_truncated_and_flagged_with_seq_mean_on(tmp_path, smollm2_tokenizer):
    """A context of about 12k tokens and a model with a 4096-token window: every sequence, the
    seq_mean ones included, is cut to its last 4097 tokens, flagged ``truncated``, and scored as
    the model's own forward scores that cut sequence."""
    from curate.items.store import Workspace
    from scoring.encode import encode_pair
    from scoring.run import Score
    folder = save_tiny(tmp_path / "llama", "llama", smollm2_tokenizer, max_position_embeddings=4096)
    ws = long_item_ws(tmp_path / "ws", words(12000, 0))
    context = Workspace.open(ws).items()[0]["prompts"]["full"]
    assert len(smollm2_tokenizer(context)["input_ids"]) > 11000
    Score.with_options(ws, model=str(folder), modes=["full"], quiet=True, batch_tokens=2048).run()
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    for mode, item_id, j, logprob_sum, seq_mean, greedy, flags in stored_rows(ws):
        option = ["the end.", "more of the same."][j]
        assert flags == "truncated"
        ctx, cont, _ = encode_pair(smollm2_tokenizer, context, " " + option)
        ids = (ctx + cont)[-4097:]
        whole = smollm2_tokenizer(context + " " + option)["input_ids"][-4097:]
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
            expected = lp[len(ids) - len(cont) - 1:-1].gather(1, torch.tensor(cont)[:, None]).sum().item()
            loss = model(input_ids=torch.tensor([whole]), labels=torch.tensor([whole])).loss.item()
        assert logprob_sum == pytest.approx(expected, abs=1e-4) and seq_mean == pytest.approx(-loss, abs=1e-4)


def test_a_200k_token_context_runs_in_bounded_memory(tmp_path, smollm2_tokenizer):
    """A context of about 200k tokens with an 8192-token window, and --batch-tokens 1024: cut to the
    window and run 1024 tokens at a time, in a process whose peak memory stays near an idle one's
    (a 200k-token row would need some 40 GB for its attention mask alone)."""
    folder = save_tiny(tmp_path / "llama", "llama", smollm2_tokenizer, max_position_embeddings=8192)
    ws = long_item_ws(tmp_path / "ws", words(200000, 1))
    # The child's own high-water mark (VmHWM): its ru_maxrss would start at this process's size.
    code = ("import json; from scoring.run import Score; "
            f"s = Score.with_options({str(ws)!r}, model={str(folder)!r}, modes=['full'], batch_tokens=1024, quiet=True).run(); "
            "rss = int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]); "
            "print(json.dumps({'rss': rss, 'computed': s['computed']}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["computed"] == 1 and out["rss"] / 1024 < 1500, out
    assert all(flags == "truncated" for *_, flags in stored_rows(ws))


# --- models and items that cannot be scored: one line before anything is stored -------------------

def test_broken_model_files_are_one_line_errors_and_write_nothing(ws, tmp_path, smollm2_tokenizer):
    """A truncated or garbled weights file, a config.json that is not JSON or whose vocabulary
    disagrees with the weights, on the Llama fast path (llama) and the transformers path (qwen2);
    and a consistent model whose vocabulary is smaller than its tokenizer's ids: each one line
    naming the model or the item, exit 2, no row written. Two cases run the CLI (one line, the
    load report held back); the rest run the ``Score`` stage in this process, which is faster."""
    from curate.core.errors import CurateError
    from scoring.run import Score

    before = tables(ws)
    cases = []
    for kind in ("llama", "qwen2"):
        good = save_tiny(tmp_path / f"{kind}-good", kind, smollm2_tokenizer)
        weights = (good / "model.safetensors").read_bytes()
        for name, damage, message in (
                ("truncated", lambda f: (f / "model.safetensors").write_bytes(weights[:len(weights) // 2]),
                 "could not be loaded"),
                ("garbage", lambda f: (f / "model.safetensors").write_bytes(os.urandom(4096)), "could not be loaded"),
                ("config-not-json", lambda f: (f / "config.json").write_text("{not json"), ""),
                ("config-vocab", lambda f: (f / "config.json").write_text(json.dumps(
                    {**json.loads((good / "config.json").read_text()), "vocab_size": 1000})),
                     "size mismatch"),
                # more or fewer layers than the weights hold: transformers fills the missing ones with
                # random values or drops the extra ones, and only reports it; plausible wrong numbers
                ("config-more-layers", lambda f: layers(f, good, +1), "are not in its files, and would be random"),
                ("config-fewer-layers", lambda f: layers(f, good, -1), "have no place in the model its config.json describes"),
                # and a config.json that fails its own class's checks is one line too
                ("config-invalid", lambda f: layers(f, good, +1, keep_types=True), "must be equal to the number")):
            folder = tmp_path / f"{kind}-{name}"
            shutil.copytree(good, folder)
            damage(folder)
            cases.append((folder, message))
        if kind == "llama":  # no layer_types: the same config as "config-more-layers"
            cases.pop()
        small = save_tiny(tmp_path / f"{kind}-vocab1000", kind, smollm2_tokenizer, vocab_size=1000)
        cases.append((small, "but the model has 1000 token embeddings: the tokenizer does not belong to this model"))
    for folder, message in cases:
        if folder.name in ("llama-truncated", "qwen2-config-vocab", "llama-config-more-layers"):
            proc = run_cli("score", ws, "--model", folder, "--modes", "zero", "--quiet", check=False, timeout=120)
            assert message in one_line_error(proc), folder.name
        else:
            with pytest.raises(CurateError) as refused:
                Score.with_options(ws, model=str(folder), modes=["zero"], quiet=True).run()
            assert message in str(refused.value) and "\n" not in str(refused.value), folder.name
        assert stored(ws) == stored_before(before), folder.name


def layers(folder, good, change: int, *, keep_types: bool = False) -> None:
    """Write ``good``'s config.json into ``folder`` with ``change`` more layers (its per-layer
    ``layer_types`` list dropped, so the config stays valid, unless ``keep_types``)."""
    config = json.loads((good / "config.json").read_text())
    config["num_hidden_layers"] += change
    if not keep_types:
        config.pop("layer_types", None)
    (folder / "config.json").write_text(json.dumps(config))


def stored_before(before: dict) -> dict:
    return {name: rows for name, rows in before.items() if rows and name != "migrations"}


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_an_option_longer_than_the_window_is_refused_naming_the_item(tmp_path, smollm2_tokenizer, kind):
    """An option of some 200 tokens and a 64-token window: no context would be left and its
    positions do not exist, so the run stops naming the item and option, as lm-eval 0.4.13 refuses
    it (``assert len(continuation_enc) <= self.max_length``), on the Llama fast path and through
    transformers (GPT-2's learned positions), before anything is stored."""
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    extra = {"max_position_embeddings": 64} if kind == "llama" else {"n_positions": 64, "n_embd": 64, "n_layer": 2,
                                                                      "n_head": 4}
    folder = save_tiny(tmp_path / kind, kind, smollm2_tokenizer, **extra)
    data = tmp_path / "long.jsonl"
    data.write_text(json.dumps({"q": "Which one?", "choices": [words(200, 2), "short."], "answer": 1}) + "\n")
    ws = Ingest(tmp_path / "ws", IngestOptions(data=str(data)), get_adapter("generic", question="q", choices="choices",
                                                                        answer="answer", answer_format="index")).run()
    before = tables(ws)
    proc = run_cli("score", ws, "--model", folder, "--modes", "full", "--quiet", check=False)
    line = one_line_error(proc)
    assert "(full, cloze): option 0 is" in line and "longer than the model's window of 64 tokens" in line
    assert stored(ws) == stored_before(before)
    # --self-check 0 does not let it through either (it used to store a number read off another row).
    assert run_cli("score", ws, "--model", folder, "--modes", "full", "--self-check", "0", "--quiet",
                   check=False).returncode == 2 and stored(ws) == stored_before(before)


def test_a_context_starting_with_the_bos_text_gets_no_second_bos_as_in_lm_eval(tmp_path, smollm2_tokenizer):
    """A tokenizer that adds BOS and a context that already starts with BOS's text (a chat
    template's): lm-eval 0.4.13 encodes such a string without special tokens; our token ids are
    its ``_encode_pair``'s, for that context and for plain ones."""
    from tokenizers import processors
    from transformers import AutoTokenizer

    from lm_eval.models.huggingface import HFLM
    from scoring.encode import encode_pair
    folder = save_tiny(tmp_path / "llama", "llama", smollm2_tokenizer)
    bos = smollm2_tokenizer.bos_token
    tok = AutoTokenizer.from_pretrained(folder)
    tok._tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B:1", special_tokens=[(bos, tok.bos_token_id)])
    tok.save_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    assert tok("hi")["input_ids"][0] == tok.bos_token_id  # it does add BOS
    lm = HFLM(pretrained=str(folder), dtype="float32", device="cpu", batch_size=1)
    for context, continuation in ((f"{bos}user says hello", " yes"), (f"{bos}user says hello ", "no"),
                                  ("A plain context.", " an option"), ("", " no context")):
        ours = encode_pair(tok, context, continuation)[:2]
        theirs = lm._encode_pair(context, continuation) if context else ([lm.prefix_token_id],
                                                                            lm.tok_encode(continuation,
                                                                                          add_special_tokens=False))
        assert (list(ours[0]), list(ours[1])) == (list(theirs[0]), list(theirs[1])), context
    assert encode_pair(tok, f"{bos}user says hello", " yes")[0].count(tok.bos_token_id) == 1


def test_repeated_modes_run_once_and_a_formulation_for_no_item_is_refused(ws, tmp_path, smollm2_tokenizer):
    """`--modes zero,zero` scores zero once; `letters+r9` on 4-option items applies to nothing,
    which is an error, not a run that records nothing."""
    from scoring.run import Score
    folder = save_tiny(tmp_path / "llama", "llama", smollm2_tokenizer)
    summary = Score.with_options(ws, model=str(folder), modes=["zero", "zero"], limit=2, quiet=True).run()
    assert summary["modes"] == ["zero"] and summary["computed"] == 2
    before = tables(ws)
    proc = run_cli("score", ws, "--model", folder, "--modes", "zero", "--formulations", "letters+r9", "--quiet",
                   check=False)
    assert proc.returncode == 2 and "formulation 'letters+r9' applies to no item" in proc.stderr, proc.stderr
    assert "at most 4" in proc.stderr and tables(ws) == before
