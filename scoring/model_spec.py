"""The one grammar naming a model in every stage (`curate annotate --annotator`, `curate generate
--model`, the audit config): ``[BACKEND:]NAME``.

- ``anthropic:MODEL``: Claude through the Messages API;
- ``local:NAME`` or a bare ``NAME``: a local model, as ``scoring.models.resolve`` reads it (a
  built-in name, a folder, a GGUF file or a Hub id).

A prefix that is no backend is part of a bare name (a path may hold a colon).
"""
from __future__ import annotations

from curate.core.errors import CurateError

BACKENDS = ("anthropic", "local")


def parse(spec: str, what: str = "model") -> tuple[str, str]:
    """(backend, name) of ``spec``; an empty name is refused, naming ``what`` was given."""
    backend, colon, name = spec.partition(":")
    if not colon or backend not in BACKENDS:
        backend, name = "local", spec
    if not name.strip():
        raise CurateError(f"{what} {spec!r}: expected anthropic:MODEL, local:NAME or a local model NAME")
    return backend, name


def canonical(spec: str, what: str = "model") -> str:
    """``spec`` with its backend written out (``smollm2-135m`` -> ``local:smollm2-135m``): the
    name stored with annotations, so both spellings resume the same records."""
    backend, name = parse(spec, what)
    return f"{backend}:{name}"


def backend_named(spec: str, flag: str) -> tuple[str, str]:
    """(the backend ``spec`` runs on, how the user named it): for refusing another backend's settings."""
    return parse(spec, flag.lstrip("-"))[0], f"{flag} {spec}"
