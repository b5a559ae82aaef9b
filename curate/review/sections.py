"""Everything known about one item, as HTML sections shared by the review app and the report's
static item pages.

Each section is built by one function of an ``ItemContext`` that returns a ``Section`` or None
when its data is absent (no scores, no annotations, no decisions), so a stage that adds data adds
one function to ``SECTIONS`` and nothing else changes. All text is escaped here.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from itertools import combinations
from typing import Callable

import numpy as np
import pandas as pd
from rapidfuzz import fuzz

from annotate.prompts import letters
from curate.items.canonical import MODES
from curate.review.data import ReviewData, scorer_labels
from curate.review.verdicts import LABEL_TEXT, is_human, note_of
from scoring.normalize import option_values

#: Options at least this similar (rapidfuzz ratio, 0-100) are highlighted as near-duplicates;
#: the demo's near-duplicate filter stage uses the same cut.
NEAR_DUPLICATE = 80
#: Normalizations whose picks the score table shows, when the scores have them.
SHOWN = ("sum", "char", "seq_mean")


@dataclass(frozen=True)
class ItemContext:
    data: ReviewData
    item: dict
    annotations: pd.DataFrame     # the item's records, every annotator (read_annotations)
    suspect: dict | None = None   # why the suspects queue holds it (``curate.review.queues.reasons``)


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    html: str


def esc(value) -> str:
    return html.escape(str(value))


def near_duplicates(options: list[str], threshold: float = NEAR_DUPLICATE) -> list[tuple[int, int, float]]:
    """(i, j, similarity) for every pair of options at least ``threshold`` similar."""
    out = []
    for i, j in combinations(range(len(options)), 2):
        score = fuzz.ratio(options[i], options[j])
        if score >= threshold:
            out.append((i, j, round(score, 1)))
    return out


def context_section(ctx: ItemContext) -> Section:
    rows = []
    for mode in [m for m in MODES if m in ctx.item["prompts"]] + sorted(set(ctx.item["prompts"]) - set(MODES)):
        text = ctx.item["prompts"][mode]
        rows.append(f"<tr><th>{esc(mode)}</th><td>{esc(text) if text else '<i>(empty)</i>'}</td></tr>")
    return Section("context", "Context per prompt mode", f'<table class="context">{"".join(rows)}</table>')


def options_section(ctx: ItemContext) -> Section:
    item = ctx.item
    opts = letters(len(item["options"]))
    pairs = near_duplicates(item["options"])
    twins: dict[int, list[str]] = {}
    for i, j, score in pairs:
        twins.setdefault(i, []).append(f"{opts[j]} ({score:g})")
        twins.setdefault(j, []).append(f"{opts[i]} ({score:g})")
    suspected = ctx.suspect["suspected_option"] if ctx.suspect else None
    rows = []
    for i, (letter, text) in enumerate(zip(opts, item["options"])):
        classes = " ".join(c for c, on in (("gold", i == item["gold"]), ("near-dup", i in twins)) if on)
        marks = ('<span class="badge gold-badge">gold</span>' if i == item["gold"] else "") + (
            f'<span class="badge dup-badge">near-duplicate of {esc(", ".join(twins[i]))}</span>' if i in twins else "") + (
            '<span class="badge sus-badge">suspected right answer</span>' if i == suspected else "")
        rows.append(f'<li class="{classes}" data-option="{i}"><b>{letter}.</b> {esc(text)} {marks}</li>')
    note = (f'<p class="hint">Near-duplicate options (rapidfuzz ratio &ge; {NEAR_DUPLICATE}) are highlighted.</p>'
            if pairs else "")
    return Section("options", "Options", f'<ol class="options">{"".join(rows)}</ol>{note}')


def scores_section(ctx: ItemContext) -> Section | None:
    scores = scorer_labels(ctx.data.scores_of(ctx.item["item_id"]))
    if scores.empty:
        return None
    item, primary = ctx.item, ctx.data.normalization
    opts = letters(len(item["options"]))
    has_form = "formulation" in scores.columns and scores["formulation"].nunique() > 1
    head = ("<tr><th>model</th><th>mode</th>" + ("<th>formulation</th>" if has_form else "")
            + "<th>picks</th>" + "".join(f"<th>{o}{' (gold)' if i == item['gold'] else ''}</th>"
                                         for i, o in enumerate(opts)) + "</tr>")
    keys = ["model", "mode"] + (["formulation"] if has_form else [])
    order = {m: i for i, m in enumerate(MODES)}
    # Values are computed once per item and sliced per (model, mode) group: pandas calls per group
    # cost a report of 2000 item pages minutes.
    scores = scores.sort_values("option_index", kind="stable")
    own = ctx.data.normalizations  # a scorer without the primary normalization is read under its own
    wanted = [n for n in dict.fromkeys((primary, *own.values(), *SHOWN)) if n is not None]
    values = {n: option_values(scores, n).to_numpy(dtype=float) for n in wanted}
    options = scores["option_index"].to_numpy(dtype=int)
    sums_all = scores["logprob_sum"].to_numpy(dtype=float)
    groups = scores.groupby(keys, sort=False, dropna=False).indices
    rows = []
    for key in sorted(groups, key=lambda k: (str(k[0]), order.get(k[1], 99), str(k[2:]))):
        at = groups[key]
        norms = [n for n in wanted if not np.isnan(values[n][at]).any()]  # every option has a value
        mine = own.get(str(key[0] if isinstance(key, tuple) else key), primary)
        picks, pick_primary = [], None
        for norm in norms:
            pick = int(values[norm][at].argmax())
            if norm == mine:
                pick_primary = pick
            text = f"{norm}: {opts[pick]} {'&#10003;' if pick == item['gold'] else '&#10007;'}"
            if text not in picks:
                picks.append(text)
        sums = dict(zip(options[at], sums_all[at]))
        main = dict(zip(options[at], values[mine][at])) if mine in norms else {}
        cells = []
        for i in range(len(opts)):
            parts = [f"{sums[i]:.3f}"] if pd.notna(sums.get(i)) else []
            if mine not in (None, "sum") and pd.notna(main.get(i)):
                parts.append(f'<span class="sub">{mine} {main[i]:.4f}</span>')
            cells.append(f'<td class="{"pick" if i == pick_primary else ""}">{"<br>".join(parts)}</td>')
        label = "".join(f"<td>{esc(k)}</td>" for k in (key if isinstance(key, tuple) else (key,)))
        rows.append(f"<tr>{label}<td>{'<br>'.join(picks)}</td>{''.join(cells)}</tr>")
    about = ("Cells: the option's log-likelihood (sum over its tokens, where stored)"
             + (f" and its <code>{esc(primary)}</code> value" if primary not in (None, "sum") else "")
             + f"; the highlighted cell is the model's pick under <code>{esc(primary)}</code>"
             + (" (or its own normalization, shown in its cells, where it has none)"
                if set(own.values()) - {primary} else "") + "."
             if primary else "Cells: the option's log-likelihood (sum over its tokens).")
    return Section("scores", "Model choices and log-likelihoods",
                   f'<p class="hint">{about}</p><table class="scores">{head}{"".join(rows)}</table>')


def answer_text(result: dict | None, round: int, n_options: int) -> str:
    """A record's answer in words: labels (round 1) or the four answers with letters (round 2)."""
    if result is None:
        return ""
    if round == 1:
        return ", ".join(LABEL_TEXT.get(label, label) for label in result["labels"])
    opts = letters(max(n_options, result["best"] + 1, result["worst"] + 1, *(i + 1 for i in result["equally_good"])))
    equal = ", ".join(opts[i] for i in result["equally_good"]) or "none"
    return (f"best {opts[result['best']]}; equally good: {equal}; all implausible: "
            f"{'yes' if result['all_implausible'] else 'no'}; worst {opts[result['worst']]}")


def annotations_section(ctx: ItemContext) -> Section | None:
    frame = ctx.annotations
    if frame.empty:
        return None
    n = len(ctx.item["options"])
    rows = []
    for r in frame.sort_values(["round", "annotator"]).itertuples():
        note = note_of(r.raw) if is_human(r.annotator) else ""
        rows.append(f'<tr class="{"human" if is_human(r.annotator) else ""}"><td>{esc(r.annotator)}</td>'
                    f"<td>{int(r.round)}</td><td>{esc(r.status)}</td>"
                    f"<td>{esc(answer_text(r.result, int(r.round), n))}</td><td>{esc(note)}</td></tr>")
    return Section("annotations", "Annotators' labels and answers",
                   "<table class=\"annotations\"><tr><th>annotator</th><th>round</th><th>status</th>"
                   f"<th>answer</th><th>note</th></tr>{''.join(rows)}</table>")


def filter_section(ctx: ItemContext) -> Section | None:
    if not ctx.data.decisions:
        return None
    parts = []
    for d in ctx.data.decisions:
        if ctx.item["item_id"] not in d.frame.index:
            continue
        row = d.frame.loc[ctx.item["item_id"]]
        about = {s["stage"]: s.get("description") or s["stage"] for s in d.stages}
        matched = [str(m) for m in row["matched"]]
        verdict = ("<b>kept</b>" if bool(row["kept"]) else f"<b>removed</b> by <code>{esc(row['first_stage'])}</code>")
        stages = "".join(f"<li><code>{esc(m)}</code>: {esc(about.get(m, m))}</li>" for m in matched)
        parts.append(f"<p>rules <code>{esc(d.rules)}</code> ({esc(d.name)}): {verdict}</p>"
                     + (f"<ul>{stages}</ul>" if stages else "<p class=\"hint\">no stage matched</p>"))
    if not parts:
        return None
    return Section("filter", "Filter stages that matched", "".join(parts))


def suspect_section(ctx: ItemContext) -> Section | None:
    """Why the ``suspects`` queue holds the item: its label-error score against the queue's cut,
    the option suspected to be the right one, and the models that prefer it."""
    if not ctx.suspect:
        return None
    from curate.filter.kinds.label_error import DEFAULT_ABOVE

    s, opts = ctx.suspect, letters(len(ctx.item["options"]))
    sus, gold = opts[s["suspected_option"]], opts[ctx.item["gold"]]
    evidence = s.get("evidence") or {}
    rows = "".join(f"<tr><td>{esc(m['model'])}</td><td>{esc(m.get('source', 'probabilities'))}</td>"
                   f"<td>{m['p_suspected']:.3f}</td><td>{m['p_gold']:.3f}</td></tr>" for m in evidence.get("models", []))
    models = (f'<table class="suspect"><tr><th>model preferring {sus}</th><th>from</th><th>p({sus})</th>'
              f"<th>p({gold}, gold)</th></tr>{rows}</table>" if rows else "")
    answers = "".join(
        f"<li>{esc(a['model'])} ({esc(a['from'])}): "
        + ", ".join(f"{opts[int(o)]} &times;{n}" for o, n in a["runs"].items())
        + (f"{', ' if a['runs'] else ''}unreadable &times;{a['unparsed']}" if a["unparsed"] else "") + "</li>"
        for a in evidence.get("answers", []))
    answered = ("<p>Models that answered without probabilities (p: their accuracy on the option they chose), "
                f"their answers to this item:</p><ul>{answers}</ul>" if answers else "")
    ranked = (f"<p>suspect score <b>{s['suspect_score']:.2f}</b> (the queue's order; it rests on "
              f"{esc(s['suspect_basis'])}: docs/item-validity.md says how far each combination can be trusted).</p>"
              if "suspect_score" in s else "")
    return Section("suspect", "Suspected broken item",
                   f"{ranked}<p>label-error score <b>{s['label_error_score']:.2f}</b> (the models' preference for "
                   f"another option than the gold, as log-odds pooled over them, less the item's discrimination; "
                   f"the label_error filter's cut is {DEFAULT_ABOVE:.2f}, odds of 9 to 1): suspected option "
                   f"<b>{sus}</b>, the gold is <b>{gold}</b>.</p>{models}{answered}")


def generations_section(ctx: ItemContext) -> Section | None:
    """Answers by generation: per condition and seed, the option chosen (as the item's own letter,
    mapped back through the shuffle), the parse status and the reply as generated."""
    gens = ctx.data.generations_of(ctx.item["item_id"])
    if gens.empty:
        return None
    opts = letters(len(ctx.item["options"]))
    rows = []
    for g in gens.itertuples(index=False):
        pick = "unparsed" if pd.isna(g.pred) else f"{opts[int(g.pred)]} {'&#10003;' if bool(g.correct) else '&#10007;'}"
        rows.append(f"<tr><td>{esc(g.model)}</td><td>{esc(g.template)}</td><td>{esc(g.settings)}</td>"
                    f"<td>{esc(g.mode)}</td><td>{int(g.seed)}</td><td>{pick}</td><td>{esc(g.status)}</td>"
                    f"<td><code>{esc(str(g.raw)[:200])}</code></td></tr>")
    return Section("generations", "Answers by generation",
                   '<p class="hint">The option chosen, by its letter here (the model saw the options numbered in '
                   'an order shuffled per seed); replies are parsed strict, lenient or not at all.</p>'
                   '<table class="generations"><tr><th>model</th><th>template</th><th>settings</th><th>mode</th>'
                   f"<th>seed</th><th>answer</th><th>parse</th><th>reply</th></tr>{''.join(rows)}</table>")


def answers_section(ctx: ItemContext) -> Section | None:
    """Imported answers (models without probabilities: tables, Inspect logs, lm-eval samples): per
    model and run, the option it chose, or that its reply named none."""
    found = ctx.data.answers_of(ctx.item["item_id"])
    if found.empty:
        return None
    opts = letters(len(ctx.item["options"]))
    rows = "".join(
        f"<tr><td>{esc(a.model)}</td><td>{esc(a.source)}</td><td>{esc(a.run)}</td><td>"
        + ("unreadable" if pd.isna(a.choice) else
           f"{opts[int(a.choice)]} {'&#10003;' if int(a.choice) == ctx.item['gold'] else '&#10007;'}") + "</td></tr>"
        for a in found.itertuples(index=False))
    return Section("answers", "Imported answers",
                   '<p class="hint">Models that gave an answer without probabilities, as imported (curate '
                   'import-answers): the option chosen, by its letter here.</p><table class="answers"><tr><th>model'
                   f"</th><th>from</th><th>run</th><th>answer</th></tr>{rows}</table>")


#: The item view, top to bottom. A stage adding data about items adds its builder here. Why the
#: item is in the reviewer's queue (a suspected label error, the filter stages that removed it)
#: comes first: below eleven models' table it was off the first screen.
SECTIONS: list[Callable[[ItemContext], Section | None]] = [
    suspect_section, filter_section, context_section, options_section, scores_section, generations_section,
    answers_section, annotations_section,
]


def item_sections(ctx: ItemContext) -> list[Section]:
    return [s for build in SECTIONS if (s := build(ctx)) is not None]


def sections_html(sections: list[Section]) -> str:
    return "".join(f'<section class="sec sec-{s.key}"><h3>{esc(s.title)}</h3>{s.html}</section>' for s in sections)
