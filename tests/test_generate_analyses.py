"""The generation analyses as pure functions, on generation records shaped as
``generate.store.read_generations`` returns them, checked against independent computations
(plain loops, textbook formulas, statsmodels' exact McNemar)."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar

from curate.analyses import generation as G
from curate.analyses.stats import seed_bootstrap

SETTINGS = "t=0,p=1,n=8"


def records(seed=0, n_items=60, seeds=3, templates=("numbered", "question"), modes=("full", "zero"), unparsed=0.1,
            skill=0.6):
    """Random records: gold, shuffled order, a reply naming the gold with probability ``skill``,
    another position otherwise, unparsed with probability ``unparsed``."""
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 4, n_items)
    rows = []
    for template, mode, s, i in itertools.product(templates, modes, range(seeds), range(n_items)):
        order = [int(x) for x in rng.permutation(4)]
        gold_shown = order.index(int(gold[i])) + 1
        if rng.random() < unparsed:
            shown, status = None, "unparsed"
        else:
            shown = gold_shown if rng.random() < skill else int(rng.choice([p for p in range(1, 5) if p != gold_shown]))
            status = "strict" if rng.random() < 0.5 else "lenient"
        pred = order[shown - 1] if shown else None
        rows.append({"model": "m", "template": template, "settings": SETTINGS, "mode": mode, "seed": s,
                     "item_id": f"x/{i}", "row_index": i, "source": None, "n_options": 4, "order": order,
                     "gold": int(gold[i]), "gold_shown": gold_shown, "status": status,
                     "method": None if status != "lenient" else "number-in-text", "detail": None, "shown": shown,
                     "pred": pred, "attempts": 1, "run_id": "gen-1"})
    frame = pd.DataFrame(rows)
    frame["shown"] = frame["shown"].astype("Int64")
    frame["pred"] = frame["pred"].astype("Int64")
    frame["correct"] = (frame["pred"] == frame["gold"]).astype("boolean")
    return frame


def test_seed_accuracy_counts_unparsed_as_not_correct_and_reports_them():
    gens = records()
    table = G.seed_accuracy(gens).set_index(["template", "mode", "seed"])
    for (template, mode, seed), g in gens.groupby(["template", "mode", "seed"]):
        right = sum(1 for p, gd in zip(g["pred"], g["gold"]) if p is not pd.NA and p == gd)
        parsed = sum(1 for s in g["status"] if s != "unparsed")
        row = table.loc[(template, mode, seed)]
        assert row["n"] == len(g) and row["unparsed"] == len(g) - parsed and row["correct"] == right
        assert row["accuracy"] == pytest.approx(right / len(g))
        assert row["accuracy_parsed"] == pytest.approx(right / parsed)
        assert row["ci_low"] <= row["accuracy"] <= row["ci_high"]
    parse = G.parse_summary(gens).set_index(["template", "mode"])
    assert (parse["strict"] + parse["lenient"] + parse["unparsed"] == parse["n"]).all()
    assert parse["unparsed"].sum() == (gens["status"] == "unparsed").sum()


def test_seed_spread_matches_a_direct_computation():
    gens = records(seed=1)
    gens = gens[~((gens["seed"] == 2) & (gens["item_id"] == "x/0"))]  # one item lacks a seed: left out
    spread = G.seed_spread(gens, n_resamples=500).set_index(["template", "mode"])
    for (template, mode), g in gens.groupby(["template", "mode"]):
        complete = [i for i, h in g.groupby("item_id") if h["seed"].nunique() == 3]
        per_seed, answers = [], {}
        for s in range(3):
            h = g[(g["seed"] == s) & g["item_id"].isin(complete)]
            per_seed.append(np.mean([p is not pd.NA and p == gd for p, gd in zip(h["pred"], h["gold"])]))
        for i in complete:
            h = g[g["item_id"] == i]
            answers[i] = {("u" if p is pd.NA else int(p)) for p in h["pred"]}
        row = spread.loc[(template, mode)]
        assert row["n_items"] == len(complete) == 59 and row["seeds"] == 3
        assert row["mean"] == pytest.approx(np.mean(per_seed))
        assert row["sd"] == pytest.approx(np.std(per_seed, ddof=1))
        assert row["range"] == pytest.approx(max(per_seed) - min(per_seed))
        assert row["answer_changes"] == pytest.approx(np.mean([len(a) > 1 for a in answers.values()]))
        assert row["boot_ci_low"] < row["mean"] < row["boot_ci_high"]


def test_seed_bootstrap_widens_with_seed_to_seed_variation():
    rng = np.random.default_rng(3)
    item_level = (rng.random((200, 1)) < 0.6).astype(float)
    stable = np.repeat(item_level, 5, axis=1)            # every seed agrees
    noisy = (rng.random((200, 5)) < 0.6).astype(float)   # seeds independent
    one = seed_bootstrap(stable[:, :1], n_resamples=1000)
    assert seed_bootstrap(stable, n_resamples=1000)["ci_high"] - seed_bootstrap(stable, n_resamples=1000)["ci_low"] \
        == pytest.approx(one["ci_high"] - one["ci_low"], abs=0.02)
    wide = seed_bootstrap(noisy, n_resamples=1000)
    assert wide["ci_low"] < noisy.mean() < wide["ci_high"]
    with pytest.raises(ValueError):
        seed_bootstrap(np.zeros((0, 3)))


def test_position_bias_against_the_textbook_chi_square():
    gens = records(seed=2)
    biased = gens.copy()
    first = biased["status"] != "unparsed"
    biased.loc[first, "shown"] = 1  # a model that always names the first option
    positions, tests = G.position_bias(pd.concat([gens.assign(model="fair"), biased.assign(model="first")]))
    for model, frame in (("fair", gens), ("first", biased)):
        sub = frame[(frame["template"] == "numbered") & (frame["mode"] == "full")]
        parsed = sub[sub["status"] != "unparsed"]
        counts = np.array([(parsed["shown"] == p).sum() for p in range(1, 5)])
        expected = counts.sum() / 4
        chi2 = ((counts - expected) ** 2 / expected).sum()
        t = tests[(tests["model"] == model) & (tests["template"] == "numbered") & (tests["mode"] == "full")].iloc[0]
        assert t["chi2"] == pytest.approx(chi2) and t["p_uniform"] == pytest.approx(sps.chi2.sf(chi2, 3))
        p = positions[(positions["model"] == model) & (positions["template"] == "numbered") & (positions["mode"] == "full")]
        assert p["chosen"].tolist() == counts.tolist()
        assert p["gold_here"].tolist() == [int((sub["gold_shown"] == q).sum()) for q in range(1, 5)]
    assert tests.loc[tests["model"] == "first", "most_chosen_share"].eq(1.0).all()
    assert (tests.loc[tests["model"] == "first", "p_uniform"] < 1e-10).all()


def test_loglikelihood_agreement_and_all_implausible():
    gens = records(seed=4, templates=("numbered",), modes=("full",), seeds=2)
    rng = np.random.default_rng(5)
    items = gens.drop_duplicates("item_id")[["item_id", "gold"]]
    ll = items.assign(model="m", mode="full", pred=rng.integers(0, 4, len(items)))
    ll["correct"] = ll["pred"] == ll["gold"]
    table = G.loglikelihood_agreement(gens, ll)
    assert list(table["seed"]) == [0, 1]
    for s, row in table.set_index("seed").iterrows():
        g = gens[(gens["seed"] == s) & (gens["status"] != "unparsed")].merge(ll[["item_id", "pred"]], on="item_id")
        assert row["n"] == len(g)
        assert row["agreement"] == pytest.approx(np.mean(g["pred_x"].astype(int) == g["pred_y"]))
    flagged = set(items["item_id"][:20])
    flags = pd.DataFrame({"annotator": "a", "item_id": items["item_id"], "source": "(none)",
                          "measure": "all_implausible", "flagged": items["item_id"].isin(flagged)})
    bad = G.all_implausible_accuracy(gens, ll, flags).iloc[0]
    inside = gens[gens["item_id"].isin(flagged)]
    assert bad["n_all_implausible"] == 20 and bad["n_other"] == len(items) - 20
    assert bad["generation_all_implausible"] == pytest.approx(inside["correct"].fillna(False).astype(bool).mean())
    assert bad["loglikelihood_all_implausible"] == pytest.approx(ll[ll["item_id"].isin(flagged)]["correct"].mean())


def test_paired_tests_reduce_to_exact_mcnemar_with_one_seed_and_are_holm_corrected():
    gens = records(seed=6, seeds=1, n_items=150)
    gens.loc[gens["template"] == "question", "correct"] = gens.loc[gens["template"] == "question", "correct"].where(
        np.random.default_rng(0).random((gens["template"] == "question").sum()) < 0.7, False)
    out = G.generation_comparisons(gens, pd.DataFrame(), ["full", "zero"], n_resamples=500)
    rows = out["templates"]["rows"]
    assert {(r["mode"], r["template_a"], r["template_b"]) for r in rows} == {("full", "numbered", "question"),
                                                                             ("zero", "numbered", "question")}
    for r in rows:
        right = gens.assign(r=gens["correct"].fillna(False).astype(bool))
        a = right[(right["template"] == "numbered") & (right["mode"] == r["mode"])].set_index("item_id")["r"]
        b = right[(right["template"] == "question") & (right["mode"] == r["mode"])].set_index("item_id")["r"]
        table = pd.crosstab(a, b.reindex(a.index)).reindex(index=[True, False], columns=[True, False], fill_value=0)
        assert r["p_sign"] == pytest.approx(mcnemar(table.to_numpy(), exact=True).pvalue)
        assert r["boot_ci_low"] <= r["difference"] <= r["boot_ci_high"]
    ps = sorted(r["p_sign"] for r in rows)
    holm = [min(1, max(2 * ps[0], ps[1])), min(1, max(2 * ps[0], ps[1]))]
    assert sorted(r["p_holm"] for r in rows) == pytest.approx([min(1, 2 * ps[0]), holm[1]])
    modes = out["modes"][0]
    assert (modes["mode_a"], modes["mode_b"]) == ("full", "zero") and all(r["alternative"] == "greater"
                                                                          for r in modes["rows"])
    assert out["generation_vs_loglikelihood"]["rows"] == []


def test_a_model_with_no_parsed_reply_has_no_position_test_and_the_report_says_n_a():
    """Every reply unparsed (a tiny random model's): no chi-square is possible, and the report
    shows the missing p-value as 'n/a' instead of failing on it."""
    from curate.analyses.sections import _p_text
    _, tests = G.position_bias(records(unparsed=1.0))
    assert tests["p_uniform"].isna().all()
    shown = _p_text(pd.DataFrame({"p_uniform": [None, float("nan"), 0.0, 0.25]}))["p_uniform"].tolist()
    assert shown[:3] == ["n/a", "n/a", "< 1e-300"] and shown[3] not in ("n/a", "nan")
