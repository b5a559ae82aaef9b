"""Length bias: option length spreads, accuracy when the gold option is the longest, and how
each score correlates with length, in every length unit asked for."""
from __future__ import annotations

import pandas as pd

from curate.analyses import length, plots
from curate.analyses.sections._common import records
from scoring import normalize

ORDER = 40
ABOUT = {"length": "per length unit: spread summaries (option texts and context+option texts), accuracy when "
                   "the gold option is strictly the longest (option texts) vs not with Wilson intervals and a "
                   "one-sided Fisher test, Spearman correlation of every normalization with option length by source"}
FILES = (r"spread(_\d+)?\.png", r"value_vs_length(_\d+)?\.png")


def compute(ctx) -> dict:
    result = {}
    for i, unit in enumerate(ctx.length_units):
        result[unit], files = _length(ctx, unit, suffix="" if i == 0 else f"_{i}")
        ctx.plots.update(files)
    return {"length": result}


def _length(ctx, unit: str, suffix: str) -> tuple[dict, dict]:
    """Spread, gold-is-longest accuracy and value/length correlation in one unit."""
    items, gold, scores, out = ctx.items, ctx.gold, ctx.scores, ctx.out
    opt = length.option_lengths(items, unit, "option")
    ctx_lengths = length.option_lengths(items, unit, "context+option", mode="full")
    spread_opt, spread_ctx = length.item_spread(opt, gold), length.item_spread(ctx_lengths, gold)
    # The study's rule: spread over the scored texts, "gold is longest" over the options alone.
    spread_ctx["gold_longest"] = spread_ctx["item_id"].map(spread_opt.set_index("item_id")["gold_longest"])
    groups = normalize.groups_available(scores)
    result = {
        "spread": {"option": length.spread_summary(spread_opt),
                   "context+option (full-mode context)": length.spread_summary(spread_ctx)},
        "gold_longest_accuracy": records(length.longest_accuracy(ctx.preds_all, spread_opt)),
        "correlation": {"text": "option", "method": "spearman",
                        "rows": records(length.length_correlation(scores, opt, groups))},
    }
    files = {f"spread{suffix}": plots.spread_histogram(spread_ctx, unit, "context+option",
                                                       out / f"spread{suffix}.png").name}
    # Value vs length for the (model, mode, formulation) with the most normalizations (full mode
    # and cloze first).
    model, mode, formulation = max(groups, key=lambda k: (len(groups[k]), k[1] == "full", k[2] == "cloze", k[0]))
    g = scores[(scores["model"] == model) & (scores["mode"] == mode) & (scores["formulation"] == formulation)]
    binned = length.binned_values(g, opt, groups[(model, mode, formulation)])
    if binned.empty:  # too few items for any length bin: no plot rather than an empty one
        result["value_vs_length_plot"] = None
        return result, files
    files[f"value_vs_length{suffix}"] = plots.value_vs_length(
        binned, f"{model}, {mode} mode, {formulation}: option score vs length by source", unit,
        out / f"value_vs_length{suffix}.png").name
    result["value_vs_length_plot"] = {"model": model, "mode": mode, "formulation": formulation, "unit": unit}
    return result, files


def render(m: dict, number: int, out) -> list:
    blocks = [("h2", f"{number}. Length bias")]
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
    return blocks
