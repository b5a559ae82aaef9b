"""What the annotators said: label rates, model errors on flagged items, round-2 accuracy, and
a page for every flagged item."""
from __future__ import annotations

import pandas as pd

from annotate.flags import item_flags
from curate.analyses import accuracy, annotations
from curate.analyses.sections._common import records, review_data
from curate.analyses.sections._findings import Flag

ORDER = 50
ABOUT = {
    "annotations": "present only with annotations: label rates by annotator x measure x subset (round 1 labels, "
                   "round 2 wrong_gold / multiple_correct / all_implausible / best_is_worst, refusals), error overlap "
                   "with the models (per model, and error_overlap_mean: its mean over the models of each mode, with "
                   "their count), and plain / extended / worst-option accuracy on round-2 items",
    "item_pages": "items any annotator flagged (problem labels, round-2 flags, refusals): flagged (count), "
                  "with_page, index (items/index.html, searchable) and rows (item_id, row_index, source, flags, "
                  "page: items/<row_index>.html with the review app's view of the item, readable without a server)",
}
FOLDERS = ("items",)
#: Flagged items linked from the report itself (all of them are in items/index.html).
REPORT_LINKS = 500


def compute(ctx) -> dict:
    return {"annotations": _annotations(ctx), "item_pages": _item_pages(ctx)}


def _annotations(ctx) -> dict:
    round1, round2 = ctx.round1, ctx.round2
    if round1.empty and round2.empty:
        return {"present": False}
    flags = item_flags(round1, round2, ctx.gold)
    result = {"present": True, "normalization": ctx.normalization,
              "rates": records(annotations.label_rates(flags)),
              "error_overlap": records(overlap := annotations.error_overlap(flags, ctx.preds)),
              "error_overlap_mean": records(annotations.overlap_mean(overlap))}
    if not round2.empty:
        worst = accuracy.worst_by_model(ctx.scores, ctx.normalizations)
        result["round2_accuracy"] = records(accuracy.round2_accuracy(ctx.preds, worst, round2, ctx.alpha))
    return result


def _item_pages(ctx) -> dict:
    """A static page per flagged item (curate.review.browser), listed in the report."""
    from curate.review.browser import FOLDER, flag_reasons, write_item_pages

    if ctx.round1.empty and ctx.round2.empty:
        return {"flagged": 0, "with_page": 0, "index": None, "rows": []}
    reasons = flag_reasons(ctx.round1, ctx.round2, ctx.gold)
    data = review_data(ctx, ctx.scores)
    rows = write_item_pages(ctx.out, data, pd.concat([ctx.round1, ctx.round2]), reasons)
    return {"flagged": len(rows), "with_page": sum(r["page"] is not None for r in rows),
            "index": f"{FOLDER}/index.html" if rows else None, "rows": rows}


def render(m: dict, number: int, out) -> list:
    a = m["annotations"]
    blocks = [("h2", f"{number}. Annotations")]
    if not a["present"]:
        return blocks + [("p", "The workspace holds no annotations.")]
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
    return blocks


def findings(m: dict) -> list:
    """How many items some annotator flagged, linked to their list."""
    pages = m.get("item_pages") or {}
    if not pages.get("flagged"):
        return []
    return [Flag("annotators", pages["flagged"], m["provenance"]["items"], "a problem label, a round-2 flag or a "
                 "refusal", href=pages["index"])]
