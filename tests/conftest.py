"""Shared fixtures: the real HellaSwag data from ../shared/data and a CLI runner."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cli_fork

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
HELLASWAG = SHARED / "hellaswag" / "validation.jsonl.gz"
PAPER_SCORES = SHARED / "paper-scores"
sys.path.insert(0, str(ROOT))  # tests import benchmarks/lmeval_reference.py as benchmarks.lmeval_reference

# Nothing in the tests may reach the Hugging Face Hub (no network here, nor in CI).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# lm_eval sets this when imported (the parity tests import it); set up front, it is the same in
# this process and in the CLI fork server from the start (tests/cli_fork.py), so `curate` commands
# stay forked after the import. It only tunes Hub downloads, which the tests never make.
os.environ.setdefault("HF_XET_HIGH_PERFORMANCE", "1")
# Likewise threadpoolctl (imported by lm_eval through scikit-learn) sets this when imported.
os.environ.setdefault("KMP_DUPLICATE_LIB_OK", "True")

# Under pytest-xdist (`make test` runs two workers on two cores) each worker and each CLI it
# starts uses one thread: two torch thread pools of two threads each on two cores spin against
# each other (kill -9 resume took 125 s so, 50 s alone). Set before anything imports torch.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1 and not os.environ.get("OMP_NUM_THREADS"):
    os.environ["OMP_NUM_THREADS"] = "1"


def run_cli(*args, check=True, env=None, **kw) -> subprocess.CompletedProcess:
    """Run `curate ARGS` as a process of its own from this checkout: forked from a server that
    has the CLI's libraries imported already, or ``python -m curate`` (see tests/cli_fork.py)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = cli_fork.run([*map(str, args)], full_env, overrides=env or {}, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"curate {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def one_line_error(proc, *expected) -> str:
    """A refused run: exit 2, no traceback, and one `error:` line holding every ``expected`` text;
    any other stderr line must be a progress bar (tqdm, transformers' "Loading weights").
    Returns the error line."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    bar = re.compile(r"\d+%\||it/s\]|s/it\]|stage/s\]|Loading weights")
    errors, others = [], []
    for line in proc.stderr.splitlines():
        line = line.split("\r")[-1].strip()
        before, found, after = line.partition("error: ")
        if found and (not before or bar.search(before)):  # a bar left open runs into the error line
            errors.append(found + after)
        elif line and not bar.search(line):
            others.append(line)
    assert len(errors) == 1 and not others, proc.stderr[-3000:]
    for text in expected:
        assert text in errors[0], errors[0]
    return errors[0]


def save_tiny(folder: Path, model_type: str, tokenizer, **extra) -> Path:
    """A seeded 2-layer random model of ``model_type`` with SmolLM2's vocabulary and tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    sizes = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, bos_token_id=tokenizer.bos_token_id,
                 eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **{**sizes, **extra})).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def small_workspace(root: Path, n: int = 40) -> Path:
    """The first ``n`` HellaSwag validation rows as a workspace."""
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    return Ingest(root, IngestOptions(data=str(HELLASWAG), limit=n), get_adapter("hellaswag")).run()


def study_slice(root: Path, n: int) -> Path:
    """The first ``n`` HellaSwag items with the first ``n`` rows of the study's full-prompt files,
    imported by `curate import-scores --format study-csv`'s function (in process: the command's
    start-up would double the time)."""
    from scoring.study_csv import import_study_csv

    ws, scores = small_workspace(root / "ws", n), root / "scores" / "full_prompt"
    scores.mkdir(parents=True)
    for path in sorted((PAPER_SCORES / "full_prompt").glob("*.csv")):
        lines = path.read_text().splitlines()[:n + 1]
        (scores / path.name).write_text("\n".join(lines) + "\n")
    import_study_csv(ws, root / "scores")
    return ws


def copy_ws(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def built_once(tmp_path_factory, name: str, build) -> Path:
    """``build(folder)`` run once per test session, even when pytest-xdist runs the session in
    several worker processes: they share one folder, and a file lock lets the first build it while
    the others wait."""
    from filelock import FileLock
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's folder, shared by its workers
    folder, done = base / name, base / f"{name}.done"
    with FileLock(str(base / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def hellaswag_ws(tmp_path_factory) -> Path:
    """A workspace with all 10042 HellaSwag validation items (read-only for tests)."""
    from curate.items.adapters import get_adapter
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions
    return built_once(tmp_path_factory, "hellaswag-ws",
                      lambda folder: Ingest(folder, IngestOptions(data=str(HELLASWAG)), get_adapter("hellaswag")).run())


@pytest.fixture(scope="session")
def paper_ws(tmp_path_factory, hellaswag_ws) -> Path:
    """All of HellaSwag validation with the study's released scores imported (read-only)."""
    from scoring.study_csv import import_study_csv

    def build(folder):
        shutil.copytree(hellaswag_ws, folder)
        import_study_csv(folder, PAPER_SCORES)
    return built_once(tmp_path_factory, "paper-ws", build)


# The longest test files, longest first (measured totals under `make test`). pytest-xdist hands each
# worker the next file from the front of the collection, so these go first and short files fill
# the end: otherwise one worker can run the last long file alone while the other waits.
LONGEST_FIRST = ("test_tutorial.py", "test_scoring.py", "test_analyze_report.py", "test_reliability_annotate.py",
                 "test_generate_local.py", "test_scoring_models.py", "test_review.py", "test_annotate_claude.py", "test_reliability_releases.py",
                 "test_generate_claude.py", "test_ingest_builtin.py", "test_audit.py", "test_scoring_fast.py",
                 "test_audit_goldenswag.py", "test_scoring_identity.py", "test_scoring_formulations.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
    for item in items:  # pyproject's 15-minute hang guard is for `make test`; slow tests get 2 hours
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(7200))


def unwritable_place(tmp_path, how):
    """A destination that cannot be written: a folder made read-only (not for root, who writes
    anyway), or a path through a regular file (refused for root too)."""
    if how == "chmod":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        return ro, ro
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    return blocker / "sub", blocker


def seed_random_scores(root: Path, models=("m/a",), modes=("full",), seed: int = 0) -> None:
    """Seeded random option scores, a test double for a scoring run, for tests whose subject is
    not the scores (a report section reading something else still needs `analyze` to run)."""
    import numpy as np

    from scoring.store import add_run, open_scores, write_scores

    rng = np.random.default_rng(seed)
    with open_scores(root) as w, w.transaction():
        items = w.items()
        for model in models:
            for mode in modes:
                run_id = f"t-{model}-{mode}"
                add_run(w, run_id=run_id, model=model, origin="imported:test", info={})
                write_scores(w, [{"model": model, "mode": mode, "item_id": it["item_id"], "option_index": j,
                                  "content_hash": it["content_hash"], "run_id": run_id,
                                  "seq_mean": float(rng.normal())} for it in items for j in range(len(it["options"]))])
