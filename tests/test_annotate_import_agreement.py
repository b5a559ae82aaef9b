"""Importing the study's published layout, agreement between annotators, and the export."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from annotate.agreement import gwet_ac1, workspace_agreement
from annotate.study_import import import_study
from annotate_helpers import copy_ws, records, small_workspace
from conftest import run_cli
from curate.core.errors import InputError

STUDY_LABELS = ["ungrammatical, prompt", "nonsense, prompt", "ungrammatical, correct answer",
                "nonsense, correct answer", "ungrammatical, incorrect answer(s)", "nonsense, incorrect answer(s)"]


@pytest.fixture(scope="module")
def base_ws(tmp_path_factory):
    return small_workspace(tmp_path_factory.mktemp("imp") / "ws", 40)


def round1_frame(n=40, flip=()):
    rows = []
    for i in range(n):
        labels = ["high quality"] if i % 3 == 0 else [STUDY_LABELS[i % 6], STUDY_LABELS[(i + 1) % 6]]
        if i in flip:
            labels = ["high quality"] if labels != ["high quality"] else ["nonsense, prompt"]
        rows.append({"original_index": i, "quality_label": "[" + "; ".join(labels) + "]", "Question": "..."})
    return pd.DataFrame(rows)


def round2_frame(n=40, skip=()):
    rows = [{"original_index": i, "best_option": "ABCD"[i % 4], "equally_good_options": "None" if i % 5 else "B, D",
             "all_implausible": "Yes" if i % 7 == 0 else "No", "worst_option": "ABCD"[(i + 1) % 4]}
            for i in range(n) if i not in skip]
    return pd.DataFrame(rows)


def test_import_study_layout_round1_and_round2(base_ws, tmp_path):
    ws = copy_ws(base_ws, tmp_path / "ws")
    round1_frame().to_parquet(tmp_path / "annotations_round_1.parquet")
    round2_frame(skip={3, 17}).to_csv(tmp_path / "annotations_round_2.csv", index=False)
    s1 = import_study(ws, tmp_path / "annotations_round_1.parquet", 1)
    proc = run_cli("import-annotations", ws, "--format", "study", "--round", "2",
                   "--file", tmp_path / "annotations_round_2.csv", "--missing", "refused")
    assert s1["valid"] == 40 and "valid 38, refused 2" in proc.stdout
    r1 = records(ws, round=1, annotator="imported:study")
    assert r1.result.iloc[0] == {"labels": ["high_quality"]}
    assert r1.result.iloc[1] == {"labels": ["nonsense_prompt", "ungrammatical_correct"]}
    r2 = records(ws, round=2, annotator="imported:study").set_index("row_index")
    assert r2.loc[5, "result"] == {"best": 1, "equally_good": [1, 3], "all_implausible": False, "worst": 2}
    assert r2.loc[7, "result"]["all_implausible"] is True
    assert list(r2[r2.status == "refused"].index) == [3, 17] and r2.loc[3, "result"] is None
    # importing the same file again replaces, never duplicates
    import_study(ws, tmp_path / "annotations_round_1.parquet", 1)
    assert len(records(ws, round=1)) == 40


@pytest.mark.parametrize("change, field", [
    (lambda f: f.assign(quality_label=f.quality_label.where(f.index != 4, "[ungrammatical, title]")), "quality_label"),
    (lambda f: f.assign(quality_label=f.quality_label.where(f.index != 4, "[high quality; nonsense, prompt]")), "quality_label"),
    (lambda f: f.assign(original_index=f.original_index.where(f.index != 4, 999)), "original_index"),
    (lambda f: f.assign(original_index=f.original_index.where(f.index != 4, 3)), "original_index"),
])
def test_import_errors_name_file_row_and_field(base_ws, tmp_path, change, field):
    ws = copy_ws(base_ws, tmp_path / "ws")
    path = tmp_path / "r1.csv"
    change(round1_frame()).to_csv(path, index=False)
    with pytest.raises(InputError) as err:
        import_study(ws, path, 1)
    assert err.value.row == 4 and err.value.field == field and str(path) in str(err.value)
    assert records(ws).empty  # all rows or none


@pytest.mark.parametrize("name, text, row, field, message", [
    # pandas took the first field of a row with one too many as an index: row 7 imported as row 5
    ("shift.csv", "original_index,quality_label\n7,5,[high quality]\n", 0, None, "has 3 fields but the header has 2"),
    ("short.csv", "original_index,quality_label\n1,[high quality]\n2\n", 1, None, "has 1 fields but the header has 2"),
    ("twice.csv", "original_index,quality_label,quality_label\n5,[high quality],[nonsense, prompt]\n", None, None,
     "names column 'quality_label' twice"),
    ("twice.jsonl", '{"original_index": 7, "original_index": 6, "quality_label": "[high quality]"}\n', 0,
     "original_index", "written twice"),
])
def test_a_file_pandas_would_misread_is_refused(base_ws, tmp_path, name, text, row, field, message):
    """Annotation files are read with ingest's readers: what pandas reads silently wrong (a
    shifted row, a short row, a column or key written twice) is refused, naming file and row."""
    ws = copy_ws(base_ws, tmp_path / "ws")
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as err:
        import_study(ws, tmp_path / name, 1)
    assert message in str(err.value) and name in str(err.value)
    assert (err.value.row, err.value.field) == (row, field)
    assert records(ws).empty


def test_import_round2_bad_letter_and_missing_column(base_ws, tmp_path):
    ws = copy_ws(base_ws, tmp_path / "ws")
    frame = round2_frame()
    frame.loc[2, "worst_option"] = "E"
    frame.to_csv(tmp_path / "r2.csv", index=False)
    proc = run_cli("import-annotations", ws, "--format", "study", "--round", "2", "--file", tmp_path / "r2.csv", check=False)
    assert proc.returncode == 2 and "row 2" in proc.stderr and "worst_option" in proc.stderr
    frame.drop(columns="all_implausible").to_csv(tmp_path / "r2b.csv", index=False)
    proc = run_cli("import-annotations", ws, "--format", "study", "--round", "2", "--file", tmp_path / "r2b.csv", check=False)
    assert proc.returncode == 2 and "all_implausible" in proc.stderr


def test_agreement_matches_reference_formulas(base_ws, tmp_path):
    ws = copy_ws(base_ws, tmp_path / "ws")
    round1_frame().to_csv(tmp_path / "a.csv", index=False)
    flips = {1, 2, 4, 9, 12}
    round1_frame(flip=flips).to_csv(tmp_path / "b.csv", index=False)
    import_study(ws, tmp_path / "a.csv", 1, annotator="imported:a")
    import_study(ws, tmp_path / "b.csv", 1, annotator="imported:b")
    table = workspace_agreement(ws, rounds=(1,), n_boot=200)
    row = table[table.facet == "high_quality"].iloc[0]
    a = np.array([int(i % 3 == 0) for i in range(40)])
    b = np.array([1 - x if i in flips else x for i, x in enumerate(a)])
    assert row.n_items == 40 and row.agreement == pytest.approx(35 / 40)
    assert row.cohen_kappa == pytest.approx(cohen_kappa_score(a, b))
    assert row.gwet_ac1 == pytest.approx(gwet_ac1(a, b, 2))
    assert row.cohen_kappa_lo <= row.cohen_kappa <= row.cohen_kappa_hi
    assert row.krippendorff_alpha_lo <= row.krippendorff_alpha <= row.krippendorff_alpha_hi
    # Krippendorff's alpha for two coders, nominal: 1 - (n - 1) * D_o / D_e over the pooled values
    pooled = np.concatenate([a, b])
    n, p1 = len(pooled), pooled.mean()
    d_e = 2 * p1 * (1 - p1) * n / (n - 1)
    assert row.krippendorff_alpha == pytest.approx(1 - (np.mean(a != b)) / d_e)
    # human labels from a CSV in the same layout, compared without being stored
    proc = run_cli("agreement", ws, "--round", "1", "--human", tmp_path / "b.csv", "--boot", "50",
                   "--out", tmp_path / "agree.csv")
    out = pd.read_csv(tmp_path / "agree.csv")
    human = out[(out.annotator_a == "human") & (out.annotator_b == "imported:a") & (out.facet == "high_quality")]
    assert human.cohen_kappa.iloc[0] == pytest.approx(row.cohen_kappa) and "kappa=" in proc.stdout
    assert set(records(ws).annotator) == {"imported:a", "imported:b"}


def test_export_one_row_per_annotator_round_item(base_ws, tmp_path):
    ws = copy_ws(base_ws, tmp_path / "ws")
    round1_frame().to_csv(tmp_path / "a.csv", index=False)
    round2_frame(skip={0}).to_csv(tmp_path / "b.csv", index=False)
    import_study(ws, tmp_path / "a.csv", 1)
    import_study(ws, tmp_path / "b.csv", 2, missing="refused")
    for ext in ("jsonl", "parquet", "csv"):
        run_cli("export", ws, "annotations", "--out", tmp_path / f"out.{ext}")
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(rows) == 80
    assert {(r["annotator"], r["round"], r["item_id"]) for r in rows}.__len__() == 80
    first2 = next(r for r in rows if r["round"] == 2 and r["row_index"] == 0)
    assert first2["status"] == "refused" and first2["best"] is None
    parquet = pd.read_parquet(tmp_path / "out.parquet")
    assert {"status", "labels", "best", "equally_good", "all_implausible", "worst", "prompt_version",
            "model_snapshot", "request_key", "cost_usd"} <= set(parquet.columns)
    assert len(pd.read_csv(tmp_path / "out.csv")) == 80
    assert list(parquet.columns) == list(pd.read_csv(tmp_path / "out.csv").columns) == list(rows[0])


def test_an_empty_export_has_its_columns(base_ws, tmp_path):
    """A table with no rows still says what it would hold: the CSV its header, the parquet file
    its columns, each the same as a non-empty export's (a 1-byte file before)."""
    from annotate.export import COLUMNS as ANNOTATION_COLUMNS
    from generate.store import COLUMNS as GENERATION_COLUMNS
    from scoring.export import COLUMNS as SCORE_COLUMNS

    ws = copy_ws(base_ws, tmp_path / "ws")
    for kind, columns in (("scores", SCORE_COLUMNS), ("annotations", ANNOTATION_COLUMNS),
                          ("generations", GENERATION_COLUMNS)):
        for ext in ("csv", "parquet"):
            out = tmp_path / f"{kind}.{ext}"
            assert f"wrote 0 {kind} rows" in run_cli("export", ws, kind, "--out", out).stdout
            frame = pd.read_csv(out) if ext == "csv" else pd.read_parquet(out)
            assert list(frame.columns) == list(columns) and frame.empty


def test_import_refuses_an_option_named_both_best_and_worst(base_ws, tmp_path):
    """Round 2 asks for two different options: a row naming one option best and worst is a
    damaged file, refused in one line naming the file, row, item and field; nothing is stored
    (`curate agreement --human` reads files the same way)."""
    from conftest import one_line_error

    ws = copy_ws(base_ws, tmp_path / "ws")
    frame = round2_frame()
    frame.loc[6, "worst_option"] = frame.loc[6, "best_option"]  # C and C
    frame.to_csv(tmp_path / "r2.csv", index=False)
    proc = run_cli("import-annotations", ws, "--format", "study", "--round", "2", "--file", tmp_path / "r2.csv",
                   check=False)
    one_line_error(proc, "r2.csv, row 6, field 'worst_option'", "item hellaswag/validation/6",
                   "'C' is also its best_option")
    assert records(ws).empty


def test_agreement_with_nothing_to_compare_names_each_rounds_annotators(base_ws, tmp_path):
    """One annotator has nothing to be compared with: the error names the annotators with valid
    records in each round asked for (and how many items each), so the missing one is plain."""
    from conftest import one_line_error

    ws = copy_ws(base_ws, tmp_path / "ws")
    round1_frame().to_csv(tmp_path / "a.csv", index=False)
    import_study(ws, tmp_path / "a.csv", 1, annotator="imported:a")
    proc = run_cli("agreement", ws, "--round", "1", check=False)
    one_line_error(proc, "no pair of annotators", "round 1: imported:a (40 items)")
    proc = run_cli("agreement", ws, check=False)
    one_line_error(proc, "round 1: imported:a (40 items); round 2: none")
