"""Scoring backends, one file each: what turns token requests into per-option log-likelihoods, for
every model user: the score stage, text scores, the batch-invariance check and the local
annotator.

``curate score --backend NAME`` (the audit config's ``scoring.backend``, ``curate text-scores
--backend NAME``) picks one; adding a backend is adding its file here (``curate.core.registry``
finds it). Its module defines ``Backend``, a subclass of ``Backend`` below (the interface the
type checker sees), constructed as ``Backend(ref, options, context)``: ``ref`` the model
(``scoring.models.resolve``), ``options`` the run's options object (its ``dtype``, ``device``,
``batch_tokens``, and the backend's own settings by name), ``context`` what the stage that opens
it lends (a folder for logs, where start-up steps are said). The stage builds the requests itself
(``scoring.encode``: the same token ids for every backend), stores what the backend returns, keys
its cache by the backend's identity, and closes the backend when done, also on an error
(``with open_backend(...) as backend``).

A backend's own settings live in its file: ``SETTINGS``, ``Option`` rows with ``backend=NAME``
(``curate.core.options``), which `curate score` and `curate text-scores` take as ``-o NAME
VALUE`` and the audit config as ``scoring`` keys (``scoring.options`` gathers them); its
``Settings`` class (made from them) checks them, its ``check`` what rows cannot say alone (two
settings that exclude each other), and the backend reads ``self.settings``.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, ClassVar

from curate.core.errors import CurateError
from curate.core.options import Option, options_class
from curate.core.registry import Registry

BACKENDS = Registry(__name__, what="scoring backend", required=("Backend",))


def quiet(step: str) -> None:
    """Start-up steps said nowhere."""


@dataclass(frozen=True)
class Context:
    """What the stage opening a backend lends it: ``logs``, a folder it may keep its logs in (the
    workspace's ``logs``; None: the system's temporary folder); ``say``, where it names each
    start-up step (loading a model, starting a worker) as it begins; ``stats``, whether the stage
    will ask for per-token statistics (text scores), so a backend loads what they need."""
    logs: Path | None = None
    say: Callable[[str], None] = quiet
    stats: bool = False


class Backend(ABC):
    """A loaded model that scores ``scoring.encode.Request``s: each continuation's summed
    log-probability and greedy flag, the prefix's own log-probability where asked
    (``prefix_lp``), and where asked (``stats``) the per-token statistics text scores read
    (only a backend whose ``token_stats`` is true returns them).

    - ``tokenizer``, ``window``: the tokenizer and the longest sequence it scores (lm-eval's
      max_length);
    - ``identity()``: what its numbers depend on besides the items (``model_hash``,
      ``tokenizer_hash``, ``dtype``, ``engine``: its name and version); stored numbers are reused
      only under the same identity;
    - ``info()``: what the run record says of it; ``summary()``: what the run's summary adds
      (``notes``: lines the command prints);
    - ``plan(units, items)``: the run's units in batches (``scoring.prefix_cache.Batch``);
      ``refuse(units, items)``: what it cannot score exactly, one line, before anything is scored;
    - ``self_check(units, items=, names=, score=)``: the first ``items`` units scored again by the
      model's own plain forward (``scoring.self_check``), stopping on a difference; ``score`` is
      the method the run scores with (``score_requests``; default: ``score``'s batches);
    - ``score(batch)``: one result per request of a planned batch; ``score_requests(requests)``:
      one result per request of any list, scored together (the prefixes they share computed
      once where the backend can);
    - ``close()``: what it holds given back (a worker process ended); the stage that opened it
      calls it, also on an error.
    """
    name: ClassVar[str]
    #: Its own settings: ``Option`` rows with ``backend=name`` (module docstring).
    SETTINGS: ClassVar[list[Option]] = []
    #: Their options class, made from ``SETTINGS`` (``check``: what rows cannot say alone).
    Settings: ClassVar[type]
    #: Whether ``stats`` requests get their per-token statistics (text scores need them); an
    #: instance may say false where its class says true (vLLM through a server).
    token_stats: bool = False
    tokenizer: Any
    window: int

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "SETTINGS" in cls.__dict__ or "check" in cls.__dict__ or not hasattr(cls, "Settings"):
            cls.Settings = options_class(f"{getattr(cls, 'name', cls.__name__).title()}Settings", cls.SETTINGS,
                                         check=cls.check)

    def __init__(self, ref, options, context: Context = Context()):
        self.ref, self.dtype, self.device = ref, options.dtype, options.device
        self.batch_tokens, self.context = options.batch_tokens, context
        self.settings = self.settings_of(options)

    @classmethod
    def settings_of(cls, options):
        """Its settings from the run's options (those the options object lacks at their defaults)."""
        return cls.Settings(**{o.name: getattr(options, o.name) for o in cls.SETTINGS if hasattr(options, o.name)})

    @staticmethod
    def check(settings) -> None:
        """Refuse, with a CurateError, settings that exclude each other."""

    @abstractmethod
    def identity(self) -> dict: ...

    @abstractmethod
    def info(self) -> dict: ...

    @abstractmethod
    def plan(self, units, items) -> list: ...

    @abstractmethod
    def refuse(self, units, items) -> None: ...

    @abstractmethod
    def self_check(self, units, *, items: int, names, score=None) -> dict: ...

    @abstractmethod
    def score(self, batch) -> list: ...

    @abstractmethod
    def score_requests(self, requests) -> list: ...

    def summary(self) -> dict:
        return {}

    def why_no_stats(self) -> str:
        """Why it gives no per-token statistics, for the line refusing text scores."""
        return "does not return"

    def close(self) -> None:
        """Nothing held but this process's memory, freed with the backend."""

    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def get(name: str) -> ModuleType:
    return BACKENDS.get(name)


def backend_class(name: str) -> type[Backend]:
    """The ``Backend`` class of backend ``name``; a file whose ``Backend`` does not subclass the
    interface is refused, naming it."""
    module = get(name)
    if not (isinstance(module.Backend, type) and issubclass(module.Backend, Backend)):
        raise TypeError(f"{module.__file__}: its Backend must subclass scoring.backends.Backend")
    return module.Backend


def open_backend(name: str, ref, options, context: Context = Context()) -> Backend:
    """Backend ``name`` loaded for ``ref`` (close it when done: ``with open_backend(...) as b``)."""
    return backend_class(name)(ref, options, context)


def names() -> list[str]:
    return BACKENDS.names()


def settings() -> list[Option]:
    """Every backend's own settings, in the backends' order (``scoring.options`` adds them to the
    score and text-scores tables, so ``-o NAME VALUE`` and the audit config take them)."""
    return [o for name in names() for o in backend_class(name).SETTINGS]


def refuse_stats(backend: Backend, what: str) -> None:
    """One line when ``backend`` cannot give the per-token statistics ``what`` needs."""
    if not backend.token_stats:
        raise CurateError(f"{what} needs the whole next-token distribution at every token (Min-K%++), which the "
                          f"{backend.name} backend {backend.why_no_stats()}; use --backend engine")


def refresh() -> None:
    """Forget the backends found so far (after this package's ``__path__`` changed: tests)."""
    BACKENDS.refresh()
