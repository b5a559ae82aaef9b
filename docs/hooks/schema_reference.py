"""MkDocs hook: the reference pages of the JSON Schemas in schemas/, written from the schemas at build time.

The schemas are what `curate audit`, `curate filter` and the release code validate with, so the
reference cannot drift from them: no schema text is copied into docs/ by hand. One section per
object (the top level, then each `$defs` entry), one table row per key.
"""
from __future__ import annotations

import json
from pathlib import Path

from mkdocs.structure.files import File

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"

# page path -> (schema files, page title, what the page is for)
PAGES = {
    "reference/audit-config.md": (["audit.schema.json"], "Audit config reference",
                                  "The YAML file `curate audit` and `curate check-config` read "
                                  "(see [One command: curate audit](../stages/audit.md))."),
    "reference/rules.md": (["rules.schema.json"], "Filter rules reference",
                           "The YAML rules file `curate filter --rules` reads (see "
                           "[Filter](../stages/filter.md)); each condition kind is one module in "
                           "`curate/filter/kinds/`, from which `make schemas` writes this schema."),
}
# Every other schema (the item, an annotation record, a release manifest, ...) on one page, so a
# schema added to schemas/ is documented without editing this file.
OWN_PAGE = {name for names, _, _ in PAGES.values() for name in names}
PAGES["reference/schemas.md"] = (
    sorted((p.name for p in SCHEMAS.glob("*.schema.json") if p.name not in OWN_PAGE),
           key=lambda name: (name != "item.schema.json", name)),
    "Data schemas", "The records benchcurate stores, releases and reads besides configs and rules.")


def on_files(files, config):
    """Add the generated reference pages to the site."""
    for path, (names, title, about) in PAGES.items():
        files.append(File.generated(config, path, content=render_page(names, title, about)))
    return files


def render_page(names: list[str], title: str, about: str) -> str:
    out = [f"# {title}", "", about, "",
           "Generated at build time from " + ", ".join(f"`schemas/{n}`" for n in names)
           + " (`docs/hooks/schema_reference.py`); the schema is the authority.", ""]
    for name in names:
        schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
        prefix = "" if len(names) == 1 else name.split(".")[0] + "-"
        level = 2 if len(names) == 1 else 3
        if len(names) > 1:
            out += [f"## {schema.get('title', name)} {{#{prefix.rstrip('-')}}}", ""]
        out += _section(f"`{name}`: top level", schema, prefix, level, anchor=prefix + "top")
        for key, sub in schema.get("$defs", {}).items():
            out += _section(f"`{key}`", sub, prefix, level, anchor=prefix + key)
    return "\n".join(out) + "\n"


def _section(heading: str, node: dict, prefix: str, level: int, anchor: str) -> list[str]:
    out = ["#" * level + f" {heading} {{#{anchor}}}", ""]
    if node.get("description"):
        out += [node["description"], ""]
    nested: list[tuple[str, dict]] = []
    properties = node.get("properties", {})
    if not properties:
        out += [f"Value: {_type(node, prefix, anchor, nested)}.", ""]
    else:
        required = set(node.get("required", []))
        out += ["| key | value | required | description |", "|---|---|---|---|"]
        for key, sub in properties.items():
            value = _type(sub, prefix, f"{anchor}-{key}", nested)
            out.append(f"| `{key}` | {_cell(value)} | {'yes' if key in required else ''} | "
                       f"{_cell(sub.get('description', ''))} |")
        out.append("")
    out += [f"- {note}" for note in _rules(node, prefix)]
    out.append("")
    for sub_anchor, sub in nested:
        path = sub_anchor.removeprefix(prefix).replace("-item", "[]").replace("-", ".")
        out += _section(f"`{path}`", sub, prefix, min(level + 1, 6), sub_anchor)
    return out


def _type(node: dict, prefix: str, anchor: str, nested: list) -> str:
    """The value a key takes, in words; inline objects get a section of their own (``nested``)."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{prefix}{name})"
    if "enum" in node:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    for word, joiner in (("oneOf", " or "), ("anyOf", " or ")):
        if word in node and all(set(alt) - {"required"} for alt in node[word]):
            return joiner.join(_type(alt, prefix, f"{anchor}-{i}", nested) for i, alt in enumerate(node[word]))
    kind = node.get("type", "any value")
    kind = " or ".join(kind) if isinstance(kind, list) else kind
    if "array" in kind and "items" in node:
        kind = kind.replace("array", "list of " + _type(node["items"], prefix, anchor + "-item", nested))
    elif node.get("properties") or "object" in kind and isinstance(node.get("additionalProperties"), dict):
        if node.get("properties"):
            nested.append((anchor, node))
            kind = f"[object](#{anchor})"
        else:
            kind = "mapping to " + _type(node["additionalProperties"], prefix, anchor + "-value", nested)
    return kind + _limits(node)


def _limits(node: dict) -> str:
    words = {"minLength": "at least {} characters", "maxLength": "at most {} characters",
             "minimum": ">= {}", "maximum": "<= {}", "exclusiveMinimum": "> {}", "exclusiveMaximum": "< {}",
             "minItems": "at least {} items", "maxItems": "at most {} items",
             "minProperties": "at least {} keys", "maxProperties": "at most {} keys",
             "pattern": "matching `{}`", "default": "default `{}`"}
    parts = ["not empty" if k in ("minLength", "minItems") and node[k] == 1
             else text.format(json.dumps(node[k]) if k == "default" else node[k])
             for k, text in words.items() if k in node]
    if node.get("uniqueItems"):
        parts.append("no repeats")
    return f" ({'; '.join(parts)})" if parts else ""


def _rules(node: dict, prefix: str) -> list[str]:
    """The object-level rules: alternatives of required keys, keys needing others, shared keys."""
    notes = []
    for word, how in (("oneOf", "exactly one of"), ("anyOf", "at least one of")):
        alts = node.get(word, [])
        if alts and all(set(alt) == {"required"} for alt in alts):
            keys = ", ".join(" + ".join(f"`{k}`" for k in alt["required"]) for alt in alts)
            notes.append(f"Needs {how} {keys}.")
    for key, needs in node.get("dependentRequired", {}).items():
        notes.append(f"`{key}` needs " + ", ".join(f"`{n}`" for n in needs) + ".")
    for part in node.get("allOf", []):
        if "$ref" in part:
            name = part["$ref"].rsplit("/", 1)[-1]
            notes.append(f"Also takes the keys of [{name}](#{prefix}{name}).")
    if node.get("additionalProperties") is False or node.get("unevaluatedProperties") is False:
        notes.append("No other keys are allowed.")
    return notes


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: a pipe outside a code span would end the cell."""
    parts = text.replace("\n", " ").split("`")
    return "`".join(part if i % 2 else part.replace("|", "\\|") for i, part in enumerate(parts))
