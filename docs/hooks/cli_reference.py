"""MkDocs hook: tidy the command-line reference that mkdocs-click generates from curate/cli.py.

mkdocs-click 0.9.0 prints click 8.2+'s "no default" sentinel as a default (`Sentinel.UNSET`);
an option without a default shows an empty cell instead.
"""
from __future__ import annotations

UNSET = "<td><code>Sentinel.UNSET</code></td>"


def on_page_content(html, page, config, files):
    if page.file.src_uri == "reference/cli.md":
        html = html.replace(UNSET, "<td></td>")
    return html
