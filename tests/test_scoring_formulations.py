"""Formulations as a scoring axis: per-option contexts, the letters formulation and its rotations,
stored side by side under one label; the migration that added the formulation to the key."""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest
import torch

from conftest import SHARED, run_cli, save_tiny
from curate.items import formulations as forms
from curate.items.store import Workspace

BENCHMARKS = SHARED / "benchmarks"


@pytest.fixture(scope="module")
def lm():
    from scoring.models import load, resolve
    return load(resolve("smollm2-135m"))


def workspace(tmp_path, name, folder, split, limit):
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    return Ingest(tmp_path / name, IngestOptions(data=str(BENCHMARKS / folder / f"{split}.jsonl.gz"), split=split,
                                                 limit=limit), get_adapter(name)).run()


def plain_logprob(lm, context: str, continuation: str) -> float:
    """The continuation's log-probability after the context, one plain transformers forward."""
    model, tok = lm
    ctx, whole = tok(context)["input_ids"], tok(context + continuation)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([whole])).logits[0].log_softmax(-1)
    return float(sum(logits[i - 1, whole[i]] for i in range(len(ctx), len(whole))))


def test_per_option_contexts_score_the_shared_continuation(lm, tmp_path):
    """Winogrande: each option fills the blank in its own context and the rest of the sentence
    is scored after each; the two contexts are two requests (different tokens), each also
    giving its option's seq_mean in the same pass."""
    from scoring.encode import build_unit
    from scoring.run import unit_spec
    ws = workspace(tmp_path, "winogrande", "winogrande", "validation", 2)
    item = Workspace.open(ws).items()[0]
    spec = unit_spec(0, item, "full", "cloze")
    unit = build_unit(lm[1], 0, "full", spec.context, spec.options, max_length=8192)
    assert len(unit.requests) == 2 and all(r.prefix_lp and r.purpose == "ll" for r in unit.requests)
    run_cli("score", ws, "--model", "smollm2-135m", "--modes", "full,zero", "--quiet")
    with sqlite3.connect(ws / "workspace.db") as c:
        rows = c.execute("SELECT mode, option_index, logprob_sum, n_chars, formulation, seq_mean FROM scores "
                         "WHERE item_id = ? ORDER BY mode, option_index", (item["item_id"],)).fetchall()
    suffix = " always got the easier cases."
    expected = {("full", 0): "Sarah was a much better surgeon than Maria so Sarah",
                ("full", 1): "Sarah was a much better surgeon than Maria so Maria", ("zero", 0): "Sarah",
                ("zero", 1): "Maria"}
    model, tok = lm
    for mode, j, logprob, n_chars, formulation, seq_mean in rows:
        assert abs(logprob - plain_logprob(lm, expected[mode, j], suffix)) < 1e-3, (mode, j)
        assert n_chars == len(suffix) - 1 and formulation == "cloze"
        enc = tok(expected[mode, j] + suffix, return_tensors="pt")  # the study's mean over the whole sentence
        with torch.no_grad():
            loss = model(**enc, labels=enc["input_ids"]).loss.item()
        assert abs(seq_mean + loss) < 1e-4, (mode, j)


def test_letters_rotations_and_cloze_under_one_label(lm, tmp_path):
    """One model's cloze, letters and rotated-letters scores live under one label; a second run
    computes nothing; rotated rows keep each option's own index."""
    from scoring.store import read_scores
    ws = workspace(tmp_path, "mmlu", "mmlu", "dev", 3)
    # A seeded tiny random Llama with SmolLM2's tokenizer: the bookkeeping, not the model, is tested.
    model = save_tiny(tmp_path / "tiny", "llama", lm[1])
    args = ("--model", model, "--label", "tiny", "--modes", "full", "--quiet", "--no-seq-mean")
    out = run_cli("score", ws, *args).stdout  # the default: MMLU is scored as lm-eval does, in letters
    assert "letters" in out and "3 item-modes computed" in out
    run_cli("score", ws, *args, "--formulations", "cloze,letters+rotations")
    again = run_cli("score", ws, *args, "--formulations", "cloze,letters+rotations").stdout
    assert " 0 item-modes computed, 15 cached" in again, again
    scores = read_scores(Workspace.open(ws))
    assert sorted(scores["formulation"].unique()) == ["cloze", "letters", "letters+r1", "letters+r2", "letters+r3"]
    assert len(scores) == 3 * 4 * 5 and set(scores["model"]) == {"tiny"}
    letters = scores[scores["formulation"] == "letters"]
    assert (letters["n_chars"] == 1).all() and (letters["n_tokens"] == 1).all()
    bad = run_cli("score", ws, *args, "--formulations", "letters+x", check=False)
    assert bad.returncode == 2 and "unknown formulation" in bad.stderr


def test_letters_request_is_one_context_with_one_letter_per_option(lm):
    from scoring.encode import build_unit
    from scoring.run import unit_spec
    item = {"item_id": "x/y/0", "prompts": {"full": "Q", "zero": "", "placeholder": "", "choice-only": ""},
            "options": ["red", "green", "blue"], "gold": 2}
    spec = unit_spec(0, item, "full", "letters+r1")
    assert spec.context == ["Q\nA. blue\nB. red\nC. green\nAnswer:"] * 3 and spec.options == ["B", "C", "A"]
    unit = build_unit(lm[1], 0, "full", spec.context, spec.options, max_length=8192, formulation="letters+r1")
    assert len([r for r in unit.requests if r.purpose == "ll"]) == 1 and unit.n_tokens == [1, 1, 1]
    assert unit.formulation == "letters+r1"


def test_migration_keeps_old_rows_as_cloze(tmp_path):
    """A workspace scored before formulations existed: the rebuild keeps every row (as cloze)
    and the key then takes a letters row for the same option."""
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    from scoring.store import open_scores, read_scores, write_scores
    from store_helpers import scored_before
    ws = Ingest(tmp_path / "ws", IngestOptions(data=str(BENCHMARKS / "copa" / "validation.jsonl.gz"),
                                               limit=2), get_adapter("copa")).run()
    scored_before(ws, 2)
    with open_scores(ws) as new:
        frame = read_scores(new)
        assert list(frame["formulation"]) == ["cloze"] * 4 and list(frame["logprob_sum"]) == [0, -1, -1, -2]
        with new.transaction():
            write_scores(new, [{"model": "m", "mode": "full", "formulation": "letters", "item_id": "copa/validation/0",
                                "option_index": 0, "logprob_sum": -5.0, "content_hash": "h", "run_id": "r"}])
        assert len(read_scores(new)) == 5
        assert new.conn.execute("SELECT count(*) FROM migrations WHERE name = 'scores-003-formulation'").fetchone()[0]


def test_rotation_moves_every_option_through_every_letter():
    item = {"item_id": "x/y/0", "prompts": {"full": "", "zero": "", "placeholder": "", "choice-only": ""},
            "options": ["a", "b", "c", "d"], "gold": 0}
    shown = np.array([[forms.scored(item, "full", f).continuations[j] for f in forms.rotations(4)] for j in range(4)])
    assert all(sorted(row) == list("ABCD") for row in shown) and all(sorted(col) == list("ABCD") for col in shown.T)
