"""Render one list of report blocks as Markdown and as a self-contained HTML page.

A block is ("h1" | "h2" | "h3" | "p", text), ("table", DataFrame), ("img", png_path, caption) or
("links", [(label, relative href or None, note), ...]). A heading may name its anchor, ("h2", text,
anchor), which links ``#anchor`` reach; ("box", anchor, blocks) keeps blocks together under an
anchor (the report's findings), ("cols", [blocks, blocks]) shows groups of blocks side by side
in HTML (one after the other in Markdown), and ("nav", lead, [(label, href), ...]) is one line of
links after a lead text. A paragraph's text is our own prose, with
`code` spans, or a list of such prose and ``Lit`` parts: text from the workspace (model labels,
file names), shown exactly as it is in both formats. Table cells and link labels are always
shown literally.
The HTML embeds every image as a base64 data URI and uses no script, font or stylesheet from
elsewhere, so the page works offline and from any folder.
"""
from __future__ import annotations

import base64
import html
import math
from pathlib import Path

import pandas as pd

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:0.6em 0 1.4em;font-size:0.82em}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}
th{background:#f2f2f2}td:first-child,th:first-child{text-align:left}
img{max-width:100%;height:auto;display:block;margin:0.4em 0}
figcaption{font-size:0.85em;color:#555;margin-bottom:1.4em}
code{background:#f5f5f5;padding:0 3px}
.wide{overflow-x:auto}
.findings{border:1px solid #bbb;border-radius:4px;padding:0 1em 0.4em;background:#fafafa}
.findings h2{margin:0.5em 0 0.3em}.findings h3{font-size:1em;margin:0.6em 0 0.2em}.findings p{margin:0.3em 0}
.findings table{margin:0.3em 0}
.findings ul,.findings ol{margin:0.2em 0;padding-left:1.3em;font-size:0.9em}.findings nav{margin:0.5em 0;font-size:0.9em}
.findings td,.findings th{white-space:nowrap;padding:1px 5px}
.cols{display:flex;gap:1.5em;align-items:flex-start}.cols>div{flex:1 1 0;min-width:17em}.cols>div+div{flex:0 1 auto}
"""


class Lit(str):
    """Workspace text inside a paragraph: escaped, never read as Markdown or HTML."""


#: Characters Markdown (or the HTML it passes through) would read as markup, and their escapes.
MD_ESCAPES = {"\\": "\\\\", "`": "\\`", "*": "\\*", "_": "\\_", "[": "\\[", "]": "\\]", "|": "\\|",
              "&": "&amp;", "<": "&lt;", ">": "&gt;", "\n": "\\\\n", "\r": "\\\\r", "\t": " "}


def md_literal(text: str) -> str:
    """``text`` as Markdown that renders to exactly it (line breaks shown as \\n, so a table
    row stays one row). An underscore inside a word is left as it is: Markdown never reads it as
    emphasis, and `ungrammatical_prompt` stays greppable."""
    text = str(text)
    return "".join("_" if ch == "_" and 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()
                   else MD_ESCAPES.get(ch, ch) for i, ch in enumerate(text))


def fmt(value) -> str:
    """Cell text: floats to 4 significant decimals, p-values in scientific form when tiny;
    nothing for a missing value."""
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if value != 0 and abs(value) < 1e-3:
            return f"{value:.2e}"
        return f"{value:.4f}".rstrip("0").rstrip(".") if abs(value) < 1000 else f"{value:.1f}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    return str(value)


def markdown(blocks) -> str:
    out = []
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            anchor = f'<a id="{html.escape(block[2])}"></a>\n\n' if len(block) > 2 else ""
            out.append(anchor + "#" * int(kind[1]) + " " + block[1])
        elif kind == "box":
            out.append(f'<a id="{html.escape(block[1])}"></a>\n\n' + markdown(block[2]).rstrip("\n"))
        elif kind == "cols":
            out += [markdown(group).rstrip("\n") for group in block[1]]
        elif kind == "nav":
            out.append(block[1] + " " + " · ".join(f"[{md_literal(label)}](<{href}>)" for label, href in block[2]))
        elif kind == "p":
            out.append("".join(md_literal(p) if isinstance(p, Lit) else p for p in _parts(block[1])))
        elif kind == "table":
            out.append(_md_table(block[1]))
        elif kind == "img":
            out.append(f"![{block[2]}]({Path(block[1]).name})")
        elif kind == "links":
            out.append("\n".join(f"- {f'[{md_literal(label)}](<{href}>)' if href else md_literal(label)}: "
                                  f"{md_literal(note)}" for label, href, note in block[1]))
    return "\n\n".join(out) + "\n"


def _md_table(df: pd.DataFrame) -> str:
    cells = [[md_literal(fmt(v)) for v in row] for row in df.itertuples(index=False)]
    head = "| " + " | ".join(md_literal(c) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    return "\n".join([head, rule] + ["| " + " | ".join(r) + " |" for r in cells])


def html_page(blocks, title: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>\n"
            + html_body(blocks) + "\n</body></html>\n")


def html_body(blocks) -> str:
    body = []
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            anchor = f' id="{html.escape(block[2])}"' if len(block) > 2 else ""
            body.append(f"<{kind}{anchor}>{html.escape(block[1])}</{kind}>")
        elif kind == "box":
            body.append(f'<section id="{html.escape(block[1])}" class="{html.escape(block[1])}">'
                        f"{html_body(block[2])}</section>")
        elif kind == "cols":
            body.append('<div class="cols">' + "".join(f"<div>{html_body(g)}</div>" for g in block[1]) + "</div>")
        elif kind == "nav":
            body.append(f"<nav>{_inline(block[1])} " + " &middot; ".join(_link(label, href) for label, href in block[2])
                        + "</nav>")
        elif kind == "p":
            body.append("<p>" + "".join(html.escape(p) if isinstance(p, Lit) else _inline(p)
                                        for p in _parts(block[1])) + "</p>")
        elif kind == "table":
            body.append(_html_table(block[1]))
        elif kind == "img":
            data = base64.b64encode(Path(block[1]).read_bytes()).decode("ascii")
            body.append(f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(block[2])}">'
                        f"<figcaption>{html.escape(block[2])}</figcaption></figure>")
        elif kind == "links":
            body.append("<ul>" + "".join(
                f"<li>{_link(label, href)}: {html.escape(note)}</li>" for label, href, note in block[1]) + "</ul>")
    return "\n".join(body)


def _parts(text) -> list[str]:
    return [text] if isinstance(text, str) else list(text)


def _link(label: str, href: str | None) -> str:
    return f'<a href="{html.escape(href)}">{html.escape(label)}</a>' if href else html.escape(label)


def _inline(text: str) -> str:
    """Escape, then turn `code` spans into <code> (the only Markdown the paragraphs use)."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _html_table(df: pd.DataFrame) -> str:
    """A table in a box that scrolls sideways if it must; column names break after an underscore
    (``both_correct_share``), so a wide table fits a 1280-pixel screen instead of running past it."""
    head = "".join(f"<th>{html.escape(str(c)).replace('_', '_<wbr>')}</th>" for c in df.columns)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(v))}</td>" for v in row) + "</tr>"
                   for row in df.itertuples(index=False))
    return f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>'
