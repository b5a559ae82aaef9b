"""Items most likely broken (issues 28, 45): the default ranking (``suspect_score``: the combination
the panel calls for, every verdict the workspace holds pooled in) with its evidence and how far it
was measured to be trustworthy, each signal's count, and discrimination vs difficulty; the top
items get a page each and lead the report's first screen. Models that only answer (stored
answers, issue 40) are pooled with the scored ones; on a workspace without scores they make the
ranking alone."""
from __future__ import annotations

import pandas as pd

from curate.analyses import plots
from curate.validity.item_stats import irt_note
from curate.validity.item_table import choose, item_table, normalization_for, with_verdicts
from curate.validity.responses import answer_modes
from curate.analyses.render import Lit
from curate.analyses.sections._common import review_data
from curate.analyses.sections._findings import Flag, Items, Sentence, percent
from curate.core.errors import CurateError
from curate.core.exports import write_records
from curate.filter.kinds import label_error, misfit, no_right_answer, several_correct
from curate.validity.suspects import BASES, CUTS, choose_basis

ORDER = 15
SCORES = False  # also a workspace with stored answers and no scores: the answers make the ranking alone
ABOUT = {"suspects": "items most likely broken, from how the models answer them (present: false with a reason when "
                     "they cannot be computed): mode, formulation, shot count (fewshot: item validity's choice, "
                     "curate.validity.item_table.choose; other_fewshots: the other shot counts stored), "
                     "normalization and models read; per signal the "
                     "cut and how many items it flags (the filter kinds' defaults); top: the highest label-error "
                     "scores with the suspected option, the other scores and the evidence (models preferring the "
                     "suspected option, each with its source, probabilities or answers, and its probabilities of it "
                     "and of the gold; the answer-only models' answers), and the item's page; answer_models: the "
                     "models read from their answers alone (no probabilities) and where the answers come from; scored: "
                     "false when no model read has scores (a workspace with answers and no scores); "
                     "unparsed_answers: their replies that could not be read; "
                     "stats_file lists every item's statistics and scores"}
FILES = (r"item_stats\.csv", r"discrimination_vs_difficulty\.png")
FOLDERS = ("suspects",)
TOP = 20          # items listed in the section, each with a page
FIRST_SCREEN = 5  # of them, on the report's first screen
#: Each signal, named for what it measures: its score column, the cut the filter kind uses by
#: default, and what it means. A model's preference against the key is evidence to review, not
#: a wrong key: HellaSwag's gold is the real next caption, and models often prefer a generic
#: distractor (a blind review of its 40 highest label-error scores found 1 wrong key, 3 items
#: with several good answers and 36 sound ones; docs/item-validity.md).
SIGNALS = {
    "models prefer another option": ("label_error_score", label_error.DEFAULT_ABOVE,
                                     "pooled odds for an option other than the key above 9:1"),
    "two options preferred": ("several_correct_score", several_correct.DEFAULT_ABOVE,
                              "the stronger models split between two"),
    "no option preferred": ("no_right_answer_score", no_right_answer.DEFAULT_ABOVE,
                            "the stronger models favour none"),
}
#: Where the label-error score's precision was measured (docs/item-validity.md): quoted with it.
MEASURED = "0.53-0.77 at k = the number planted, in 1-5% of HellaSwag's items with the study's ten models"
#: How far each combination of ``suspect_score`` was measured to be trustworthy on experts' labels
#: (benchmarks/real_errors.py on MMLU-Redux's dev split; tests/test_real_errors.py recomputes the
#: numbers): quoted in the section by the combination the workspace's panel got.
TRUST = {
    "votes": ("On experts' labels (MMLU-Redux, 19 MMLU subjects, 1900 items, 186 labelled errors) with 20 frontier "
              "models' answers, this combination put 28 labelled errors in its top 50 (precision 0.56, 95% interval "
              "0.42-0.68) and 43 in its top 100 (0.43, 0.33-0.54); AUROC 0.75. The evidence sees wrong keys well "
              "(AUROC 0.91 on them), several or no right answers partly (0.74, 0.79), and unclear wording hardly "
              "(0.69 for questions, 0.57 for options): a clean answer pattern does not clear an item."),
    "log-odds": ("No experts' labels with probabilities were at hand to measure it; on planted gold moves its "
                 f"precision was {MEASURED}. On MMLU-Redux's experts' labels with answers only (20 models alike in "
                 "ability) it fell behind counting votes (AUROC 0.69 against 0.75), which is why alike panels get "
                 "votes. Unclear wording is mostly invisible to answers either way."),
}
#: What pooling verdicts was measured to add (benchmarks/real_errors.py, dev split).
TRUST_VERDICTS = ("Seven 2024 LLM judges' verdicts on 398 of those items, each weighted by its agreement with the "
                  "models, moved AUROC on the judged items from 0.760 to 0.770.")
#: Fewer models than this are weak evidence for an item (the demo's one 135M model ranks misspelled
#: golds above its planted wrong keys): the first screen says so.
FEW_MODELS = 3


def compute(ctx) -> dict:
    scores = ctx.scores if ctx.fewshot_scores is None else ctx.fewshot_scores  # every shot count
    answers = ctx.answers
    if scores is not None:
        mode = "full" if (scores["mode"] == "full").any() else ctx.mode_order[0]
    elif answers is None:  # neither scores nor answers: nothing to rank
        return {}
    else:  # answers alone: those to the full item where there are any (imported answers are)
        modes = set(answer_modes(answers))
        mode = "full" if "full" in modes else sorted(modes)[0]
        scores = pd.DataFrame(columns=["model", "mode", "formulation", "fewshot", "item_id", "option_index"])
    from annotate.verdict_store import all_verdicts

    choice = choose(scores, ctx.ws.meta("formulation", "cloze"), mode=mode)
    verdicts = all_verdicts(ctx.ws, ctx.items)
    try:
        chosen = scores[(scores["mode"] == mode) & (scores["formulation"] == choice.formulation)
                        & (scores["fewshot"] == choice.fewshot)]
        responses, table = item_table(chosen, ctx.items, mode=mode, formulation=choice.formulation,
                                      fewshot=choice.fewshot, normalization=normalization_for(chosen, ctx.normalization),
                                      answers=answers)
        table = with_verdicts(table, verdicts)
    except CurateError as e:
        return {"suspects": {"present": False, "reason": str(e)}}
    found = table.sort_values("suspect_score", ascending=False, kind="stable")
    write_records(table.drop(columns=["evidence"]).to_dict("records"), ctx.out / "item_stats.csv")
    flagged = table["label_error_score"] > label_error.DEFAULT_ABOVE
    plot = plots.discrimination_vs_difficulty(table, flagged, ctx.out / "discrimination_vs_difficulty.png")
    ctx.plots["suspects"] = plot.name
    counts = [{"signal": name, "score": col, "cut": cut, "items": int((table[col] > cut).sum()), "meaning": meaning}
              for name, (col, cut, meaning) in SIGNALS.items()]
    below = misfit.DEFAULT_DISCRIMINATION_BELOW
    counts += [{"signal": "negative discrimination", "score": "discrimination", "cut": below,
                "items": int((table["discrimination"] < below).sum()),
                "meaning": "weaker models right more often than stronger ones"},
               {"signal": "easy", "score": "easy", "cut": None, "items": int(table["easy"].sum()),
                "meaning": "every model right, confidently"}]
    basis, why = choose_basis(responses)
    pooled = len(table.attrs["verdict_sources"]) > 0
    if basis != "log-odds" or pooled:  # else it is the label-error count above, said once
        counts.append({"signal": "likely broken", "score": "suspect_score", "cut": CUTS[basis],
                       "items": int(table["suspect"].sum()),
                       "meaning": "the default ranking's suspects (" + ("votes against the key" if basis == "votes"
                                                                        else "pooled odds above 9 to 1")
                                  + (", verdicts pooled in" if pooled else "") + ")"})
    top = found.head(TOP)
    return {"suspects": {"present": True, "scored": not all(responses.answer_only), "mode": mode,
                         "formulation": choice.formulation, "fewshot": choice.fewshot,
                         "other_fewshots": choice.other_fewshots, "normalization": responses.normalization, "models": list(responses.models),
                         "answer_models": _answer_models(responses),
                         "unparsed_answers": int(table["unparsed_answers"].sum()),
                         "n_items": len(table), "left_out": len(responses.left_out), "signals": counts,
                         "set_apart": [{"model": m, "why": why} for m, why in responses.set_apart],
                         "irt_note": irt_note(len(responses.models)),
                         "ranking": {"basis": basis, "why": why, "formula": BASES[basis], "trust": TRUST[basis],
                                     "verdict_sources": [{k: (None if isinstance(v, float) and v != v else v)
                                                          for k, v in src.items()}
                                                         for src in table.attrs["verdict_sources"]]},
                         "top": _top_rows(ctx, top, scores[scores["fewshot"] == choice.fewshot]), "stats_file": "item_stats.csv"}}


def _answer_models(responses) -> list[dict]:
    """Each model read from its answers alone: where they come from, how many of the items it
    answered, and its accuracy on them (the share of its answers choosing the key, unreadable
    replies counted as not right: the matrix's ``correct``)."""
    import numpy as np

    out = []
    for m, (name, source) in enumerate(zip(responses.models, responses.sources or ())):
        if responses.answer_only[m]:
            right = np.asarray(responses.correct[m], dtype=float)
            out.append({"model": name, "source": source, "items": int((~np.isnan(right)).sum()),
                        "accuracy": round(float(np.nanmean(right)), 4)})
    return out


def _top_rows(ctx, top: pd.DataFrame, scores: pd.DataFrame) -> list[dict]:
    """The top items with their evidence and a page each (the review app's view of the item, with
    every model's choice in ``scores``: those of the shot count the evidence comes from)."""
    from curate.review.browser import write_item_pages

    reasons = {r.item_id: [f"label-error score {r.label_error_score:.2f}: the models prefer option "
                           f"{letter(r.suspected_option)} to the key {letter(r.evidence['gold'])}"]
               for r in top.itertuples()}
    data = review_data(ctx, scores.reset_index(drop=True))
    pages = {r["item_id"]: r["page"] for r in write_item_pages(ctx.out, data, pd.concat([ctx.round1, ctx.round2]),
                                                               reasons, folder="suspects")}
    return [{"item_id": r.item_id, "suspect_score": r.suspect_score, "suspect": bool(r.suspect),
             "label_error_score": r.label_error_score, "gold": r.evidence["gold"],
             "suspected_option": r.suspected_option, "several_correct_score": r.several_correct_score,
             "no_right_answer_score": r.no_right_answer_score, "evidence": r.evidence, "page": pages[r.item_id]}
            for r in top.itertuples()]


def render(m: dict, number: int, out) -> list:
    s = m.get("suspects")
    if not s:
        return []
    blocks = [("h2", f"{number}. Item validity: the models against the key")]
    if not s["present"]:
        return blocks + [("p", ["The label-error ranking could not be computed: ", s["reason"]])]
    blocks += [("p", f"{_read_from(s)}{_apart(s)}: the label-error score is "
                     "the log-odds, pooled over the models, that they prefer an option other than the key, raised for "
                     "negative discrimination and raised where the preference grows with the models' accuracy. "
                     f"{_answers_note(s)}It measures the models' preference against the key, not that the key "
                     f"is wrong: measured on planted errors ({MEASURED}), its precision on a benchmark's own items "
                     "depends on the benchmark and the models."),
               *_ranking_blocks(s),
               ("p", "How many items each signal flags, at the cut its filter condition uses by default (review "
                     "queue `suspects`: the default ranking's suspects, highest first; every item's numbers are in "
                     f"`{s['stats_file']}`):"),
               ("table", pd.DataFrame(s["signals"])),
               ("img", out / m["plots"]["suspects"], "Discrimination vs difficulty")]
    if s.get("irt_note"):
        blocks.append(("p", s["irt_note"][0].upper() + s["irt_note"][1:] + "."))
    if s["top"]:
        columns = ("item_id", "suspect_score", "label_error_score", "several_correct_score", "no_right_answer_score")
        rows = pd.DataFrame([{k: r.get(k, r["label_error_score"]) for k in columns}
                             | {"key": letter(r["gold"]), "preferred": letter(r["suspected_option"]),
                                "backed_by": _backers(r)} for r in s["top"]])
        blocks += [("p", f"The {len(s['top'])} items the default ranking puts first, each with a page (context, "
                         "options, every model's choice):"), ("table", rows),
                   ("links", [(r["item_id"], r["page"], _note(r)) for r in s["top"]])]
    return blocks


def _ranking_blocks(s: dict) -> list:
    """The default ranking: which combination the panel got and why, how far it was measured to be
    trustworthy, and the verdicts pooled in (metrics written before issue 45: nothing)."""
    r = s.get("ranking")
    if not r:
        return []
    blocks = [("p", f"The default ranking (`suspect_score`: the review queue `suspects`, the filter kind `suspect`, "
                    f"the order below) is {r['basis']}: {r['formula']}; chosen because {r['why']}. {r['trust']}")]
    if r["verdict_sources"]:
        blocks += [("p", "Verdicts pooled into it, each source weighted by its agreement with the models (a "
                         f"reviewer's taken as it is). {TRUST_VERDICTS}"),
                   ("table", pd.DataFrame(r["verdict_sources"]))]
    return blocks


def letter(index: int) -> str:
    """An option as the review app and the item pages name it: A, B, C, ..."""
    return chr(ord("A") + int(index))


def _read_from(s: dict) -> str:
    """What the ranking reads: the scores (mode, normalization, formulation, shots), or on a
    workspace without scores the answers alone (metrics written before: scores)."""
    if s.get("scored", True):
        return (f"From how the {len(s['models'])} models answer each of {s['n_items']} items in {s['mode']} mode "
                f"(`{s['normalization']}`, {s['formulation']}, {_shots(s)})")
    return (f"From the answers of the {len(s['models'])} models to each of {s['n_items']} items in {s['mode']} mode "
            "(no scores are present: every model is read from its answers alone)")


def _apart(s: dict) -> str:
    """The models scored but not read here, and why (another normalization, a fraction of the items)."""
    apart = s.get("set_apart") or []
    return ("; set apart: " + "; ".join(f"{a['model']}, {a['why']}" for a in apart)) if apart else ""


def _shots(s: dict) -> str:
    """The shot count read, and the others stored (metrics written before the axis: 0-shot)."""
    others = s.get("other_fewshots") or []
    return f"{s.get('fewshot', 0)}-shot" + (
        f"; also stored: {', '.join(f'{k}-shot' for k in others)}, read with `curate export WORKSPACE item-stats "
        "--fewshot K`, the filter's `fewshot:` or the review queue `suspects:K-shot`" if others else "")


def _backers(r: dict) -> str:
    """The strongest models preferring the suspected option, with p(suspected) / p(gold), or
    "answered" for a model that only answers."""
    shown = r["evidence"]["models"][:3]
    more = len(r["evidence"]["models"]) - len(shown)
    text = "; ".join(f"{b['model']} answered" if b.get("source") == "answers"
                     else f"{b['model']} {b['p_suspected']:.2f}/{b['p_gold']:.2f}" for b in shown)
    return text + (f"; +{more}" if more else "")


def _answers_note(s: dict) -> str:
    """Which models answered without probabilities (metrics written before answers joined: none)."""
    found = s.get("answer_models") or []
    if not found:
        return ""
    names = ", ".join(f"{a['model']} ({a['source']}" + (f"; accuracy {a['accuracy']:.3f} on {a['items']} items"
                                                        if "accuracy" in a else "") + ")" for a in found)
    unread = s.get("unparsed_answers", 0)
    return (f"{len(found)} of the models answered without probabilities ({names}): each is read as sure of its "
            "answer as its accuracy, its several answers to an item as its agreement with itself"
            + (f"; {unread} of their replies could not be read and count as not correct" if unread else "") + ". ")


def _note(r: dict) -> str:
    n = len(r["evidence"]["models"])
    return (f"score {r['label_error_score']:.1f}: option {letter(r['suspected_option'])} preferred to the key "
            f"{letter(r['gold'])} by {n} model{'s' if n != 1 else ''}")


def findings(m: dict) -> list:
    """Each signal's count over the items and models it rests on, the items to review first
    linked to their pages, and a sentence that says what the label-error count measures."""
    s = m.get("suspects")
    if not s or not s["present"]:
        return []
    n = len(s["models"])
    rests = f"{n} model{'s' * (n != 1)}"
    flags = [Flag(r["signal"], r["items"], s["n_items"], f"{r['meaning']} ({rests})") for r in s["signals"]]
    label = s["signals"][0]
    top = [(r["item_id"], r["page"], _note(r)) for r in s["top"][:FIRST_SCREEN]
           if r.get("suspect", r["label_error_score"] > label["cut"])]
    who = f"the {n} models prefer" if n > 1 else "the one model prefers"
    answering = len(s.get("answer_models") or [])
    text = [f"In {label['items']} of {s['n_items']} items ({percent(label['items'], s['n_items'])}) {who} another "
            "option to the key (pooled odds above 9 to 1"
            + (f"; {answering} of them answered without probabilities" if answering else "") + ")"]
    if s.get("set_apart"):
        text += [" (set apart: ", *_literal_list([(a["model"], a["why"]) for a in s["set_apart"]]), ")"]
    text.append(f": a preference to review, not proof of a wrong key. Its precision was measured on planted gold "
                f"moves ({MEASURED}); on a benchmark's own items it depends on the benchmark and the models.")
    if n < FEW_MODELS:
        text.append(f" The evidence is {n} model{'s' * (n != 1)}, which is weak: the items listed are where "
                    f"{'it disagrees' if n == 1 else 'they disagree'} with the key most, not likely errors.")
    return flags + [Items(top), Sentence(text)]


def _literal_list(pairs: list[tuple[str, str]]) -> list:
    out = []
    for i, (model, why) in enumerate(pairs):
        out += ["; " if i else "", Lit(model), f", {why}"]
    return out
