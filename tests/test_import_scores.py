"""Import of the study's released score files (`curate import-scores --format study-csv`)."""
from __future__ import annotations

import shutil

import numpy as np
import pandas as pd

from conftest import HELLASWAG, PAPER_SCORES, run_cli
from scoring.normalize import predictions
from scoring.store import open_scores, read_runs, read_scores


def test_every_model_and_mode_imported(paper_ws):
    with open_scores(paper_ws) as ws:
        runs = read_runs(ws)
        zero = read_scores(ws, modes=["zero"])
        llama = read_scores(ws, models=["meta-llama/Llama-3.2-1B"], modes=["full"])
    assert len(runs) == 10 + 10 + 8  # full, zero, placeholder (8 small models)
    assert zero["model"].nunique() == 10 and len(zero) == 10 * 10042 * 4
    assert {"qwen-2.5-32b-instruct", "EleutherAI/pythia-1b", "google/gemma-3-1b-pt"} <= set(zero["model"])
    assert llama[["seq_mean", "study_sum", "study_byte_mean"]].notna().all().all()
    assert llama["logprob_sum"].isna().all()  # the study released no option-only sums
    raw = pd.read_csv(PAPER_SCORES / "full_prompt" / "sum_meta-llama--Llama-3.2-1B.csv")
    assert np.allclose(llama["study_sum"].to_numpy(), raw.to_numpy().ravel())


def test_zero_prompt_core_of_the_study(paper_ws):
    """The study's zero-prompt core: 75..18 % for k = 1..10; 3963 items at k >= 7."""
    with open_scores(paper_ws) as ws:
        preds = predictions(read_scores(ws, modes=["zero"]), "seq_mean")
        gold = {it["item_id"]: it["gold"] for it in ws.items()}
    right = (preds["pred"] == preds["item_id"].map(gold)).groupby(preds["item_id"]).sum()
    assert [round(100 * (right >= k).mean()) for k in range(1, 11)] == [75, 67, 60, 55, 50, 45, 39, 34, 27, 18]
    assert int((right >= 7).sum()) == 3963


def test_row_count_mismatch_is_refused(tmp_path):
    ws = tmp_path / "ws"
    run_cli("init", ws, "--benchmark", "hellaswag", "--data", HELLASWAG, "--limit", "100")
    proc = run_cli("import-scores", ws, "--format", "study-csv", "--dir", PAPER_SCORES, check=False)
    assert proc.returncode == 2
    assert "10042 rows" in proc.stderr and "100 items" in proc.stderr
    with open_scores(ws) as w:
        assert w.tables()["scores"] == 0


def test_bad_value_names_file_row_and_column(tmp_path):
    ws = tmp_path / "ws"
    run_cli("init", ws, "--benchmark", "hellaswag", "--data", HELLASWAG, "--limit", "3")
    d = tmp_path / "scores" / "zero_prompt"
    d.mkdir(parents=True)
    (d / "org--model.csv").write_text("nll_0,nll_1,nll_2,nll_3\n-1,-2,-3,-4\n-1,oops,-3,-4\n-1,-2,-3,-4\n")
    proc = run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "scores", check=False)
    assert proc.returncode == 2
    assert "org--model.csv" in proc.stderr and "row 1" in proc.stderr and "nll_1" in proc.stderr
    (d / "org--model.csv").write_text("nll_0,nll_1,nll_2,nll_3\n-1,-2,-3,-4\n-1,-2,-3,-4\n-1,-2,-3,-4\n")
    out = run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "scores").stdout
    assert "org/model" in out


def _three_items(tmp_path):
    ws = tmp_path / "ws"
    run_cli("init", ws, "--benchmark", "hellaswag", "--data", HELLASWAG, "--limit", "3")
    return ws


def _study_file(folder, name, header, rows=((-1, -2, -3, -4),) * 3):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))


def test_option_columns_are_read_by_name_in_order(tmp_path):
    """Values are placed by column position, so a header naming the options in another order
    (or skipping one) is refused, naming the file and the first column out of place."""
    ws = _three_items(tmp_path)
    for header, column in (("nll_1,nll_0,nll_2,nll_3", "nll_1"), ("nll_0,nll_1,nll_2,nll_7", "nll_7"),
                           ("nll_0,nll_1,nll_2,score", "score"), ("nll_0,nll_0,nll_2,nll_3", "nll_0.1")):
        _study_file(tmp_path / "s" / "full_prompt", "org--m.csv", header)
        proc = run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "s", check=False)
        assert proc.returncode == 2 and "org--m.csv" in proc.stderr and f"field '{column}'" in proc.stderr, proc.stderr
        assert "nll_0,nll_1,nll_2,nll_3" in proc.stderr
    with open_scores(ws) as w:
        assert w.tables()["scores"] == 0


def test_a_csv_the_import_would_skip_is_refused(tmp_path):
    ws = _three_items(tmp_path)
    _study_file(tmp_path / "s" / "full_prompt", "org--m.csv", "nll_0,nll_1,nll_2,nll_3")
    for stray in ("Zero_prompt/org--m.csv", "zero_prompt/org--m.CSV", "pythia.csv"):
        (tmp_path / "s" / stray).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "s" / stray).write_text("nll_0,nll_1,nll_2,nll_3\n")
        proc = run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "s", check=False)
        assert proc.returncode == 2 and f"{stray} is not a study file" in proc.stderr, proc.stderr
        (tmp_path / "s" / stray).unlink()
    with open_scores(ws) as w:
        assert w.tables()["scores"] == 0
    run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "s")


def test_importing_other_files_over_a_model_and_mode_needs_replace(tmp_path):
    """One (model, mode) holds one import's files: a folder with only the sum_ file would empty
    the stored seq_mean, and a changed file would swap numbers silently; both are refused
    without --replace, which then stores exactly the new files' columns. The same files again
    change nothing."""
    ws = _three_items(tmp_path)
    _study_file(tmp_path / "a" / "full_prompt", "org--m.csv", "nll_0,nll_1,nll_2,nll_3")
    _study_file(tmp_path / "a" / "full_prompt", "sum_org--m.csv", "nll_0,nll_1,nll_2,nll_3", ((-5, -6, -7, -8),) * 3)
    run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "a")
    run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "a")  # same files: nothing changes
    _study_file(tmp_path / "b" / "full_prompt", "sum_org--m.csv", "nll_0,nll_1,nll_2,nll_3", ((-9, -6, -7, -8),) * 3)
    proc = run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "b", check=False)
    assert proc.returncode == 2 and "model 'org/m', mode full: already holds scores imported from other files " \
        "(org--m.csv, sum_org--m.csv" in proc.stderr and "--replace" in proc.stderr, proc.stderr
    with open_scores(ws) as w:
        stored = read_scores(w)
    assert len(stored) == 12 and (stored["seq_mean"] == -1).sum() == 3 and (stored["study_sum"] == -5).sum() == 3
    run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "b", "--replace")
    with open_scores(ws) as w:
        stored = read_scores(w)
    assert len(stored) == 12 and stored["seq_mean"].isna().all() and (stored["study_sum"] == -9).sum() == 3
    assert stored["run_id"].nunique() == 1


def test_an_import_refuses_a_label_being_scored(tmp_path):
    """A label `curate score` is writing (its lock held, here by this process) is not imported
    into meanwhile: the two would mix under one label. The import is one line and writes nothing."""
    from curate.core.lock import work_lock

    ws = _three_items(tmp_path)
    _study_file(tmp_path / "s" / "zero_prompt", "org--m.csv", "nll_0,nll_1,nll_2,nll_3")
    with work_lock(ws, "score org/m", command="score"):
        proc = run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "s", check=False)
    assert proc.returncode == 2 and "is already running score org/m" in proc.stderr, proc.stderr
    with open_scores(ws) as w:
        assert w.tables()["scores"] == 0
    run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "s")


def test_a_value_no_log_likelihood_can_have_is_refused(tmp_path):
    """Study files hold log-likelihoods (<= 0; the released ones range from -519 to -0.35). A value
    above 0 (1e300, or a file of negative log-likelihoods) is one line naming file, row and column,
    and nothing is stored; 0 (a probability of 1) and a very unlikely -1e300 are kept as written."""
    from conftest import one_line_error

    ws = _three_items(tmp_path)
    for bad, shown in (("1e300", "1e+300"), ("0.5", "0.5")):
        _study_file(tmp_path / "s" / "zero_prompt", "org--m.csv", "nll_0,nll_1,nll_2,nll_3",
                    ((-1, -2, -3, -4), (-1, -2, bad, -4), (-1, -2, -3, -4)))
        proc = run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "s", check=False)
        one_line_error(proc, "org--m.csv, row 1, field 'nll_2'", f"{shown} is above 0", "not negative log-likelihoods")
        with open_scores(ws) as w:
            assert w.tables()["scores"] == 0
    _study_file(tmp_path / "s" / "zero_prompt", "org--m.csv", "nll_0,nll_1,nll_2,nll_3",
                ((-1, -2, -3, -4), (0, -2, "-1e300", -4), (-1, -2, -3, -4)))
    run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "s")
    with open_scores(ws) as w:
        row = read_scores(w).query("row_index == 1")["seq_mean"].tolist()
    assert row == [0.0, -2.0, -1e300, -4.0]
