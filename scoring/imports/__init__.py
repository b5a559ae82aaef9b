"""Score import formats, one module each: ``curate import-scores --format NAME`` and the audit
config's ``scoring.imports[].format`` both take their choices from here.

A format is a module of this package whose name is the format's name with ``-`` written ``_``
(``lm_eval_samples`` is ``--format lm-eval-samples``). It defines:

- ``DESCRIPTION``: one line for ``--help`` and the audit schema.
- ``import_scores(workspace, paths, *, label=None, replace=False, progress=True) -> list[dict]``:
  read the files, check them against the workspace's items, store them through
  ``scoring.store`` (``add_run``, ``write_scores``, under ``label_lock``) all or nothing; one
  summary dict per stored (model, mode, ...), each with ``model``, ``mode`` and ``detail``.
- ``imported(workspace, paths) -> bool``: whether those files are stored already, unchanged
  (the audit skips the step then).
- ``supplies(paths, default_formulation) -> {(model, mode, formulation): normalizations}``: what
  importing them will store, read without importing (the audit plan's check).
- optionally ``shot_counts(paths) -> {model: {fewshot}}``: the shot counts each model's scores
  will be stored at (0 for a format without it).
- optionally ``misfits(paths, items, exact) -> list[str]``: the files that cannot be imported
  into a workspace of ``items`` items (``exact``; else at most that many), each named with why,
  read without importing: the audit checks this before anything is spent.

Modules starting with ``_`` are helpers.
"""
from __future__ import annotations

from types import ModuleType

from curate.core.registry import Registry

#: The formats (``curate.core.registry``), by their name with ``-``.
FORMATS = Registry(__name__, what="import format", required=("DESCRIPTION", "import_scores", "imported", "supplies"),
                   dashes=True)


def names() -> list[str]:
    """Every format's name, sorted."""
    return FORMATS.names()


def get(name: str) -> ModuleType:
    """The module of format ``name``; a CurateError naming the known ones for anything else."""
    return FORMATS.get(name)


def shot_counts(name: str, paths) -> dict[str, set[int]]:
    """Model -> the shot counts format ``name`` stores the files' scores at (empty: 0-shot)."""
    module = get(name)
    return module.shot_counts(paths) if hasattr(module, "shot_counts") else {}
