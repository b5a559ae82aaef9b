"""Answer import formats, one module each: ``curate import-answers --format NAME`` takes its
choices from here. Answers are which option a model chose, without probabilities; they are
stored through ``scoring.answers`` (``store_answers``), all or nothing.

A format is a module of this package whose name is the format's name with ``-`` written ``_``
(``lm_eval_generate`` is ``--format lm-eval-generate``). It defines:

- ``DESCRIPTION``: one line for ``--help``.
- ``SOURCE``: the stored answers' source (``scoring.answers.SOURCES``).
- ``read(paths, items, *, model=None, filter=None) -> (frame, info)``: every answer in the files as a
  frame of ``model, item_id, choice, run`` (choice the ORIGINAL option index, None when the
  model's answer could not be read) checked against the workspace's ``items`` (``_match.Items``),
  and what was read (``info``, kept in the run records). ``model`` names the answering model
  (``--model``) where the files do not, or replaces their name; ``filter`` is lm-eval's filter
  to read (``--filter``). A bad file is a CurateError naming the file, the sample or row, and
  the field.

Modules starting with ``_`` are helpers.
"""
from __future__ import annotations

from types import ModuleType

from curate.core.registry import Registry

#: The formats (``curate.core.registry``), by their name with ``-``.
FORMATS = Registry(__name__, what="answer import format", required=("DESCRIPTION", "SOURCE", "read"), dashes=True)


def names() -> list[str]:
    """Every format's name, sorted."""
    return FORMATS.names()


def get(name: str) -> ModuleType:
    """The module of format ``name``; a CurateError naming the known ones for anything else."""
    return FORMATS.get(name)


def import_answers(workspace, fmt: str, paths, *, model: str | None = None, filter: str | None = None,
                   keep_unchanged: bool = False) -> list[dict]:
    """Read ``paths`` in format ``fmt`` and store every answer in one transaction. One summary
    dict per model: ``model``, ``answers``, ``unreadable`` (answers stored as not readable),
    ``runs``, ``stored``. ``keep_unchanged``: when the workspace already holds every answer
    read, as read, nothing is stored (``stored`` False), so a rerun of the audit leaves the
    answers, their run records and what the filter and the report read of them as they were."""
    from scoring.answer_imports._match import Items
    from scoring.answers import open_answers, store_answers

    module = get(fmt)
    with open_answers(workspace) as ws:
        items = Items(ws.items())
        frame, info = module.read(paths, items, model=model, filter=filter)
        stored = not (keep_unchanged and held_already(ws, frame, module.SOURCE))
    if stored:
        store_answers(workspace, frame, model_source=module.SOURCE, info={"format": fmt, **info})
    return [{"model": name, "answers": len(part), "unreadable": int(part["choice"].isna().sum()),
             "runs": part["run"].nunique(), "stored": stored}
            for name, part in frame.groupby("model", sort=True)]


def held_already(ws, frame, source: str) -> bool:
    """Whether an open workspace (``scoring.answers.open_answers``) holds every answer of ``frame``
    as source ``source``, each with the same choice."""
    held = {(m, i, r): c for m, i, r, c in ws.conn.execute(
        "SELECT model, item_id, run, choice FROM answers WHERE source = ?", (source,))}
    missing = object()
    for model, item, run, choice in frame[["model", "item_id", "run", "choice"]].itertuples(index=False, name=None):
        if held.get((model, item, run), missing) != (None if choice is None or choice != choice else int(choice)):
            return False
    return True
