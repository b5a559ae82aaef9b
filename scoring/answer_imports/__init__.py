"""Answer import formats, one module each: ``curate import-answers --format NAME`` takes its
choices from here. Answers are which option a model chose, without probabilities; they are
stored through ``scoring.answers`` (``replace_answers``), all or nothing.

A format is a module of this package whose name is the format's name with ``-`` written ``_``
(``lm_eval_generate`` is ``--format lm-eval-generate``). It defines:

- ``DESCRIPTION``: one line for ``--help``.
- ``SOURCE``: the stored answers' source (``scoring.answers.SOURCES``).
- ``SETTINGS``: the import's settings it reads besides ``model`` (``scoring.answer_options``:
  ``filter``, ``choice_as``...); another format's setting given to it is refused.
- ``read(paths, items, *, model=None, **settings) -> (frame, info)``: every answer in the files as
  a frame of ``model, item_id, choice, run, file`` (choice the ORIGINAL option index, None when the
  model's answer could not be read; file the file it was read from, ``_match.Answers``) checked
  against the workspace's ``items`` (``_match.Items``), and what was read (``info``, kept in the
  run records). ``model`` names the answering model (``--model``) where the files do not, or
  replaces their name. A bad file is a CurateError naming the file, the sample or row, and the field.
- ``inputs(paths) -> list[Path]`` (optional): the files ``read`` reads, whose bytes make the
  import's fingerprint (default: the paths, every file under a folder).

Importing files again replaces every answer they gave before under the same ``--model`` (rows
deleted from a file leave the workspace). Modules starting with ``_`` are helpers.
"""
from __future__ import annotations

from pathlib import Path
from types import ModuleType

from curate.core.errors import CurateError
from curate.core.registry import Registry

#: The formats (``curate.core.registry``), by their name with ``-``.
FORMATS = Registry(__name__, what="answer import format", required=("DESCRIPTION", "SOURCE", "read"), dashes=True)


def names() -> list[str]:
    """Every format's name, sorted."""
    return FORMATS.names()


def get(name: str) -> ModuleType:
    """The module of format ``name``; a CurateError naming the known ones for anything else."""
    return FORMATS.get(name)


def import_answers(workspace, fmt: str, paths, *, model: str | None = None, keep_unchanged: bool = False,
                   **settings) -> list[dict]:
    """Read ``paths`` in format ``fmt`` (``settings``: the format's own, ``SETTINGS``) and store
    every answer in one transaction, replacing what these files gave before. One summary dict per
    model: ``model``, ``answers``, ``unreadable`` (answers stored as not readable), ``runs``,
    ``stored``, ``replaced`` (the answers of the files' earlier import, deleted first; the same on
    every model's dict). ``keep_unchanged``: when the workspace holds this very import (the same
    files byte for byte, format, settings and name: ``scoring.answers.imported``), nothing is read
    or stored (``stored`` False), so a rerun of the audit leaves the answers, their run records
    and what the filter and the report read of them as they were."""
    from scoring.answer_imports._match import Items
    from scoring.answers import imported, open_answers, replace_answers

    module = get(fmt)
    given = _settings(fmt, module, settings)
    if model is not None:
        model = _checked_name(model, "--model")
    paths = [Path(p) for p in paths]
    key = fingerprint(fmt, module, paths, model, given)
    with open_answers(workspace) as ws:
        if keep_unchanged:
            held = imported(ws, key)
            if held is not None:
                return [{**s, "stored": False, "replaced": 0} for s in held]
        frame, info = module.read(paths, Items(ws.items()), model=model, **given)
    names = {name: _checked_name(name, f"the model name in {', '.join(map(str, paths))}")
             for name in set(frame["model"])}
    if any(k != v for k, v in names.items()):
        frame["model"] = frame["model"].map(names)
    done = replace_answers(workspace, frame, source=module.SOURCE, info={"format": fmt, **info},
                           files=frame.attrs.get("files", []), named=model or "", fingerprint=key,
                           summary=(summary := _summary(frame)))
    return [{**s, "stored": True, "replaced": done["replaced"]} for s in summary]


def read_files(fmt: str, paths, items, *, model: str | None = None, **settings):
    """``read`` of format ``fmt`` (``settings`` checked as ``import_answers`` checks them): the
    answers in ``paths`` against ``items`` (``_match.Items``), nothing stored."""
    module = get(fmt)
    return module.read([Path(p) for p in paths], items, model=model, **_settings(fmt, module, settings))


def _summary(frame) -> list[dict]:
    """Per model, sorted: answers, unreadable answers, runs."""
    by_model = frame.groupby("model", sort=True)
    unreadable = frame["choice"].isna().groupby(frame["model"], sort=True).sum()
    return [{"model": name, "answers": int(n), "unreadable": int(unreadable[name]), "runs": int(runs)}
            for name, n, runs in zip(by_model.size().index, by_model.size(), by_model["run"].nunique())]


def _checked_name(name, where: str) -> str:
    from curate.core.names import model_name

    try:
        return model_name(name)
    except ValueError as exc:
        raise CurateError(f"{where} {_shown(name)} is not a model name: it {exc}; nothing was imported") from None


def _shown(value) -> str:
    from curate.core.names import shown
    return shown(value)


def _settings(fmt: str, module: ModuleType, settings: dict) -> dict:
    """The settings ``module`` reads (None: not given); another format's setting is refused, as it
    would be ignored."""
    takes = getattr(module, "SETTINGS", ())
    for name, value in settings.items():
        if value is not None and name not in takes:
            others = [f for f in names() if name in getattr(get(f), "SETTINGS", ())]
            flag = "--" + name.replace("_", "-")
            raise CurateError(f"{flag} is for --format {' or '.join(others) or '(none)'}; --format {fmt} does not "
                              f"read it")
    return {name: settings.get(name) for name in takes}


def fingerprint(fmt: str, module: ModuleType, paths: list[Path], model: str | None, settings: dict) -> str:
    """What makes an import the same import: the format, the name, the settings and every file it
    reads (``inputs``), each by its resolved path and sha256 (a file that is no regular file by
    its path alone: the import refuses it)."""
    import hashlib
    import json
    import stat

    from curate.items.sources import file_sha256

    files = []
    for path in (module.inputs(paths) if hasattr(module, "inputs") else _every_file(paths)):
        try:
            regular = stat.S_ISREG(path.stat().st_mode)
        except OSError:
            regular = False
        files.append([str(path.resolve()), file_sha256(path) if regular else None])
    key = {"format": fmt, "model": model, "settings": settings, "files": files}
    return "sha256:" + hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()


def _every_file(paths: list[Path]) -> list[Path]:
    out = []
    for path in paths:
        out.extend(sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path])
    return out
