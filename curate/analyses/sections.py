"""The report's text: its sections as render blocks, built from the metrics alone, so the
report shows nothing that metrics.json does not hold."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from curate.analyses import render
from curate.analyses.stats import level

#: Flagged items linked from the report itself (all of them are in items/index.html).
REPORT_LINKS = 500


#: What each normalization's number is, for the report's readers (scoring/normalize.py computes them).
NORMALIZATION_TEXT = {
    "sum": "the option's total log-probability given the context (lm-eval `acc`)",
    "token": "`sum` divided by the option's token count",
    "char": "`sum` divided by the option's character count (lm-eval `acc_norm`)",
    "byte": "`sum` divided by the option's UTF-8 byte count",
    "seq_mean": "the mean log-probability over every predicted token of context + \" \" + option, i.e. minus "
                "the language-model loss of the whole sequence (the reference study's score)",
    "study_sum": "the reference study's released total log-probability",
    "study_byte_mean": "the reference study's released per-byte log-probability",
}


def scores_text(prov: dict, normalization: str) -> list[str]:
    """Which scores were computed here and which imported, and what the primary normalization
    is (a paragraph: model labels and origins are workspace text, kept literal)."""
    runs = prov["score_runs"]
    imported = sorted({r["model"] for r in runs if str(r.get("origin", "")).startswith("imported")})
    computed = sorted({r["model"] for r in runs if not str(r.get("origin", "")).startswith("imported")})
    origins = sorted({r["origin"].split(":", 1)[1] for r in runs if str(r.get("origin", "")).startswith("imported:")})
    parts = [f"`{normalization}` is {NORMALIZATION_TEXT.get(normalization, 'a stored score column')}."]
    if imported:
        parts += [f" The scores of {len(imported)} model(s) were imported (", render.Lit(", ".join(origins)),
                  "), not computed by benchcurate: ", render.Lit(", ".join(imported)), "."]
    if computed:
        parts += [f" The scores of {len(computed)} model(s) were computed here: ", render.Lit(", ".join(computed)), "."]
    return parts


def _mdd_text(rows: list[dict]) -> pd.DataFrame:
    """The detectable-difference table: 'not detectable' where no difference is, 'n/a (one
    model)' for the paired figures where there is no pair of models to compare."""
    df = pd.DataFrame(rows)
    for col in ("mdd_independent", "mdd_paired", "median_discordant"):
        if col not in df:
            continue
        no_pair = df["model_pairs"] == 0 if "model_pairs" in df else pd.Series(False, index=df.index)
        df[col] = ["n/a (one model)" if col != "mdd_independent" and lone else
                   "not detectable" if v is None and col != "median_discordant" else v
                   for v, lone in zip(df[col], no_pair)]
    return df


def _p_text(df: pd.DataFrame) -> pd.DataFrame:
    """p-value columns as text, with an exact 0 (below double precision) shown as '< 1e-300'."""
    cols = [c for c in df.columns if c.startswith("p_")]
    return df.assign(**{c: [_p(v) for v in df[c]] for c in cols})


def _p(value) -> str:
    if value is None or pd.isna(value):  # no test was possible (e.g. no parsed answer at all)
        return "n/a"
    return "< 1e-300" if value == 0 else render.fmt(float(value))


def report_blocks(m: dict, out: Path) -> list:
    """The report as render blocks; images are read from ``out``."""
    s, prov = m["settings"], m["provenance"]
    blocks = [("h1", "benchcurate audit report"),
              ("p", f"Workspace `{prov['workspace']}`: {prov['benchmark']} ({prov['split']}), {prov['items']} items "
                    f"(`{prov['items_digest'][:23]}`). Score runs: {len(prov['score_runs'])}; annotation "
                    f"records: {sum(r['records'] for r in prov['annotations'])}. Generated {m['generated_at']} by benchcurate "
                    f"{m['toolkit_version']}. Every number below is in `metrics.json`."),
              ("p", f"Predictions are the argmax option. Unless a table says otherwise they use the "
                    f"`{s['normalization']}` normalization. Intervals are {level(s['alpha'])} Wilson score intervals; "
                    f"tests use alpha = {s['alpha']}.")]
    if "accuracy" not in m:  # a workspace with generations only
        blocks[-1] = ("p", f"The workspace holds no log-likelihood scores: answers by generation only. Intervals are "
                           f"{level(s['alpha'])} Wilson score intervals; tests use alpha = {s['alpha']}.")
        return blocks + generation_blocks(m, out)
    blocks += [("p", scores_text(prov, s["normalization"]))]
    runs = pd.DataFrame(prov["score_runs"])
    blocks += [("p", "Scores read: each model and mode from one source (`origin` scored here, or imported), "
                     "with the run that stored them."),
               ("table", runs[["model", "mode", "formulation", "origin", "dtype", "device", "engine", "items",
                               "run_id"]])]
    several = len(s["formulations"]) > 1

    def named(text: str, formulation: str) -> str:
        """A heading, with the formulation when the report has more than one."""
        return f"{text}, {formulation}" if several else text

    acc = pd.DataFrame(m["accuracy"]["rows"])
    blocks += [("h2", "1. Accuracy"), ("img", out / m["plots"]["accuracy"], "Accuracy per model and mode")]
    main = acc[acc["subset"] == "all"].drop(columns=["subset", "interval"])
    blocks += [("p", "All items each model was scored on, every available normalization."), ("table", main)]
    wide = acc[acc["normalization"] == s["normalization"]].pivot_table(
        index=["model", "mode", "formulation"], columns="subset", values="accuracy").reset_index()
    blocks += [("p", f"By source (`{s['normalization']}`)."), ("table", wide)]

    ag = pd.DataFrame(m["agreement"]["rows"])
    blocks += [("h2", "2. Agreement between prompt modes"),
               ("p", "Shares of the items both modes scored. `same_wrong`: both pick the same wrong option; "
                     "`different_wrong`: both wrong, different options. agreement = both_correct + same_wrong.")]
    cols = ["model", "n", "both_correct_share", "same_wrong_share", "only_a_correct_share",
            "only_b_correct_share", "different_wrong_share", "agreement", "kappa"]
    if not ag.empty:
        for (f, a, b), g in ag.groupby(["formulation", "mode_a", "mode_b"], sort=False):
            blocks += [("h3", named(f"{a} (a) vs {b} (b)", f)), ("table", g[cols])]
    agf = pd.DataFrame(m["agreement"]["formulations"])
    if not agf.empty:
        blocks.append(("p", "Between formulations: the same model and prompt mode, options scored as continuations "
                            "(cloze) and as letters after a lettered list (letters)."))
        for (mode, a, b), g in agf.groupby(["mode", "formulation_a", "formulation_b"], sort=False):
            blocks += [("h3", f"{a} (a) vs {b} (b), {mode} mode"), ("table", g[cols])]

    if "core" in m:
        c = m["core"]
        curve = pd.DataFrame(c["curve"]).assign(percent=lambda d: (100 * d["share"]).round(1))
        text = (f"Items that at least k of the {c['models']} models answer correctly in {c['mode']} mode "
                f"({c['n_items']} items). The ids and counts per item are in `{c['items_file']}`.")
        if c.get("n_incomplete"):
            text += (f" {c['n_incomplete']} items are left out: some model has no {c['mode']}-mode score for "
                     "them.")
        if "threshold" in c:
            text += f" At k >= {c['threshold']}: {c['n_at_threshold']} items."
        blocks += [("h2", f"3. {c['mode'].capitalize()}-prompt core"), ("p", text), ("table", curve),
                   ("img", out / m["plots"]["core"], "Core curve")]

    elif s["core_mode"] != "none":  # `--core-mode none` asks for no core section
        blocks += [("h2", f"3. {s['core_mode'].capitalize()}-prompt core"),
                   ("p", f"No model has {s['core_mode']}-mode scores in this analysis, so there is no core.")]

    blocks.append(("h2", "4. Length bias"))
    for i, (unit, L) in enumerate(m["length"].items()):
        suffix = "" if i == 0 else f"_{i}"
        blocks += [("h3", f"Lengths in {unit}"),
                   ("p", "Relative spread = (longest - shortest) / longest per item; counts of items above the "
                         "study's cuts, and gold-longest items in the (0.15, 0.3] band.")]
        for text, rows in L["spread"].items():
            blocks += [("p", f"Spread over {text} texts."), ("table", pd.DataFrame(rows))]
        blocks.append(("img", out / m["plots"][f"spread{suffix}"], f"Spread histogram ({unit})"))
        gl = pd.DataFrame(L["gold_longest_accuracy"])
        blocks += [("p", "Accuracy when the gold option is strictly the longest option (option texts) vs not; "
                         "one-sided Fisher exact test that longest-gold items are answered better."),
                   ("table", gl.drop(columns=["interval"]))]
        corr = pd.DataFrame(L["correlation"]["rows"])
        blocks += [("p", "Spearman correlation of each option score with the option's length, by source."),
                   ("table", corr.pivot_table(index=["model", "mode", "formulation", "normalization"],
                                              columns="subset", values="spearman").reset_index())]
        if f"value_vs_length{suffix}" in m["plots"]:  # absent when too few items fill a length bin
            blocks.append(("img", out / m["plots"][f"value_vs_length{suffix}"], f"Score vs length ({unit})"))

    a = m["annotations"]
    blocks.append(("h2", "5. Annotations"))
    if not a["present"]:
        blocks.append(("p", "The workspace holds no annotations."))
    else:
        rates = pd.DataFrame(a["rates"])
        table = rates.assign(pct=(100 * rates["rate"]).round(1)).pivot_table(
            index=["annotator", "measure"], columns="subset", values="pct", sort=False).reset_index()
        blocks += [("p", "Percent of the items each annotator answered (Table-1 layout)."), ("table", table)]
        if a.get("error_overlap_mean"):
            blocks += [("p", "Model errors on flagged vs other items (mean over the models scored in each mode; "
                             "per model in `metrics.json`)."), ("table", pd.DataFrame(a["error_overlap_mean"]))]
        if a.get("round2_accuracy"):
            r2 = pd.DataFrame(a["round2_accuracy"]).pivot_table(
                index=["annotator", "model", "mode", "formulation"], columns="measure", values="value").reset_index()
            blocks += [("p", "Accuracy, extended accuracy (gold or an option called equally good) and worst-option "
                             "accuracy on the items with a round-2 annotation."), ("table", r2)]
        pages = m.get("item_pages") or {}
        if pages.get("rows"):
            shown = pages["rows"][:REPORT_LINKS]
            blocks += [("h3", "Flagged items"),
                       ("p", f"{pages['flagged']} items carry a flag from some annotator; {pages['with_page']} have a "
                             "page with everything known about them (context per mode, options, model choices, every "
                             f"annotator's answers), readable without a server. `{pages['index']}` lists them all "
                             "with a search box" + (f"; the first {len(shown)} are linked here." if len(shown) <
                                                    len(pages["rows"]) else ".")),
                       ("links", [(r["item_id"], r["page"], "; ".join(r["flags"])) for r in shown])]

    cmp_ = m["comparisons"]
    blocks += [("h2", "6. Paired comparisons"),
               ("p", "Same items, paired tests. Holm and Bonferroni adjust within each family. The "
                     "intersection-union p-value tests the claim for every model at once (its largest p).")]
    for fam in cmp_["modes"]["families"] + cmp_["formulations"]["families"]:
        axis = "mode" if "mode_a" in fam else "formulation"
        where = named("", fam["formulation"]) if axis == "mode" else f", {fam['mode']} mode"
        blocks += [("h3", f"{fam[axis + '_a']} (a) vs {fam[axis + '_b']} (b){where}: {fam['claim']}? ({fam['test']})"),
                   ("table", _p_text(pd.DataFrame(fam["rows"])))]
        if "iut_every_model_p" in fam:
            blocks.append(("p", f"Intersection-union test, '{fam['claim']}' for all {fam['iut_models']} models: "
                                f"p = {render.fmt(fam['iut_every_model_p'])}."))
    for fam in cmp_["models"]["families"]:
        rows = pd.DataFrame(fam["rows"])
        blocks += [("h3", named(f"Model pairs in {fam['mode']} mode", fam["formulation"]) + f" ({fam['test']})"),
                   ("p", f"{len(rows)} pairs; {int((rows['p_holm'] < s['alpha']).sum())} differ after Holm, "
                         f"{int((rows['p_bonferroni'] < s['alpha']).sum())} after Bonferroni."),
                   ("table", _p_text(rows))]
    blocks += [("h3", "Minimum detectable difference"),
               ("p", "Smallest accuracy difference detectable with power 0.8 (two-sided) at each subset's size: "
                     "between independent samples of that size at the subset's mean accuracy, and paired on the "
                     "same items at the median share of items on which two models disagree in correctness "
                     "(Connor 1987: null variance under the null). 'not detectable': no difference up to the "
                     "largest possible one reaches that power at this size."),
               ("table", _mdd_text(cmp_["detectable_difference"]))]
    return blocks + position_blocks(m["position"]) + generation_blocks(m, out)


def generation_blocks(m: dict, out: Path) -> list:
    """Section 8: answers by generation (nothing when the workspace has none)."""
    g = m.get("generation") or {}
    if not g.get("present"):
        return []
    blocks = [("h2", "8. Generation"),
              ("p", "The model saw the context and the options numbered 1..K in an order shuffled per item and seed, "
                    "and answered with a number. A condition is model x template x decoding settings "
                    "(t = temperature, p = top-p, n = max new tokens) x mode. Replies are `strict` (exactly one "
                    "allowed number), `lenient` (the number or an option's text found in a longer reply) or "
                    f"`unparsed`; {g['unparsed']}.")]
    blocks += [("h3", "Parse status"), ("table", pd.DataFrame(g["parse"]))]
    seeds = pd.DataFrame(g["seed_accuracy"]["rows"])
    blocks += [("h3", "Accuracy per seed"), ("img", out / m["plots"]["generation_seeds"], "Generation accuracy per seed"),
               ("table", seeds)]
    blocks += [("h3", "Spread over seeds"),
               ("p", f"On the items answered under every seed: the per-seed accuracies summarized, a "
                     f"{level(m['settings']['alpha'])} bootstrap "
                     "interval of their mean resampling items and seeds, and the share of items whose answer "
                     "(an option, or unparsed) and whose correctness change with the seed."),
               ("table", pd.DataFrame(g["spread"]))]
    blocks += [("h3", "Position bias"),
               ("p", "Share of the parsed replies naming each displayed position, next to the share of items whose "
                     "gold option was shown there; the chi-square test asks whether the positions chosen are uniform."),
               ("img", out / m["plots"]["generation_positions"], "Position bias"),
               ("table", pd.DataFrame(g["position"])), ("table", _p_text(pd.DataFrame(g["position_tests"])))]
    agree = pd.DataFrame(g["loglikelihood_agreement"]["rows"])
    if not agree.empty:
        cols = ["model", "template", "settings", "mode", "seed", "n", "agreement", "kappa", "both_correct_share",
                "only_a_correct_share", "only_b_correct_share", "same_wrong_share", "different_wrong_share"]
        blocks += [("h3", "Generation vs log-likelihood"),
                   ("p", f"Parsed replies against the same model's log-likelihood prediction in the same mode "
                         f"(`{g['loglikelihood_agreement']['normalization']}`); a = generation, b = log-likelihood."),
                   ("table", agree[cols])]
    if g.get("all_implausible"):
        blocks += [("h3", "Items annotated all implausible"),
                   ("p", "Accuracy on the items the annotator called all implausible (the study's 'All Bad') and on "
                         "its other items, by generation (mean over seeds) and by log-likelihood."),
                   ("table", pd.DataFrame(g["all_implausible"]))]
    c = g["comparisons"]
    families = [("Templates", c["templates"]), ("Generation (a) vs log-likelihood (b)", c["generation_vs_loglikelihood"])]
    families += [(f"{f['mode_a']} (a) vs {f['mode_b']} (b)", f) for f in c["modes"]]
    for title, fam in families:
        if fam["rows"]:
            blocks += [("h3", f"Paired tests: {title}"), ("p", f"{fam['test']}; Holm and Bonferroni across the rows."),
                       ("table", _p_text(pd.DataFrame(fam["rows"])))]
    return blocks


def p_value_text(p: float, log10_p: float) -> str:
    """A p-value, and its order of magnitude when it is below double precision."""
    return f"< 1e-300 (log10 p = {log10_p:.1f})" if p == 0 else render.fmt(float(p))


def position_blocks(pos: dict) -> list:
    """Section 7: where the gold option sits, and accuracy over rotated option orders."""
    gold = pd.DataFrame(pos["gold"])
    blocks = [("h2", "7. Position audit"),
              ("p", "Where the gold option sits (A = first), per subset and option count, with a chi-square test "
                    f"against an even spread; skewed = p < {pos['alpha']}.")]
    skewed = gold[gold["skewed"]]
    if skewed.empty:
        blocks.append(("p", "No subset's gold positions differ from an even spread."))
    else:
        lines = [f"{r['subset']} ({r['n_options']} options, {r['n']} items): gold at {r['most_common']} in "
                 f"{100 * r['most_common_share']:.1f}% of items, p {'' if r['p'] == 0 else '= '}"
                 f"{p_value_text(r['p'], r['log10_p'])}"
                 for r in skewed.to_dict("records")]
        blocks.append(("p", "**Gold-position skew** in " + "; ".join(lines[:10])
                            + (f"; and {len(lines) - 10} more subsets" if len(lines) > 10 else "") + "."))
    table = gold.assign(p=[p_value_text(p, lp) for p, lp in zip(gold["p"], gold["log10_p"])])
    blocks.append(("table", table[["subset", "n_options", "n", "shares", "most_common", "most_common_share", "chi2",
                                   "p", "skewed"]]))
    rot = pd.DataFrame(pos["rotations"])
    if rot.empty:
        blocks.append(("p", "No rotated-order scores: `curate score ... --formulations letters+rotations` lists the "
                            "options in every cyclic order to measure accuracy independent of position."))
        return blocks
    rot = rot.assign(p_picked_uniform=[p_value_text(p, lp) if p == p else "" for p, lp in
                                       zip(rot["p_picked_uniform"], rot["picked_log10_p"])])
    blocks += [("p", "Accuracy with the options in every cyclic order (letters formulation), on the items scored in "
                     "every rotation: in the original order, averaged over rotations, and the share of items right "
                     "in every rotation and in none. Every letter holds the gold equally often over the rotations, so "
                     "picked letters far from an even spread show the model's own position bias."),
               ("table", rot.drop(columns=["picked_log10_p"]))]
    return blocks
