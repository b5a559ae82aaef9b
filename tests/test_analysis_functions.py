"""The pure analyses on frames small enough to check by hand."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from curate.analyses import accuracy, agreement, core, length
from curate.core.errors import CurateError
from scoring import normalize


def test_agreement_five_parts_by_hand():
    gold = [0, 0, 0, 0, 0, 1]
    a = [0, 0, 1, 2, 1, 1]
    b = [0, 1, 1, 3, 0, 2]
    # items: both right | only a | same wrong (1) | different wrong | only b | only a
    r = agreement.agreement(a, b, gold, 4)
    assert (r["both_correct"], r["same_wrong"], r["only_a_correct"], r["only_b_correct"], r["different_wrong"]) \
        == (1, 1, 2, 1, 1)
    assert r["n"] == 6 and r["agreement"] == pytest.approx(2 / 6) and r["only_a_correct_share"] == pytest.approx(2 / 6)
    # kappa over the prediction table: po = 2/6; pe = sum_k pa_k * pb_k.
    pa, pb = np.bincount(a, minlength=4) / 6, np.bincount(b, minlength=4) / 6
    pe = float(pa @ pb)
    assert r["kappa"] == pytest.approx((2 / 6 - pe) / (1 - pe))


def preds_frame(rows):
    """rows: (model, mode, item, pred, gold)."""
    f = pd.DataFrame(rows, columns=["model", "mode", "item_id", "pred", "gold"])
    f["row_index"] = f["item_id"].str[1:].astype(int)
    f["source"] = np.where(f["row_index"] % 2 == 0, "even", "odd")
    f["normalization"] = "seq_mean"
    f["correct"] = f["pred"] == f["gold"]
    return f


def test_agreement_table_pairs_modes_on_shared_items():
    f = preds_frame([("m", "full", "i0", 0, 0), ("m", "full", "i1", 1, 0), ("m", "full", "i2", 2, 2),
                     ("m", "zero", "i0", 0, 0), ("m", "zero", "i1", 1, 0),  # i2 not scored in zero
                     ("m", "placeholder", "i0", 3, 0), ("m", "placeholder", "i1", 0, 0), ("m", "placeholder", "i2", 2, 2)])
    t = agreement.agreement_table(f, ["full", "zero", "placeholder"], 4)
    assert list(zip(t["mode_a"], t["mode_b"])) == [("full", "zero"), ("full", "placeholder"), ("zero", "placeholder")]
    fz = t.iloc[0]
    assert (fz["n"], fz["both_correct"], fz["same_wrong"]) == (2, 1, 1)
    fp = t.iloc[1]
    assert (fp["n"], fp["both_correct"], fp["only_a_correct"], fp["only_b_correct"]) == (3, 1, 1, 1)


def test_core_counts_curve_and_ids():
    f = preds_frame([("a", "zero", "i0", 0, 0), ("b", "zero", "i0", 0, 0), ("c", "zero", "i0", 0, 0),
                     ("a", "zero", "i1", 1, 1), ("b", "zero", "i1", 0, 1), ("c", "zero", "i1", 1, 1),
                     ("a", "zero", "i2", 0, 2), ("b", "zero", "i2", 0, 2), ("c", "zero", "i2", 0, 2),
                     ("a", "full", "i3", 3, 3)])
    counts = core.correct_counts(f, "zero")
    assert counts["n_correct"].tolist() == [3, 2, 0]
    assert counts["models_correct"].tolist() == ['["a", "b", "c"]', '["a", "c"]', "[]"]
    curve = core.core_curve(counts, 3)
    assert curve["items"].tolist() == [2, 2, 1]
    assert curve["share"].tolist() == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    assert core.core_ids(counts, 3) == ["i0"] and core.core_ids(counts, 1) == ["i0", "i1"]


def make_items():
    return [
        {"item_id": "x/0", "row_index": 0, "source": "s", "gold": 0, "options": ["aaaa", "aa", "a", "aaa"],
         "prompts": {"full": "ctx ctx", "zero": ""}},
        {"item_id": "x/1", "row_index": 1, "source": "t", "gold": 1, "options": ["bb", "bb", "b", "b"],
         "prompts": {"full": "c", "zero": ""}},
        {"item_id": "x/2", "row_index": 2, "source": "t", "gold": 2, "options": ["é", "e", "ee", "e"],
         "prompts": {"full": "c", "zero": ""}},
    ]


def test_lengths_spread_and_gold_longest_by_hand():
    items = make_items()
    gold = pd.Series({it["item_id"]: it["gold"] for it in items})
    spread = length.item_spread(length.option_lengths(items, "chars"), gold).set_index("item_id")
    assert spread["spread"].tolist() == pytest.approx([0.75, 0.5, 0.5])
    assert spread["gold_longest"].tolist() == [True, False, True]  # a tie for longest is not "longest"
    # bytes: "é" is two bytes in UTF-8, so item 2's options are 2, 1, 2, 1 bytes.
    by_bytes = length.item_spread(length.option_lengths(items, "bytes"), gold).set_index("item_id")
    assert by_bytes.loc["x/2", "gold_longest"] == False  # noqa: E712 (numpy bool)
    # context + " " + option: item 0 texts are 12, 10, 9, 11 characters.
    ctx = length.option_lengths(items, "chars", "context+option")
    assert ctx[ctx["item_id"] == "x/0"]["length"].tolist() == [12, 10, 9, 11]
    summary = length.spread_summary(length.item_spread(ctx, gold))
    assert summary[0]["subset"] == "all" and summary[0]["n"] == 3
    assert [s["subset"] for s in summary[1:]] == ["source=s", "source=t"]


def test_token_lengths_use_the_named_tokenizer():
    items = make_items()
    from scoring.models import tokenizer

    tok = tokenizer("smollm2-135m")
    got = length.option_lengths(items, "tokens:smollm2-135m")["length"].tolist()
    want = [len(tok(o, add_special_tokens=False)["input_ids"]) for it in items for o in it["options"]]
    assert got == want


def test_report_and_filter_take_a_tokenizer_as_model_takes_a_model(tmp_path):
    """One loader for the report's and the filter's token counts: a GGUF file (as `--model`
    takes it) counts in the report as the built-in does, and a name neither knows is refused by
    both with the same line."""
    from curate.filter.inputs import Inputs
    from scoring.models import builtin_gguf

    items = make_items()
    want = length.option_lengths(items, "tokens:smollm2-135m")["length"].tolist()
    assert length.option_lengths(items, f"tokens:{builtin_gguf('smollm2-135m')}")["length"].tolist() == want
    with pytest.raises(CurateError) as report:
        length.count(["a"], "tokens:no-such-tokenizer")
    inputs = Inputs.__new__(Inputs)  # only its tokenizer part, without a workspace
    inputs._tokenizers, inputs.used = {}, {"tokenizers": {}}
    with pytest.raises(CurateError) as rules:
        inputs._tokenizer("no-such-tokenizer")
    assert str(report.value) == str(rules.value)


def test_bad_length_settings_are_refused():
    with pytest.raises(CurateError, match="unknown length unit"):
        length.parse_unit("words")
    with pytest.raises(CurateError, match="not a built-in model"):
        length.count(["a"], "tokens:no-such-tokenizer")
    with pytest.raises(CurateError, match="unknown length text"):
        length.option_lengths(make_items(), "chars", "prompt")


def test_longest_accuracy_groups_and_test():
    spread = pd.DataFrame({"item_id": ["i0", "i1", "i2", "i3", "i4", "i5"],
                           "gold_longest": [True, True, True, False, False, False]})
    f = preds_frame([("m", "full", "i0", 0, 0), ("m", "full", "i1", 0, 0), ("m", "full", "i2", 0, 0),
                     ("m", "full", "i3", 1, 0), ("m", "full", "i4", 1, 0), ("m", "full", "i5", 1, 0)])
    row = length.longest_accuracy(f, spread).iloc[0]
    assert (row["n_longest"], row["acc_longest"], row["n_other"], row["acc_other"]) == (3, 1.0, 3, 0.0)
    assert row["p_fisher_greater"] == pytest.approx(0.05)


def scores_frame():
    """Two models x one mode x two items x 4 options; model b has no logprob_sum."""
    rows = []
    for model, sums in (("a", [[-1, -2, -3, -4], [-4, -1, -2, -3]]), ("b", [None, None])):
        for i, opts in enumerate(sums):
            for j in range(4):
                rows.append({"model": model, "mode": "full", "item_id": f"i{i}", "row_index": i, "source": "s",
                             "option_index": j, "logprob_sum": None if opts is None else float(opts[j]),
                             "n_tokens": 2, "n_chars": 4 + j, "n_bytes": 4 + j, "seq_mean": -1.0 - j / 10 - i,
                             "study_sum": None, "study_byte_mean": None})
    return pd.DataFrame(rows)


def test_primary_normalization_and_predictions():
    s = scores_frame()
    assert normalize.primary_normalization(s) == "seq_mean"
    assert normalize.primary_normalization(s[s["model"] == "a"]) == "seq_mean"
    with pytest.raises(CurateError, match="'char' is missing for b/full"):
        normalize.primary_normalization(s, "char")
    with pytest.raises(CurateError, match="unknown normalization"):
        normalize.primary_normalization(s, "median")
    with pytest.raises(CurateError, match="no scores"):
        normalize.primary_normalization(s.iloc[0:0])
    gold = pd.Series({"i0": 0, "i1": 1})
    preds = accuracy.all_predictions(s, gold)
    assert sorted(set(zip(preds["model"], preds["normalization"]))) == [
        ("a", "byte"), ("a", "char"), ("a", "seq_mean"), ("a", "sum"), ("a", "token"), ("b", "seq_mean")]
    table = accuracy.accuracy_table(preds).set_index(["model", "normalization", "subset"])
    assert table.loc[("a", "sum", "all"), "accuracy"] == 1.0
    assert table.loc[("b", "seq_mean", "all"), "correct"] == 1  # seq_mean picks option 0 both times
    worst = accuracy.worst_predictions(s, "sum")
    assert worst[worst["model"] == "a"]["worst_pred"].tolist() == [3, 0]


def test_mode_and_model_comparison_families():
    from curate.analyses import comparisons

    rows = []
    for model, full, zero in (("a", [1, 1, 1, 0], [0, 0, 1, 0]), ("b", [1, 0, 1, 1], [1, 0, 1, 1])):
        for mode, right in (("full", full), ("zero", zero)):
            rows += [(model, mode, f"i{i}", 0 if ok else 1, 0) for i, ok in enumerate(right)]
    f = preds_frame(rows)
    fam = comparisons.mode_comparisons(f, ["full", "zero"], n_resamples=200)["families"]
    assert len(fam) == 1 and fam[0]["alternative"] == "greater"
    a, b = fam[0]["rows"]
    # a: 2 items right only with the context, none the other way: P(X >= 2 | n=2) = 1/4.
    assert (a["only_a"], a["only_b"], a["p_mcnemar"], a["difference"]) == (2, 0, pytest.approx(0.25), 0.5)
    assert b["p_mcnemar"] == 1.0
    assert (a["p_holm"], a["p_bonferroni"]) == (pytest.approx(0.5), pytest.approx(0.5))
    assert fam[0]["iut_every_model_p"] == 1.0  # b shows no gain, so "better for every model" fails
    models = comparisons.model_comparisons(f, ["full", "zero"])["families"]
    assert [m["mode"] for m in models] == ["full", "zero"] and len(models[0]["rows"]) == 1
    assert models[1]["rows"][0]["only_b"] == 2  # zero mode: b right on 2 items a misses
    mdd = comparisons.detectable_differences(f, {"all": ["i0", "i1", "i2", "i3"], "none": []}, "full")
    assert [r["subset"] for r in mdd] == ["all"] and mdd[0]["n"] == 4
    assert mdd[0]["baseline_accuracy"] == pytest.approx(6 / 8) and mdd[0]["median_discordant"] == pytest.approx(0.5)
