"""Answers by generation (curate generate): parsing, accuracy per seed, spread over seeds,
position bias, agreement with log-likelihood, and paired tests."""
from __future__ import annotations

import pandas as pd

from annotate.flags import item_flags
from curate.analyses import generation, plots, stats
from curate.analyses.sections._common import p_text, records
from curate.items.canonical import MODES

ORDER = 80
SCORES = False  # also the whole report of a workspace with generations but no scores
ABOUT = {"generation": "present only with generations (curate generate); a condition is model x template x settings x "
                       "mode: parse (replies by status strict / lenient / unparsed), seed_accuracy (per seed, Wilson "
                       "interval, unparsed counted as not correct, accuracy_parsed without them), spread (over seeds: "
                       "mean, sd, min, max, range, bootstrap interval over items and seeds, share of items whose answer "
                       "/ correctness changes with the seed), position (share of replies naming each displayed position "
                       "vs the gold's), position_tests (chi-square against a uniform choice), loglikelihood_agreement "
                       "(same model and mode, per seed, the primary formulation), all_implausible (accuracy on items "
                       "annotated all implausible vs the others, generation and log-likelihood), comparisons "
                       "(templates, generation vs log-likelihood, modes: exact sign test on seed-averaged per-item "
                       "accuracy, bootstrap interval over items and seeds, Holm and Bonferroni per family), runs"}
FILES = (r"generation_seeds\.png", r"generation_positions\.png")


def compute(ctx) -> dict:
    """The generation metrics (``{"present": False}`` without generations) and their plots,
    next to the log-likelihood predictions of the primary normalization and formulation (none
    on a workspace without scores)."""
    gens, alpha = ctx.gens, ctx.alpha
    if gens.empty:
        return {"generation": {"present": False}}
    preds = ctx.primary_preds
    modes = [m for m in MODES if m in set(gens["mode"])]
    norm = preds["normalization"].iloc[0] if len(preds) and "normalization" in preds else None
    positions, position_tests = generation.position_bias(gens)
    seed_acc = generation.seed_accuracy(gens, alpha)
    used = ctx.gen_runs[ctx.gen_runs["run_id"].isin(set(gens["run_id"]))]
    result = {
        "present": True, "unparsed": generation.UNPARSED_POLICY,
        "runs": records(used[["run_id", "model", "backend", "template", "settings", "created_at"]]),
        "parse": records(generation.parse_summary(gens)),
        "seed_accuracy": {"interval": "wilson", "confidence": 1 - alpha, "rows": records(seed_acc)},
        "spread": records(generation.seed_spread(gens, n_resamples=ctx.n_resamples, seed=ctx.seed,
                                                 confidence=1 - alpha)),
        "position": records(positions), "position_tests": records(position_tests),
        "loglikelihood_agreement": {"normalization": norm,
                                    "rows": records(generation.loglikelihood_agreement(gens, preds))},
        "comparisons": generation.generation_comparisons(gens, preds, modes, n_resamples=ctx.n_resamples,
                                                         seed=ctx.seed, alpha=alpha),
    }
    if not ctx.round2.empty:
        flags = item_flags(ctx.round1.iloc[0:0], ctx.round2, ctx.gold)
        result["all_implausible"] = records(generation.all_implausible_accuracy(gens, preds, flags))
    ctx.plots["generation_seeds"] = plots.seed_accuracy(seed_acc, ctx.out / "generation_seeds.png",
                                                        stats.level(alpha)).name
    ctx.plots["generation_positions"] = plots.position_bias(positions, ctx.out / "generation_positions.png").name
    return {"generation": result}


def render(m: dict, number: int, out) -> list:
    """Nothing when the workspace has no generations."""
    g = m.get("generation") or {}
    if not g.get("present"):
        return []
    blocks = [("h2", f"{number}. Generation"),
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
                     f"{stats.level(m['settings']['alpha'])} bootstrap "
                     "interval of their mean resampling items and seeds, and the share of items whose answer "
                     "(an option, or unparsed) and whose correctness change with the seed."),
               ("table", pd.DataFrame(g["spread"]))]
    blocks += [("h3", "Position bias"),
               ("p", "Share of the parsed replies naming each displayed position, next to the share of items whose "
                     "gold option was shown there; the chi-square test asks whether the positions chosen are uniform."),
               ("img", out / m["plots"]["generation_positions"], "Position bias"),
               ("table", pd.DataFrame(g["position"])), ("table", p_text(pd.DataFrame(g["position_tests"])))]
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
                       ("table", p_text(pd.DataFrame(fam["rows"])))]
    return blocks
