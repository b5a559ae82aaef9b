"""Where rows come from: a local file or folder, or a Hugging Face Hub dataset, via `datasets`.

``open_source`` returns the rows plus a provenance record (what was read, its revision or file
hash) that the workspace keeps. When `datasets` cannot parse a local file, ``diagnose`` re-reads
it line by line to name the exact file, line and field at fault instead of an Arrow traceback.
CSV files are read by ``curate.textfiles`` (encoding and delimiter detected, every cell kept as
the text it is); JSON files in another encoding than UTF-8 are read when ``encoding`` names it.
"""
from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import lzma
import os
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from curate.errors import InputError

#: datasets builder per file extension (compression suffixes are stripped first).
BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv", ".tsv": "csv", ".arrow": "arrow"}
COMPRESSION = (".gz", ".bz2", ".xz", ".zst")


@dataclass
class Source:
    rows: object  # a datasets.Dataset: indexable, len()-able, iterates dicts
    provenance: dict


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()


def tree_sha256(files: list[Path], root: Path) -> str:
    """One hash for a folder: its files' relative names and contents, in name order."""
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f"{f.relative_to(root).as_posix()}\0{file_sha256(f)}\n".encode())
    return "sha256:" + h.hexdigest()


def public_provenance(provenance: dict) -> dict:
    """The provenance record without what is local to this machine, for releases: a local
    source is named by its file or folder name, the files read and their sha256 (and
    ``copy_of``, the Hub dataset it is a copy of, when the user said so); a Hub source by its
    id and revision. Never an absolute path."""
    out = {k: v for k, v in provenance.items() if k != "path"}
    if provenance.get("path"):
        out["name"] = Path(provenance["path"]).name
    return out


def source_identity(provenance: dict) -> tuple:
    """What makes two sources the same data: the content hash of a local source, or the Hub
    id and resolved revision (the revision asked for when it could not be resolved)."""
    if provenance.get("sha256"):
        return ("sha256", provenance["sha256"])
    return ("hub", provenance.get("repo_id"), provenance.get("resolved_revision") or provenance.get("revision"))


def parse_copy_of(spec: str) -> dict:
    """``OWNER/NAME[@REVISION]`` (the Hub dataset a local file copies) as {repo_id, revision}."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    repo_id, _, revision = spec.partition("@")
    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise InputError(f"--copy-of {spec!r}: not a Hub dataset id ({exc})") from None
    if "/" not in repo_id or (_ and not revision):
        raise InputError(f"--copy-of {spec!r}: give OWNER/NAME, optionally @REVISION")
    return {"repo_id": repo_id, "revision": revision or None}


def builder_for(path: Path) -> str:
    name = path.name.lower()
    for suffix in COMPRESSION:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    ext = os.path.splitext(name)[1]
    if ext not in BUILDERS:
        raise InputError(f"unsupported file type {ext or '(none)'}; use one of {', '.join(BUILDERS)}",
                         path=str(path))
    return BUILDERS[ext]


def open_source(data: str, split: str = "validation", revision: str | None = None,
                config: str | None = None, *, delimiter: str | None = None, encoding: str | None = None) -> Source:
    """Rows of ``split`` from a local path or a Hub dataset id (``revision`` pins a Hub commit,
    ``config`` picks the dataset's configuration, e.g. ARC's "ARC-Challenge"). ``delimiter``
    and ``encoding`` override what is detected in a local CSV file (``encoding`` also reads a
    JSON file that is not UTF-8)."""
    path = Path(data)
    if path.exists():
        if config is not None:
            raise InputError("a config names a Hugging Face Hub dataset's configuration; this is a local path",
                             path=str(path), field="config")
        return _open_local(path, split, delimiter=delimiter, encoding=encoding)
    if delimiter or encoding:
        raise InputError("--delimiter and --encoding apply to local files; this is not a local path", path=data)
    return _open_hub(data, split, revision, config)


def _open_local(path: Path, split: str, *, delimiter: str | None = None, encoding: str | None = None) -> Source:
    import datasets

    if path.is_dir() and (path / "dataset_info.json").exists() and (path / "state.json").exists():
        rows = datasets.load_from_disk(str(path))  # a Dataset saved with save_to_disk
        files = [f for f in path.rglob("*") if f.is_file()]
        return Source(rows, {"kind": "local", "path": str(path.resolve()), "format": "saved-dataset",
                             "split": split, "sha256": tree_sha256(files, path)})
    if path.is_dir():
        files = sorted(f for f in path.rglob("*") if f.is_file() and not f.name.startswith("."))
        split_files = [f for f in files if f.name.split(".")[0].split("-")[0] == split] or files
        if not split_files:
            raise InputError("folder holds no data files", path=str(path))
        builders = {builder_for(f) for f in split_files}
        if len(builders) > 1:
            raise InputError(f"folder mixes file types {sorted(builders)}", path=str(path))
        data_files, builder = [str(f) for f in split_files], builders.pop()
        digest, shown = tree_sha256(split_files, path), str(path.resolve())
    else:
        data_files, builder = [str(path)], builder_for(path)
        digest, shown = file_sha256(path), str(path.resolve())
    provenance = {"kind": "local", "path": shown, "format": builder, "split": split,
                  "files": [Path(f).name for f in data_files], "sha256": digest}
    if builder == "csv":
        return _open_csv([Path(f) for f in data_files], provenance, delimiter=delimiter, encoding=encoding)
    if delimiter:
        raise InputError(f"--delimiter applies to CSV files, not {builder}", path=shown, field="delimiter")
    if encoding and builder != "json":
        raise InputError(f"--encoding applies to CSV and JSON files, not {builder}", path=shown, field="encoding")
    with tempfile.TemporaryDirectory() as tmp:
        if builder == "json" and encoding:  # JSON in a legacy encoding: re-encode as UTF-8 first
            data_files = [str(_as_utf8(Path(f), encoding, Path(tmp))) for f in data_files]
            provenance["encoding"] = encoding
        if builder == "json":
            for f in data_files:
                check_json_lines(Path(f))
        try:
            rows = datasets.load_dataset(builder, data_files=data_files, split="train")
        except Exception as exc:  # datasets wraps Arrow errors; name the file and reason plainly
            raise InputError(f"could not be read as {builder}: {_root_cause(exc)}", path=shown) from exc
    return Source(rows, provenance)


def _open_csv(files: list[Path], provenance: dict, *, delimiter: str | None, encoding: str | None) -> Source:
    """CSV files read as text (``curate.textfiles``), one Dataset of string columns."""
    import datasets

    from curate.textfiles import read_csv

    rows, used = [], []
    for f in files:
        part, how = read_csv(f, delimiter=delimiter, encoding=encoding)
        if rows and part and list(part[0]) != list(rows[0]):
            raise InputError(f"its columns {list(part[0])} differ from {files[0].name}'s {list(rows[0])}", path=str(f))
        rows += part
        used.append(how)
    if not rows:
        raise InputError("no rows to ingest", path=provenance["path"])
    for key in ("encoding", "delimiter"):  # what was used to read the files (one value when all agree)
        values = sorted({u[key] for u in used})
        provenance[key] = values[0] if len(values) == 1 else values
    return Source(datasets.Dataset.from_list(rows), provenance)


def _as_utf8(path: Path, encoding: str, folder: Path) -> Path:
    """A UTF-8 copy of ``path`` (decoded from ``encoding``) in ``folder``."""
    from curate.textfiles import decode, read_bytes

    text, _ = decode(read_bytes(path), str(path), encoding)
    out = folder / (path.name.split(".")[0] + ".jsonl")
    out.write_text(text, encoding="utf-8")
    return out


def _open_hub(repo_id: str, split: str, revision: str | None, config: str | None = None) -> Source:
    import datasets

    try:
        rows = datasets.load_dataset(repo_id, config, split=split, revision=revision)
    except Exception as exc:
        raise InputError(f"not a local path, and loading it from the Hugging Face Hub failed: "
                         f"{_root_cause(exc)}", path=repo_id) from exc
    resolved = None
    try:
        from huggingface_hub import HfApi
        resolved = HfApi().dataset_info(repo_id, revision=revision).sha
    except Exception:  # offline or private: keep what we know
        pass
    return Source(rows, {"kind": "hub", "repo_id": repo_id, "config": config, "split": split,
                         "revision": revision, "resolved_revision": resolved,
                         "fingerprint": getattr(rows, "_fingerprint", None)})


#: Openers of the compressed files whose lines are checked before `datasets` reads them.
OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def check_json_lines(path: Path) -> None:
    """Refuse, with file/line/field, what would make Arrow fail or silently coerce a JSON file:
    bytes that are not UTF-8, a line that is not a JSON object, a field whose type changes, a
    compressed file that is truncated or corrupt."""
    suffix = next((s for s in COMPRESSION if path.name.endswith(s)), "")
    if suffix and suffix not in OPENERS:
        return  # no stdlib reader: datasets reads it, and its errors are reported plainly
    opener = OPENERS.get(suffix, open)
    try:
        with opener(path, "rb") as fh:
            head = fh.read(1)
            while head.isspace():
                head = fh.read(1)
        if head == b"[":  # a single JSON array document: let datasets parse it
            return
        with opener(path, "rb") as fh:
            _check_lines(path, fh)
    except (EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"cannot be read to the end ({type(exc).__name__}: {exc}); the file is truncated or "
                         f"corrupt", path=str(path)) from None


def _check_lines(path: Path, fh) -> None:
    first_types: dict[str, tuple[str, int]] = {}
    row = -1
    for lineno, raw in enumerate(fh, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"line {lineno} is not valid UTF-8 (byte {exc.start})",
                             path=str(path), row=row + 1) from None
        if not line.strip():
            continue
        row += 1
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"line {lineno} is not valid JSON: {exc.msg} at column {exc.colno}",
                             path=str(path), row=row) from None
        if not isinstance(record, dict):
            raise InputError(f"line {lineno} is a JSON {type(record).__name__}, expected an object",
                             path=str(path), row=row)
        for key, value in record.items():
            kind = _json_kind(value)
            if kind == "null":
                continue
            seen = first_types.setdefault(key, (kind, row))
            if seen[0] != kind:
                raise InputError(f"is a {kind} here but a {seen[0]} in row {seen[1]}",
                                 path=str(path), row=row, field=key)


def _json_kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def _root_cause(exc: BaseException) -> str:
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__
    return f"{type(exc).__name__}: {exc}"
