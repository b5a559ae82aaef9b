"""croissant.json: the release described in Croissant 1.0 (mlcommons.org/croissant), with the
Responsible AI fields that apply to a filtered benchmark.

Everything comes from the manifest (where it came from, the filter stages and their counts, the
annotators and scoring runs) and from the data file's own parquet schema, then goes through
``redact_data``, so no secret and no local path reaches it. tests/test_release_croissant.py
validates it with the mlcroissant library and reads the records back through it.
"""
from __future__ import annotations

import json
from pathlib import Path

from curate.release.card import known_benchmark, source_hub_id
from curate.release.card import source_text as released_from
from curate.core.secrets import redact_data
from curate.items.sources import file_sha256

CROISSANT = "croissant.json"
CONFORMS_TO = "http://mlcommons.org/croissant/1.0"

#: Croissant 1.0's JSON-LD context, as mlcroissant writes it.
CONTEXT = {
    "@language": "en", "@vocab": "https://schema.org/", "citeAs": "cr:citeAs", "column": "cr:column",
    "conformsTo": "dct:conformsTo", "cr": "http://mlcommons.org/croissant/", "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"}, "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/", "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"}, "extract": "cr:extract", "field": "cr:field",
    "fileProperty": "cr:fileProperty", "fileObject": "cr:fileObject", "fileSet": "cr:fileSet", "format": "cr:format",
    "includes": "cr:includes", "isLiveDataset": "cr:isLiveDataset", "jsonPath": "cr:jsonPath", "key": "cr:key",
    "md5": "cr:md5", "parentField": "cr:parentField", "path": "cr:path", "recordSet": "cr:recordSet",
    "references": "cr:references", "regex": "cr:regex", "repeated": "cr:repeated", "replace": "cr:replace",
    "samplingRate": "cr:samplingRate", "sc": "https://schema.org/", "separator": "cr:separator", "source": "cr:source",
    "subField": "cr:subField", "transform": "cr:transform",
}


def croissant(manifest: dict, folder: Path, data_path: str) -> dict:
    """The Croissant document of the release in ``folder`` (its data file ``data_path`` written)."""
    src, counts = manifest["source"], manifest["counts"]
    split, known = src["split"], known_benchmark(src["benchmark"])
    source_text = released_from(src["provenance"])[0].replace("`", "")
    citation, hub_id = (known.citation if known else None) or _own_citation(manifest), source_hub_id(src)
    source_url = f"https://huggingface.co/datasets/{hub_id}" if hub_id else None
    doc = {
        "@context": CONTEXT, "@type": "sc:Dataset", "name": manifest["name"],
        "description": (f"{counts['kept']} of the {counts['items']} items of {src['benchmark']} ({split} split) "
                        f"that pass the filter rules {manifest['rules']['name']}, in the source's own format "
                        f"and row order. Made with benchcurate {manifest['toolkit']['version']}."),
        "conformsTo": CONFORMS_TO, "version": manifest["version"], "datePublished": manifest["created_at"][:10],
        "license": src["license"], "keywords": ["benchmark", "multiple-choice", "benchcurate", src["benchmark"]],
        "citeAs": citation,
        **({"isBasedOn": source_url} if source_url else {}),
        "rai:dataCollection": f"Not collected anew: the rows are those of {source_text}, unchanged.",
        "rai:dataCollectionType": ["Secondary data: a filtered subset of an existing benchmark"],
        "rai:dataCollectionRawData": source_text,
        "rai:dataPreprocessingProtocol": _stages(manifest),
        "rai:dataManipulationProtocol": (f"Items were only removed, never edited: the filter rules "
                                         f"{manifest['rules']['name']} ({manifest['rules']['sha256']}, in full in "
                                         f"manifest.json) applied by `curate filter`; each removed item's stages are "
                                         f"in manifest.json."),
        "rai:dataUseCases": ["Zero-shot evaluation of language models on the kept items, e.g. with the "
                             "lm-evaluation-harness task in lm_eval_task/."],
        "rai:dataLimitations": [f"A subset: {counts['removed']} of {counts['items']} items were removed, so scores "
                                f"on it are not comparable with scores on the full {src['benchmark']} {split} split."],
        "rai:dataReleaseMaintenancePlan": ("Versions are immutable: a change is a new version with its changelog. "
                                           "`curate release verify` checks every file against manifest.json."),
        "distribution": [{"@type": "cr:FileObject", "@id": data_path, "name": Path(data_path).name,
                          "contentUrl": data_path, "encodingFormat": "application/x-parquet",
                          "sha256": file_sha256(folder / data_path).removeprefix("sha256:")}],
        "recordSet": [{"@type": "cr:RecordSet", "@id": split, "name": split,
                       "field": _fields(folder / data_path, data_path, split)}],
    }
    doc.update(_annotation(manifest))
    return redact_data(doc)


def _own_citation(manifest: dict) -> str:
    """A BibTeX entry for the release itself, where the source benchmark's is not known here."""
    key = f"{manifest['name']}_{manifest['version']}".replace(".", "_").replace("-", "_")
    return (f"@misc{{{key},\n  title = {{{manifest['name']} {manifest['version']}: a filtered subset of "
            f"{manifest['source']['benchmark']} ({manifest['source']['split']})}},\n  note  = {{Made with benchcurate "
            f"{manifest['toolkit']['version']}}}\n}}")


def _stages(manifest: dict) -> list[str]:
    """One line per filter stage, in order: what it removes, and the counts of the stage table."""
    out = [f"start: {manifest['counts']['items']} items"]
    for i, s in enumerate(manifest["stages"], 1):
        about = f" ({s['description']})" if s.get("description") else ""
        out.append(f"stage {i} {s['stage']}{about}: matched {s['matched']}, removed here {s['removed_here']}, "
                   f"left {s['left']}")
    return out


def _annotation(manifest: dict) -> dict:
    """The annotation fields, for the annotators and models the rules read (none: no fields)."""
    annotators = [f"annotator {a['annotator']} round {a['round']}: {a.get('records', '?')} records; model snapshots "
                  f"{', '.join(a.get('model_snapshots') or ['-'])}; prompt versions "
                  f"{', '.join(a.get('prompt_versions') or ['-'])}" for a in manifest["annotators"]]
    models = sorted({str(a["annotator"]) for a in manifest["annotators"]}
                    | {str(r["model"]) for r in manifest["scoring_runs"] + manifest.get("generation_runs", [])})
    out = {}
    if annotators:
        out["rai:dataAnnotationProtocol"] = annotators
        out["rai:annotationsPerItem"] = (f"{len(manifest['annotators'])} annotation round(s) per item "
                                         f"(one per annotator and round)")
    if models:
        out["rai:machineAnnotationTools"] = models
    return out


#: parquet (arrow) type name prefix -> Croissant data type.
ARROW_TYPES = (("bool", "sc:Boolean"), ("int", "sc:Integer"), ("uint", "sc:Integer"), ("float", "sc:Float"),
               ("double", "sc:Float"), ("string", "sc:Text"), ("large_string", "sc:Text"))


def _fields(path: Path, data_path: str, record_set: str) -> list[dict]:
    """One field per column of the parquet file, typed from its schema."""
    import pyarrow.parquet as pq
    return [_field(f.name, f.type, data_path, f"{record_set}/{f.name}", {"column": f.name})
            for f in pq.read_schema(path)]


def _field(name: str, arrow_type, data_path: str, field_id: str, extract: dict, member: str | None = None) -> dict:
    """A column's field (``member``: the struct member a sub-field reads): a list column is
    ``repeated``, a struct column has one sub-field per member."""
    import pyarrow as pa
    out = {"@type": "cr:Field", "@id": field_id, "name": name}
    source = {"fileObject": {"@id": data_path}, "extract": extract,
              **({"transform": {"jsonPath": member}} if member else {})}
    if pa.types.is_struct(arrow_type):
        out["subField"] = [_field(f.name, f.type, data_path, f"{field_id}/{f.name}", extract, f.name)
                           for f in arrow_type]
    else:
        if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
            out["repeated"] = True
            arrow_type = arrow_type.value_type
        out["dataType"] = _data_type(arrow_type)
    out["source"] = source
    return out


def _data_type(arrow_type) -> str:
    name = str(arrow_type)
    return next((ours for prefix, ours in ARROW_TYPES if name.startswith(prefix)), "sc:Text")


def croissant_json(doc: dict) -> str:
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
