"""MkDocs hook: every page that mkdocs.yml's nav does not name goes into its last section.

Feature pages are added by whoever writes the feature; listing them here as they appear keeps the
nav complete without editing mkdocs.yml each time, and `validation.nav.omitted_files: warn` with
`--strict` would otherwise fail the build on a page the nav forgot.
"""
from __future__ import annotations

SECTION = "Features"


def on_files(files, config):
    nav = config["nav"]
    if nav is None:
        return files
    listed = set(_paths(nav))
    extra = sorted(f.src_uri for f in files.documentation_pages() if f.src_uri not in listed)
    if extra:
        section = next((item[SECTION] for item in nav if isinstance(item, dict) and SECTION in item), None)
        if section is None:
            section = []
            nav.append({SECTION: section})
        section.extend(extra)
    return files


def _paths(nav):
    """Every page path named anywhere in a nav tree."""
    for item in nav:
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for value in item.values():
                yield from (_paths(value) if isinstance(value, list) else [value])
