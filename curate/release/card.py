"""The dataset card (README.md with Hub YAML metadata), generated from the manifest.

Everything in the card comes from the manifest, so the card can never state counts the
decisions do not support. Known benchmarks carry their license and citation over.
"""
from __future__ import annotations

import yaml

def known_benchmark(benchmark: str):
    """The built-in benchmark's ``Spec`` (license, Hub id, card name, citations), or None."""
    from curate.items.builtins import BENCHMARKS
    return BENCHMARKS.modules[benchmark].SPEC if benchmark in BENCHMARKS.modules else None


def license_for(benchmark: str, override: str | None) -> str | None:
    known = known_benchmark(benchmark)
    return override or (known.license if known else None)


def size_category(n: int) -> str:
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < bound:
            return label
    return "n>1M"


def source_text(provenance: dict) -> tuple[str, str]:
    """How the card names the source (never a local path) and the --data argument to reproduce."""
    if provenance.get("kind") == "hub":
        pin = provenance.get("resolved_revision") or provenance.get("revision")
        return (f"the Hugging Face Hub dataset `{provenance['repo_id']}` at revision `{pin or 'unpinned'}`",
                provenance["repo_id"] + (f" --revision {pin}" if pin else ""))
    name = provenance.get("name") or ", ".join(provenance.get("files") or []) or "a local copy"
    text = f"`{name}` (sha256 `{provenance.get('sha256', '?')}`)"
    arg = name
    copy = provenance.get("copy_of")
    if copy:
        text += (f", a copy of the Hugging Face Hub dataset `{copy['repo_id']}` "
                 + (f"at revision `{copy['revision']}`" if copy.get("revision") else "(revision not recorded)"))
        arg += f" --copy-of {copy['repo_id']}" + (f"@{copy['revision']}" if copy.get("revision") else "")
    return text, arg


def source_hub_id(source: dict) -> str | None:
    """The Hub dataset a release's source is (or is a copy of), or the benchmark's own."""
    provenance = source["provenance"]
    known = known_benchmark(source["benchmark"])
    return ((provenance.get("copy_of") or {}).get("repo_id") or provenance.get("repo_id")
            or (known.hub if known else None))


def table_cell(text: str) -> str:
    """``text`` fit for one cell of a Markdown table: a ``|`` would start a new cell and a line
    break end the row, so they are escaped and joined."""
    return " ".join(str(text).split()).replace("\\", "\\\\").replace("|", "\\|")


def dataset_card(manifest: dict, data_files: dict[str, str]) -> str:
    """README.md for a release; ``data_files`` maps split -> path of its parquet file."""
    known = known_benchmark(manifest["source"]["benchmark"])
    pretty = (known.pretty_name if known else None) or manifest["source"]["benchmark"]
    lines = [*_front_matter(manifest, data_files, pretty), *_stage_lines(manifest, pretty), *_rests_on(manifest),
             *_reproduce(manifest), *_citation(known)]
    lines.append(f"Made with benchcurate {manifest['toolkit']['version']}.")
    return "\n".join(lines) + "\n"


def _front_matter(manifest: dict, data_files: dict[str, str], pretty: str) -> list[str]:
    """The Hub's YAML header: license, name, size, the data files by split, the source dataset."""
    src, counts = manifest["source"], manifest["counts"]
    meta = {
        "license": src["license"],
        "pretty_name": f"{manifest['name']} ({pretty} {src['split']}, filtered)",
        "language": ["en"],
        "task_categories": ["multiple-choice"],
        "size_categories": [size_category(counts["kept"])],
        "tags": ["benchcurate", "benchmark-cleaning"],
        "configs": [{"config_name": "default",
                     "data_files": [{"split": split, "path": path} for split, path in data_files.items()]}],
    }
    hub_id = source_hub_id(src)
    if hub_id:
        meta["source_datasets"] = [hub_id]
    return ["---", yaml.safe_dump(meta, sort_keys=False, allow_unicode=True).strip(), "---", ""]


def _stage_lines(manifest: dict, pretty: str) -> list[str]:
    """What the release holds, and the filter stages' table."""
    src, counts = manifest["source"], manifest["counts"]
    by_source = ", ".join(f"{s} {n}" for s, n in sorted(counts.get("kept_by_source", {}).items()))
    lines = [
        f"# {manifest['name']} {manifest['version']}", "",
        f"{counts['kept']} of the {counts['items']} items of {pretty} ({src['split']} split) that pass the "
        f"filter rules `{manifest['rules']['name']}` ({manifest['rules']['sha256']}), in {pretty}'s own format "
        f"and row order." + (f" Kept by source: {by_source}." if by_source else ""), "",
        "## Filter stages", "",
        "An item leaves at the first stage it matches. *Matched* counts every item the stage's condition "
        "holds for; *removed here* those no earlier stage removed.", "",
        "| # | stage | description | matched | removed here | left |",
        "|---|---|---|---:|---:|---:|",
        f"| | start | | | | {counts['items']} |",
    ]
    for i, row in enumerate(manifest["stages"], 1):
        lines.append(f"| {i} | {table_cell(row['stage'])} | {table_cell(row.get('description', ''))} | {row['matched']} | "
                     f"{row['removed_here']} | {row['left']} |")
    if manifest.get("changelog"):
        lines += ["", "## Changes in this version", "", manifest["changelog"]]
    return lines


def _rests_on(manifest: dict) -> list[str]:
    """The annotators, score runs and tokenizers the decisions were made from."""
    lines = ["", "## What the decisions rest on", ""]
    for a in manifest["annotators"]:
        lines.append(f"- annotator `{a['annotator']}` round {a['round']}: {a.get('records', '?')} records; "
                     f"model snapshots {', '.join(a.get('model_snapshots') or ['-'])}; prompt versions "
                     f"{', '.join(a.get('prompt_versions') or ['-'])}")
    for r in manifest["scoring_runs"]:
        lines.append(f"- scores `{r['model']}` ({r.get('mode', '?')} mode, {', '.join(r.get('normalizations', []))}): "
                     f"run `{r['run_id']}`, {r.get('origin', '')}")
    for t in manifest["tokenizers"]:
        lines.append(f"- token lengths: tokenizer `{t['name']}` ({t.get('class', '')})")
    return lines


def _reproduce(manifest: dict) -> list[str]:
    """Where the release came from, its license, and the commands that make it again."""
    src = manifest["source"]
    released_from, data_arg = source_text(src["provenance"])
    lines = [
        "", "`manifest.json` lists the kept item ids, the stages that removed every other item, the rules "
        "file as applied, and the sha256 of every file here.", "",
        "## Source and license", "",
        f"Released from {released_from}. The source's license applies: **{src['license']}**.", "",
        "## Reproduce", "", "```",
        f"curate init WS --benchmark {src['benchmark']} --data {data_arg} --split {src['split']}",
    ]
    if manifest["scoring_runs"]:
        lines.append("# import or score the models listed above into WS (e.g. curate import-scores WS ...)")
    defaults = manifest["rules"].get("defaults") or {}
    flags = "".join(f" --{k} {v}" for k, v in sorted(defaults.items()))
    return lines + [
        f"curate filter WS --rules RULES.yaml --out DECISIONS{flags}   # RULES.yaml: the manifest's rules.content",
        f"curate release WS --decisions DECISIONS --name {manifest['name']} --version {manifest['version']} --to TARGET",
        "curate release verify RELEASE_FOLDER", "```", "", "## Citation", ""]


def _citation(known) -> list[str]:
    lines = []
    if known and known.citation:
        lines += ["Cite the source benchmark:", "", "```bibtex", known.citation, "```", ""]
    if known and known.study:
        lines += ["The filter stages follow:", "", "```bibtex", known.study, "```", ""]
    return lines
