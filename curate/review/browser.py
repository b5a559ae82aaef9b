"""Static item pages next to the report: every flagged item with the review app's sections,
readable from disk without a server (no script but the index's search box, no file from
elsewhere).

``write_item_pages`` writes ``items/<row_index>.html`` per item and ``items/index.html``, a
table of all of them with a search box, and returns the rows the report lists.
"""
from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from curate.core.atomic import write_text
from curate.review.data import ReviewData
from curate.review.sections import ItemContext, item_sections, sections_html

#: At most this many pages are written (the report says how many flagged items have none).
PAGE_LIMIT = 2000
FOLDER = "items"
STYLE = (Path(__file__).parent / "static" / "review.css").read_text(encoding="utf-8")
SEARCH = """
const box = document.getElementById('search');
box.addEventListener('input', () => {
  const words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
  let shown = 0;
  for (const row of document.querySelectorAll('tbody tr')) {
    const on = words.every(w => row.textContent.toLowerCase().includes(w));
    row.hidden = !on; shown += on;
  }
  document.getElementById('shown').textContent = shown;
});
"""


def flag_reasons(round1: pd.DataFrame, round2: pd.DataFrame, gold: pd.Series) -> dict[str, list[str]]:
    """item_id -> "annotator: measure" for every flag any annotator raised (problem labels,
    round-2 flags, refusals), in row order of the records."""
    from annotate.flags import item_flags

    flags = item_flags(round1, round2, gold)
    flags = flags[flags["flagged"] & (flags["measure"] != "high_quality")]
    out: dict[str, list[str]] = {}
    for r in flags.itertuples():
        out.setdefault(r.item_id, []).append(f"{r.annotator}: {r.measure}")
    return out


def page_html(title: str, body: str, script: str = "") -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}\nbody{{max-width:1100px;margin:1em auto;padding:0 1em}}"
            f"</style></head><body>\n{body}\n" + (f"<script>{script}</script>" if script else "") + "</body></html>\n")


def write_item_pages(out_dir: Path, data: ReviewData, records: pd.DataFrame, reasons: dict[str, list[str]],
                     folder: str = FOLDER) -> list[dict]:
    """Pages for the items in ``reasons`` (row order) in ``out_dir/folder``; returns one row per
    flagged item: item_id, row_index, source, flags, page (relative to ``out_dir``; None past
    PAGE_LIMIT)."""
    name, folder = folder, Path(out_dir) / folder
    by_item = {k: g for k, g in records.groupby("item_id")} if not records.empty else {}
    rows = []
    for item in data.items:
        if item["item_id"] not in reasons:
            continue
        page = None
        if len(rows) < PAGE_LIMIT:
            page = f"{name}/{item['row_index']}.html"
            ctx = ItemContext(data, item, by_item.get(item["item_id"], records.iloc[0:0]))
            head = (f"<p><a href=\"index.html\">all flagged items</a> &middot; <a href=\"../report.html\">report</a></p>"
                    f"<h1>{html.escape(item['item_id'])}</h1><p>flags: "
                    f"{html.escape('; '.join(reasons[item['item_id']]))}</p>")
            write_text(folder / f"{item['row_index']}.html",
                       page_html(item["item_id"], head + sections_html(item_sections(ctx))))
        rows.append({"item_id": item["item_id"], "row_index": item["row_index"], "source": item["source"],
                     "flags": reasons[item["item_id"]], "page": page})
    if rows:
        body = "".join(
            f"<tr><td>{_link(r)}</td><td>{html.escape(str(r['source'] or ''))}</td>"
            f"<td>{html.escape('; '.join(r['flags']))}</td><td>{html.escape(_options(data, r['item_id']))}</td></tr>"
            for r in rows)
        write_text(folder / "index.html", page_html("flagged items", (
            f"<p><a href=\"../report.html\">report</a></p><h1>Flagged items</h1>"
            f"<p><label>search <input id=\"search\" size=\"40\"></label> <span id=\"shown\">{len(rows)}</span> of "
            f"{len(rows)} shown</p><table><thead><tr><th>item</th><th>source</th><th>flags</th><th>context and options"
            f"</th></tr></thead><tbody>{body}</tbody></table>"), SEARCH))
    return rows


def _link(row: dict) -> str:
    name = html.escape(row["item_id"])
    return f'<a href="{Path(row["page"]).name}">{name}</a>' if row["page"] else name


def _options(data: ReviewData, item_id: str) -> str:
    item = data.by_id[item_id]
    return item["prompts"]["full"] + " | " + " | ".join(item["options"])
