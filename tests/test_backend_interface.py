"""Every model user goes through a scoring backend (issue 46): the interface is a class the type
checker sees, a backend's settings live in its own file, the stage that opens a backend closes
it (also on an error), and text scores, the batch-invariance check and the local annotator ask
the backend instead of the engine."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import ROOT, one_line_error, run_cli, small_workspace
from plugin_helpers import module_in

#: A backend written as one file that counts what the stages ask of it: the model's own forward
#: (the reference's), its closes recorded in a file, its second batch failing when told.
COUNTING_BACKEND = '''
import json, os
from pathlib import Path

from curate.core.errors import CurateError
from scoring.backends import reference

LOG = Path(os.environ["COUNTING_LOG"])


def note(what):
    with LOG.open("a") as f:
        f.write(what + "\\n")


class Backend(reference.Backend):
    """The reference forward, noting each call the stages make."""
    name = "counting"

    def identity(self):
        return {**super().identity(), "engine": "counting-1"}

    def score(self, batch):
        note("score")
        self.batches = getattr(self, "batches", 0) + 1
        if os.environ.get("COUNTING_FAIL") and self.batches == 2:
            raise CurateError("the counting backend failed on its second batch")
        return super().score(batch)

    def score_requests(self, requests):
        note("score_requests")
        return super().score_requests(requests)

    def close(self):
        note("close")
'''


@pytest.fixture
def counting(tmp_path, monkeypatch):
    """The counting backend added as one file; the calls it noted, as a list, on demand."""
    from scoring import backends

    log = tmp_path / "calls.txt"
    monkeypatch.setenv("COUNTING_LOG", str(log))
    with module_in(backends, "counting", COUNTING_BACKEND, tmp_path / "added"):
        yield lambda: log.read_text().split() if log.exists() else []


def test_every_backend_is_the_interface_and_brings_its_own_settings():
    """Each backend's ``Backend`` subclasses the abstract interface; its settings are rows of its
    own file (``SETTINGS``, each marked with its name) that the score and text-scores tables and
    the audit config take; its ``Settings`` class checks them, what rows cannot say included."""
    from curate.core.errors import CurateError
    from curate.core.options import in_config
    from scoring import options as score_options
    from scoring.backends import Backend, backend_class, names
    from scoring.backends import vllm

    assert {"engine", "reference", "vllm"} <= set(names())
    for name in names():
        cls = backend_class(name)
        assert issubclass(cls, Backend) and cls.name == name
        assert all(o.backend == name for o in cls.SETTINGS)
        for o in cls.SETTINGS:
            assert o in score_options.SCORE and o.name in {t.name for t in score_options.TEXT_SCORES}
    assert {o.name for o in vllm.SETTINGS} == {
        "python", "server", "tensor_parallel_size", "gpu_memory_utilization", "kv_cache_gib", "max_model_len",
        "enable_prefix_caching", "enforce_eager", "tokens_per_call", "server_timeout"}
    source = (ROOT / "scoring" / "options.py").read_text()
    assert not any(f'Option("{o.name}"' in source for name in names() for o in backend_class(name).SETTINGS)
    assert {o.name for o in in_config(score_options.SCORE)} >= {"server", "tensor_parallel_size", "prefix_cache_mb"}

    options = score_options.ScoreOptions(model="m", backend="vllm", tokens_per_call=100, enforce_eager="false")
    settings = vllm.Backend.settings_of(options)
    assert (settings.tokens_per_call, settings.enforce_eager, settings.server_timeout) == (100, False, 600)
    with pytest.raises(CurateError, match="-o python starts a vLLM worker and -o server scores through a running "
                                          "server: give one"):
        score_options.ScoreOptions(model="m", backend="vllm", python="/x/python", server="http://h:8000")
    with pytest.raises(CurateError, match="--tokens-per-call 0: is not in the range"):
        vllm.Backend.Settings(tokens_per_call=0)


def test_a_backend_that_is_not_the_interface_is_refused(tmp_path):
    """A backend file whose ``Backend`` does not subclass ``scoring.backends.Backend`` is refused
    naming the file, before anything loads."""
    from scoring import backends

    with module_in(backends, "loose", "class Backend:\n    name = 'loose'\n", tmp_path / "added"):
        with pytest.raises(TypeError, match=r"loose.py: its Backend must subclass scoring.backends.Backend"):
            backends.backend_class("loose")


def test_the_stage_that_opens_a_backend_closes_it_also_on_an_error(tmp_path, counting, monkeypatch):
    """The score stage closes its backend when the run ends and when it fails mid-run (the first
    batch stays stored); the batch-invariance check asks the backend, one item at a time, and
    closes it; text scores are refused in one line by a backend without per-token statistics,
    and it is closed all the same."""
    from curate.core.errors import CurateError
    from scoring.options import ScoreOptions
    from scoring.run import Score, verify_batch_invariance
    from scoring.text_run import TextScores

    ws = small_workspace(tmp_path / "ws", 3)
    run = dict(backend="counting", label="counting", batch_tokens=50, quiet=True)  # a batch per item
    Score.with_options(ws, model="smollm2-135m", modes=["full"], **run).run()
    assert counting().count("close") == 1 and "score" in counting()

    other = small_workspace(tmp_path / "other", 3)
    with monkeypatch.context() as failing:
        failing.setenv("COUNTING_FAIL", "1")
        with pytest.raises(CurateError, match="failed on its second batch"):
            Score.with_options(other, model="smollm2-135m", modes=["full"], **run).run()
    assert counting().count("close") == 2
    from scoring.store import open_scores, read_scores
    with open_scores(other) as w:
        assert read_scores(w)["item_id"].nunique() == 1  # the first batch's item, stored whole

    before = len(counting())
    check = verify_batch_invariance(ws, ScoreOptions(model="smollm2-135m", backend="counting",
                                                     verify_batch_invariance=2), "full", label="counting")
    assert check["items"] == 2 and check["max_abs_diff"]["logprob_sum"] <= 1e-4
    assert counting()[before:] == ["score_requests", "score_requests", "close"]  # one item at a time

    with pytest.raises(CurateError, match=r"`curate text-scores` needs the whole next-token distribution at every "
                                          r"token \(Min-K%\+\+\), which the counting backend does not compute"):
        TextScores.with_options(ws, model="smollm2-135m", backend="counting", quiet=True).run()
    assert counting().count("close") == 4


def test_a_backend_without_statistics_is_one_line_for_text_scores(tmp_path):
    """`curate text-scores --backend reference` and `curate score --text-scores --backend
    reference`: one line each, naming the backend and the one that computes them."""
    ws = small_workspace(tmp_path / "ws", 2)
    proc = run_cli("text-scores", ws, "--model", "smollm2-135m", "--backend", "reference", "--quiet", check=False)
    one_line_error(proc, "`curate text-scores` needs the whole next-token distribution", "the reference backend "
                   "does not compute (only the engine's forward does)", "use --backend engine")
    proc = run_cli("score", ws, "--model", "smollm2-135m", "--backend", "reference", "--text-scores", "--quiet",
                   check=False)
    one_line_error(proc, "--text-scores needs the whole next-token distribution", "the reference backend")


def test_the_model_users_import_nothing_from_the_engine():
    """The score stage, text scores and the local annotator reach the forward pass through a
    backend only: none of them imports ``scoring.forward`` (at the top or in a function)."""
    for path in ("scoring/run.py", "scoring/text_run.py", "annotate/local.py"):
        tree = ast.parse((ROOT / path).read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
        from_scoring = {a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                        and node.module == "scoring" for a in node.names}
        assert "scoring.forward" not in imported and "forward" not in from_scoring, path
    assert Path(ROOT / "scoring" / "backends" / "__init__.py").read_text().count("class Backend(ABC)") == 1


def test_a_start_up_says_what_it_is_doing(tmp_path):
    """The seconds before the first progress bar are not silent: `curate score` names each
    start-up step on one line (loading the model, the runner probe, tokenizing, the self-check),
    and --quiet keeps it off."""
    ws = small_workspace(tmp_path / "ws", 2)
    proc = run_cli("score", ws, "--model", "smollm2-135m", "--modes", "full")
    said = proc.stderr.replace("\r", "\n")
    for step in ("starting smollm2-135m on the engine backend, loading the model (float32, cpu)",
                 "probing which runner reproduces the model's own forward", "tokenizing 2 units",
                 "self-check: the first 2 units also scored by the model's own forward"):
        assert step in said, said
    quiet = run_cli("score", ws, "--model", "smollm2-135m", "--modes", "zero", "--quiet")
    assert "starting" not in quiet.stderr
