"""Where rows come from: a local file or folder, or a Hugging Face Hub dataset, via `datasets`.

``open_source`` returns the rows plus a provenance record (what was read, its revision or file
hash) that the workspace keeps. JSON and JSON Lines files are read here with Python's json, so
every value stays as written (Arrow would give each column one type); CSV files are read by
``curate.core.textfiles`` (encoding and delimiter detected, every cell kept as the text it is);
parquet and arrow files by pyarrow (not through `datasets`' cache, which could serve a replaced
file's old rows), saved datasets by `datasets`. Problems are InputErrors naming the file,
line or row, and field.
"""
from __future__ import annotations

import codecs
import hashlib
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from curate.core.errors import InputError

#: datasets builder per file extension (compression suffixes are stripped first).
BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv", ".tsv": "csv", ".arrow": "arrow"}
COMPRESSION = (".gz", ".bz2", ".xz", ".zst")


class SplitNotFound(InputError):
    """A local folder holds no data of the split asked for (the few-shot pool tells this apart
    from a split that is there but cannot be read)."""


@dataclass
class Source:
    rows: object  # row dicts: a datasets.Dataset, or a list (JSON files, read with every value as written)
    provenance: dict


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()


def bytes_sha256(data: bytes) -> str:
    """The same digest as ``file_sha256``, of bytes already read (hashed as checked, not re-read)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


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
    ext = os.path.splitext(_uncompressed_name(path))[1]
    if ext not in BUILDERS:
        raise InputError(f"unsupported file type {ext or '(none)'}; use one of {', '.join(BUILDERS)}",
                         path=str(path))
    return BUILDERS[ext]


def open_source(data: str, split: str = "validation", revision: str | None = None,
                config: str | None = None, *, delimiter: str | None = None, encoding: str | None = None) -> Source:
    """Rows of ``split`` from a local path or a Hub dataset id (``revision`` pins a Hub commit,
    ``config`` picks the dataset's configuration, e.g. ARC's "ARC-Challenge", or in a local
    folder the subfolder of that name, as a clone of a Hub dataset keeps one per configuration).
    ``delimiter`` and ``encoding`` override what is detected in a local CSV file (``encoding``
    also reads a JSON file that is not UTF-8)."""
    path = Path(data)
    if path.exists():
        if config is not None and not path.is_dir():
            raise InputError("--config names a Hub dataset's configuration or a subfolder of a local folder; "
                             "this is a file", path=str(path), field="config")
        return _open_local(path, split, config, delimiter=delimiter, encoding=encoding)
    if _looks_local(data):  # a mistyped file name would otherwise be tried on the Hub, and fail obscurely
        raise InputError("no such file or folder (a Hub dataset id is OWNER/NAME, with no file suffix)", path=data)
    if delimiter or encoding:
        raise InputError("--delimiter and --encoding apply to local files; this is not a local path", path=data)
    return _open_hub(data, split, revision, config)


def _looks_local(data: str) -> bool:
    """Whether ``data`` can only be a local path: it starts like one (/, ./, ../, ~), has more
    than the two parts of OWNER/NAME, or ends in a data file's suffix."""
    name = data.lower()
    return (data.startswith(("/", "./", "../", "~")) or data.count("/") > 1
            or any(name.endswith(suffix) for suffix in (*BUILDERS, *(ext + c for ext in BUILDERS for c in COMPRESSION))))


def _local_files(path: Path, split: str, config: str | None = None) -> tuple[Path, list[Path], bool]:
    """Where local data of ``split`` is (after a config or split subfolder), the files that hold
    it, and whether it is a Dataset saved with save_to_disk."""
    if config is not None:
        path = _subfolder(path, config)
    if path.is_dir() and (path / "dataset_dict.json").exists():  # a DatasetDict saved with save_to_disk
        path = _subfolder(path, split, what="split")
    if path.is_dir() and (path / "dataset_info.json").exists() and (path / "state.json").exists():
        return path, [f for f in path.rglob("*") if f.is_file()], True
    return path, files_of_split(path, split) if path.is_dir() else [path], False


def local_sha256(path: str | Path, split: str, config: str | None = None) -> str:
    """The digest ``open_source`` records for local data, computed without reading its rows (an
    audit run again checks that its workspace was made from this very data)."""
    path, files, _ = _local_files(Path(path), split, config)
    return tree_sha256(files, path) if path.is_dir() else file_sha256(path)


def _open_local(path: Path, split: str, config: str | None = None, *, delimiter: str | None = None,
                encoding: str | None = None) -> Source:
    path, split_files, saved = _local_files(path, split, config)
    if saved:
        import datasets  # imported where used: a second's start-up that JSON files, the usual case, never need

        rows = datasets.load_from_disk(str(path))  # a Dataset saved with save_to_disk
        return Source(rows, {"kind": "local", "path": str(path.resolve()), "format": "saved-dataset",
                             "split": split, "sha256": tree_sha256(split_files, path)})
    if path.is_dir():
        builders = {builder_for(f) for f in split_files}
        if len(builders) > 1:
            raise InputError(f"the files of split {split!r} mix file types {sorted(builders)}", path=str(path))
        builder = builders.pop()
        digest = tree_sha256(split_files, path)
    else:
        builder, digest = builder_for(path), file_sha256(path)
    shown = str(path.resolve())
    provenance = {"kind": "local", "path": shown, "format": builder, "split": split,
                  "files": [f.name for f in split_files], "sha256": digest}
    if builder == "csv":
        return _open_csv(split_files, provenance, delimiter=delimiter, encoding=encoding)
    if delimiter:
        raise InputError(f"--delimiter applies to CSV files, not {builder}", path=shown, field="delimiter")
    if builder == "json":
        rows = [row for f in split_files for row in read_json(f, encoding)]
        provenance["encoding"] = codecs.lookup(encoding or "utf-8").name  # read_json reads no other
        return Source(rows, provenance)
    if encoding:
        raise InputError(f"--encoding applies to CSV and JSON files, not {builder}", path=shown, field="encoding")
    rows = _read_arrow_files(split_files, builder, shown)
    if len(rows) == 0:
        raise InputError(f"the {builder} data holds no rows", path=shown)
    return Source(rows, provenance)


def _read_arrow_files(files: list[Path], builder: str, shown: str):
    """Parquet or Arrow files (IPC stream or file format) read by pyarrow into one in-memory
    Dataset, its features from the files' own metadata. Not through ``datasets.load_dataset``:
    its cache knows a local file by path and modification time, so a file replaced by another
    with the same time (``cp -p``, ``rsync -t``, an unpacked archive) gave the old file's rows
    under the new file's sha256."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for f in files:
        try:
            if builder == "parquet":
                tables.append(pq.read_table(f))
                continue
            data = pa.BufferReader(f.read_bytes())
            try:
                tables.append(pa.ipc.open_stream(data).read_all())
            except pa.ArrowInvalid:  # not a stream: the random-access file format
                data.seek(0)
                tables.append(pa.ipc.open_file(data).read_all())
        except OSError as exc:
            raise InputError(f"cannot be read: {exc.strerror or exc}", path=str(f)) from None
        except Exception as exc:  # Arrow's errors say what is wrong; name the file
            raise InputError(f"could not be read as {builder}: {str(exc).strip() or type(exc).__name__}",
                             path=str(f)) from None
    try:
        table = pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputError(f"the {builder} files of this split do not share one schema: {exc}", path=shown) from None
    return datasets.Dataset(table)


def _subfolder(folder: Path, name: str, what: str = "config") -> Path:
    """``folder / name``, or an InputError listing the subfolders there are."""
    if name and (folder / name).is_dir() and Path(name).name == name:
        return folder / name
    there = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    flag = "--config" if what == "config" else "--split"
    error = SplitNotFound if what == "split" else InputError
    raise error(f"no subfolder {name!r} for {flag}; the subfolders are: {_listing(there) or '(none)'}",
                path=str(folder), field=what)


def files_of_split(folder: Path, split: str) -> list[Path]:
    """The data files of ``split`` in ``folder``: those whose name starts with the split
    (``test.jsonl.gz``, ``test-00000-of-00002.parquet``), in one subfolder. Never every file
    when none matches (that would ingest test, dev and validation as one split), and never
    several subfolders (a Hub clone has one per configuration, so every row would repeat)."""
    files = sorted(f for f in folder.rglob("*") if f.is_file()
                   and not any(part.startswith(".") for part in f.relative_to(folder).parts))
    if not files:
        raise InputError("the folder holds no data files", path=str(folder))
    named = [f for f in files if f.name.split(".")[0].split("-")[0] == split]
    if not named:
        raise SplitNotFound(f"no file for split {split!r} (a file's name must start with it); the files are: "
                            f"{_listing([f.relative_to(folder).as_posix() for f in files])}; name the split with "
                            "--split, or the file itself with --data", path=str(folder), field="split")
    parents = sorted({f.parent.relative_to(folder).as_posix() for f in named})
    if len(parents) > 1:
        raise InputError(f"the files of split {split!r} are in {len(parents)} subfolders ({_listing(parents)}), "
                         "as in a Hub dataset with one subfolder per configuration; pick one with --config NAME",
                         path=str(folder), field="split")
    by_stem: dict[str, Path] = {}
    for f in named:  # test.jsonl next to test.jsonl.gz or test.json: one file twice, every row would repeat
        other = by_stem.setdefault(_data_stem(f), f)
        if other != f:
            raise InputError(f"{other.name} and {f.name} look like two copies of one file; keep one",
                             path=str(folder), field="split")
    return named


def _uncompressed_name(path: Path) -> str:
    name = path.name.lower()
    return next((name[: -len(s)] for s in COMPRESSION if name.endswith(s)), name)


def _data_stem(path: Path) -> str:
    """The file's name without compression and data suffix: ``test`` for test.jsonl.gz and test.json."""
    name = _uncompressed_name(path)
    return next((name[: -len(ext)] for ext in BUILDERS if name.endswith(ext)), name)


def _listing(names: list[str], most: int = 8) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _open_csv(files: list[Path], provenance: dict, *, delimiter: str | None, encoding: str | None) -> Source:
    """CSV files read as text (``curate.core.textfiles``), one Dataset of string columns."""
    import datasets

    from curate.core.textfiles import read_csv

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


def _open_hub(repo_id: str, split: str, revision: str | None, config: str | None = None) -> Source:
    import datasets

    try:
        rows = datasets.load_dataset(repo_id, config, split=split, revision=revision)
    except Exception as exc:
        raise InputError(f"not a local path, and loading it from the Hugging Face Hub failed: "
                         f"{root_cause(exc)}", path=repo_id) from exc
    resolved = None
    try:
        from huggingface_hub import HfApi
        resolved = HfApi().dataset_info(repo_id, revision=revision).sha
    except Exception:  # offline or private: keep what we know
        pass
    return Source(rows, {"kind": "hub", "repo_id": repo_id, "config": config, "split": split,
                         "revision": revision, "resolved_revision": resolved,
                         "fingerprint": getattr(rows, "_fingerprint", None)})


def read_json(path: Path, encoding: str | None = None) -> list[dict]:
    """The rows of a JSON Lines file or of a JSON array of objects, every value as written.

    Read with Python's json rather than Arrow: Arrow gives a column one type, so a column
    holding "007" in one row and 1 in another came back as 7 and 1 ("007" lost, and ids "001"
    and 1 taken for duplicates). Refused, naming the line or row and the field: bytes that
    are not UTF-8 (or ``encoding``), invalid JSON, a row that is not an object, a key written
    twice in one object, a string with a lone surrogate escape."""
    from curate.core.textfiles import read_bytes

    return json_rows(read_bytes(path), str(path), encoding)


def json_rows(raw: bytes, where: str, encoding: str | None = None) -> list[dict]:
    """``read_json`` of bytes already read (``where`` names their file in errors)."""
    from curate.core.reading import loads
    from curate.core.textfiles import decode, not_utf8_message

    if encoding:
        text, _ = decode(raw, where, encoding)
    else:
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(not_utf8_message(raw, exc), path=where) from None
    if not text.strip():
        raise InputError("the file is empty", path=where)
    rows = []
    if text.lstrip().startswith("["):  # one JSON array document
        rows = loads(text, where, object_pairs_hook=_object)
        lines = [None] * len(rows)
    else:  # JSON Lines: one object per line, blank lines skipped
        lines = []
        for lineno, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            rows.append(loads(line, where, row=len(rows), line=lineno, object_pairs_hook=_object))
            lines.append(lineno)
    if not rows:
        raise InputError("the JSON array is empty: no rows", path=where)
    for i, (row, lineno) in enumerate(zip(rows, lines)):
        at = f" (line {lineno})" if lineno else ""
        if not isinstance(row, dict):
            raise InputError(f"is a JSON {json_kind(row)}, expected an object{at}", path=where, row=i)
        try:
            problem = _damaged(row, "")
        except RecursionError:
            problem = ("", "nests values deeper than can be read")
        if problem:
            raise InputError(problem[1] + at, path=where, row=i, field=problem[0])
    return rows


class _Repeated(dict):
    """A JSON object that wrote one key twice (``key``): json keeps the last value only."""
    key = ""


def _object(pairs: list[tuple[str, object]]) -> dict:
    """json's object_pairs_hook: a dict, marked when a key came twice (``_damaged`` refuses it)."""
    obj = dict(pairs)
    if len(obj) < len(pairs):
        counts = Counter(key for key, _ in pairs)
        obj = _Repeated(obj)
        obj.key = next(key for key, n in counts.items() if n > 1)
    return obj


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json decodes a valid pair to one character


def _damaged(value, field: str) -> tuple[str, str] | None:
    """(field, what is wrong) for the first value in ``value`` that would be lost or garbled."""
    if isinstance(value, _Repeated):
        return (f"{field}.{value.key}" if field else value.key,
                "is written twice in one object; the first value would be lost silently")
    if isinstance(value, str):
        bad = _LONE_SURROGATE.search(value)
        if bad:
            return field, (f"holds a lone surrogate \\u{ord(bad.group()):04x} (half of a pair), which is no "
                           "character: the text is damaged")
        return None
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        if isinstance(key, int):
            where = f"{field}[{key}]"
        else:
            where = f"{field}.{key}" if field else key
        problem = _damaged(child, where)
        if problem:
            return problem
    return None


def json_kind(value) -> str:
    """A JSON value's type name (null, boolean, number, string, array, object)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def root_cause(exc: BaseException) -> str:
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__
    return f"{type(exc).__name__}: {exc}"
