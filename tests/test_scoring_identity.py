"""What identifies stored scores: a label holds one model's scores in one dtype, scores of another
engine version are recomputed, and readers refuse a label whose rows come from different sources.

Runs the real engine over a few HellaSwag items with a tiny seeded random Llama saved with SmolLM2's
tokenizer (these tests are about bookkeeping, not numbers; SmolLM2 in bfloat16 on a CPU without
native bfloat16 took a minute per test)."""
from __future__ import annotations

import shutil
import sqlite3

import pytest
import torch

from conftest import PAPER_SCORES, copy_ws, run_cli, save_tiny, small_workspace

MODES = ["choice-only"]  # the shortest prompts: these tests are about bookkeeping, not numbers


@pytest.fixture(scope="module")
def base_ws(tmp_path_factory):
    return small_workspace(tmp_path_factory.mktemp("ident") / "ws", 4)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from scoring.models import load_tokenizer, resolve
    return save_tiny(tmp_path_factory.mktemp("tiny") / "llama", "llama", load_tokenizer(resolve("smollm2-135m")))


@pytest.fixture()
def ws(base_ws, tmp_path):
    return copy_ws(base_ws, tmp_path / "ws")


def score(ws, model, **kw):
    from scoring.run import Score
    return Score.with_options(ws, model=str(model), modes=kw.pop("modes", MODES), quiet=True, label=kw.pop("label", "tiny"), **kw).run()


def rows_by_dtype(ws) -> dict:
    with sqlite3.connect(ws / "workspace.db") as c:
        return dict(c.execute("SELECT r.dtype, count(*) FROM scores s JOIN score_runs r USING (run_id) "
                              "GROUP BY r.dtype").fetchall())


def test_another_dtype_under_one_label_is_refused_then_replaced_or_kept_apart(ws, tiny):
    from curate.core.errors import CurateError
    assert score(ws, tiny)["computed"] == 4
    with pytest.raises(CurateError, match=r"label 'tiny' already holds float32 scores .* would store "
                                          r"bfloat16 scores .* another --label .* --replace"):
        score(ws, tiny, dtype="bfloat16")
    assert rows_by_dtype(ws) == {"float32": 16}  # nothing was written by the refused run
    kept = score(ws, tiny, dtype="bfloat16", label="tiny@bf16")
    assert kept["computed"] == 4 and rows_by_dtype(ws) == {"float32": 16, "bfloat16": 16}
    replaced = score(ws, tiny, dtype="bfloat16", replace=True)
    assert replaced["replaced_rows"] == 16 and replaced["computed"] == 4
    assert rows_by_dtype(ws) == {"bfloat16": 32}
    assert score(ws, tiny, dtype="bfloat16")["computed"] == 0  # and the replacement is cached as usual


def test_cli_refusal_is_one_line_and_replace_says_what_it_deleted(ws, tiny):
    args = ["score", ws, "--model", tiny, "--label", "tiny", "--modes", "choice-only", "--limit", "2", "--quiet"]
    run_cli(*args)
    proc = run_cli(*args, "--dtype", "bfloat16", check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "already holds float32" in proc.stderr
    done = run_cli(*args, "--dtype", "bfloat16", "--replace")
    assert "deleted 8 stored score rows of 'tiny'" in done.stdout
    # A bfloat16 run on a CPU without native bfloat16 (this 2-core AVX2 machine) says it ran slower
    # than float32 would; on a CPU with AVX-512 BF16 or AMX it says nothing.
    native = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    assert ("no native bfloat16 instructions" in done.stderr) == (not native), done.stderr
    assert "no native" not in run_cli(*args, "--replace").stderr  # float32: never


def test_scores_of_another_engine_version_are_recomputed_and_a_mix_is_refused(ws, tiny, monkeypatch, tmp_path):
    import scoring.backends.engine
    from curate.analyses.report import Analyze
    from curate.analyses.options import AnalyzeOptions
    from curate.core.errors import CurateError
    score(ws, tiny)
    monkeypatch.setattr(scoring.backends.engine, "ENGINE_VERSION", 99)
    partial = score(ws, tiny, limit=2)  # a re-score after an engine change, stopped half-way
    assert partial["computed"] == 2
    with pytest.raises(CurateError, match=rf"mode 'choice-only': stored scores come from engine versions "
                                          rf"{scoring.ENGINE_VERSION}, 99"):
        Analyze(ws, AnalyzeOptions(out=tmp_path / "report", core_mode="none")).run()
    score(ws, tiny)  # finishes the re-score (whole batches rerun; only the 2 stale items' rows are written)
    with sqlite3.connect(ws / "workspace.db") as c:
        assert c.execute("SELECT DISTINCT r.engine FROM scores s JOIN score_runs r USING (run_id)").fetchall() == [(99,)]
    assert score(ws, tiny)["computed"] == 0
    metrics = Analyze(ws, AnalyzeOptions(out=tmp_path / "report", core_mode="none")).run()
    runs = metrics["provenance"]["score_runs"]  # the stopped re-score's rows stay; the finish adds the rest
    assert {(r["engine"], r["dtype"], r["origin"]) for r in runs} == {(99, "float32", "scored")}
    assert {mode: sum(r["items"] for r in runs if r["mode"] == mode) for mode in {r["mode"] for r in runs}} == \
        dict.fromkeys({r["mode"] for r in runs}, 4)
    assert "Scores read" in (tmp_path / "report" / "report.md").read_text()


def test_readers_refuse_a_label_that_mixes_sources(ws, tiny, tmp_path):
    """A workspace written before labels were checked can hold float32 rows in one mode and
    bfloat16 rows in another under one label: analyze and filter refuse it, naming both."""
    from curate.analyses.report import Analyze
    from curate.analyses.options import AnalyzeOptions
    from curate.core.errors import CurateError
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions
    score(ws, tiny, modes=["choice-only", "zero"])
    with sqlite3.connect(ws / "workspace.db") as c:  # what an old toolkit could leave behind
        c.execute("UPDATE score_runs SET dtype = 'bfloat16'")
        c.execute("INSERT INTO score_runs SELECT 'old-fp32', model, origin, model_hash, tokenizer_hash, 'float32', "
                  "device, info_json, created_at, engine FROM score_runs")
        c.execute("UPDATE scores SET run_id = 'old-fp32' WHERE mode = 'zero'")
    pattern = r"model 'tiny': its stored scores mix .*bfloat16 scores.* and float32 scores.*--replace"
    with pytest.raises(CurateError, match=pattern):
        Analyze(ws, AnalyzeOptions(out=tmp_path / "report", core_mode="none")).run()
    rules = tmp_path / "rules.yaml"
    rules.write_text("name: t\nstages:\n- name: scorer-wrong\n  when:\n    correct:\n      models: [tiny]\n"
                     "      mode: choice-only\n      normalization: sum\n      at_most: 0\n")
    with pytest.raises(CurateError, match=pattern):
        Filter(ws, FilterOptions(rules=rules, out=tmp_path / "decisions")).run()


def test_import_into_a_scored_label_is_refused_unless_replaced(tmp_path, hellaswag_ws):
    """The study's files name real models; a label already scored here is not silently overwritten."""
    from curate.core.errors import CurateError
    from scoring.store import add_run, open_scores, write_scores
    from scoring.study_csv import import_study_csv
    ws = tmp_path / "ws"
    shutil.copytree(hellaswag_ws, ws)
    with open_scores(ws) as store, store.transaction():
        item = store.items()[0]
        add_run(store, run_id="mine", model="EleutherAI/pythia-1b", origin="scored", model_hash="sha256:x",
                tokenizer_hash="sha256:y", dtype="float32", info={}, engine=2)
        write_scores(store, [{"model": "EleutherAI/pythia-1b", "mode": "full", "item_id": item["item_id"],
                              "option_index": 0, "logprob_sum": -1.0, "content_hash": item["content_hash"],
                              "run_id": "mine"}])
    folder = tmp_path / "scores" / "full_prompt"
    folder.mkdir(parents=True)
    shutil.copy(PAPER_SCORES / "full_prompt" / "EleutherAI--pythia-1b.csv", folder)
    with pytest.raises(CurateError, match=r"label 'EleutherAI/pythia-1b' already holds float32 scores"):
        import_study_csv(ws, tmp_path / "scores")
    import_study_csv(ws, tmp_path / "scores", replace=True)
    with sqlite3.connect(ws / "workspace.db") as c:
        assert c.execute("SELECT count(*), count(DISTINCT run_id) FROM scores").fetchone() == (4 * 10042, 1)
    import_study_csv(ws, tmp_path / "scores")  # the same import again: the same source, accepted
