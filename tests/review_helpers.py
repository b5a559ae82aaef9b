"""A small real workspace for the review tests: the first HellaSwag rows, the study's released
scores of three models in full and zero mode, round-1 labels from the local SmolLM2-135M
annotator (a real LLM annotator that runs offline), and filter decisions; and a `curate review`
process to drive."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from conftest import PAPER_SCORES, ROOT

MODELS = ("EleutherAI--pythia-1b", "meta-llama--Llama-3.2-1B", "qwen-2.5-32b-instruct")
LLM = "local:smollm2-135m"
RULES = """name: review-test
stages:
  - name: near-duplicate
    description: two options nearly the same text
    when:
      near_duplicate_options: {threshold: 60, scorer: ratio}
  - name: pythia-wrong
    description: pythia-1b does not pick the gold in full mode
    when:
      correct: {models: [EleutherAI/pythia-1b], mode: full, normalization: seq_mean, at_most: 0}
"""


def write_study_scores(root: Path, modes=("full", "zero"), models=MODELS) -> None:
    """The study's released seq_mean scores of ``models`` (file stems) for the workspace's rows
    (test_analyze_report does the same for every 50th row)."""
    from scoring.store import add_run, open_scores, write_scores

    with open_scores(root) as ws:
        items = ws.items()
        with ws.transaction():
            for stem in models:
                model = stem.replace("--", "/")
                for mode in modes:
                    values = pd.read_csv(PAPER_SCORES / f"{mode}_prompt" / f"{stem}.csv").to_numpy()
                    run_id = f"study-{stem}-{mode}"
                    add_run(ws, run_id=run_id, model=model, origin="imported:test", info={})
                    write_scores(ws, [{"model": model, "mode": mode, "item_id": it["item_id"], "option_index": j,
                                       "content_hash": it["content_hash"], "run_id": run_id,
                                       "seq_mean": float(values[it["row_index"], j])}
                                      for it in items for j in range(len(it["options"]))])


@contextmanager
def one_torch_thread():
    """Shared cores: one thread avoids OpenMP spin-waits (see test_annotate_local)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def review_workspace(root: Path, n_items: int = 30, n_annotated: int = 8) -> tuple[Path, Path]:
    """(workspace, decisions folder)."""
    from annotate.run import Annotate
    from annotate.options import AnnotateOptions
    from annotate_helpers import small_workspace
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions

    small_workspace(root / "ws", n_items)
    write_study_scores(root / "ws")
    with one_torch_thread():
        Annotate(root / "ws", AnnotateOptions(round=1, annotator=LLM, quiet=True, limit=n_annotated)).run()
    (root / "rules.yaml").write_text(RULES)
    Filter(root / "ws", FilterOptions(rules=root / "rules.yaml", out=root / "decisions")).run()
    return root / "ws", root / "decisions"


@contextmanager
def review_server(root: Path, *args: str):
    """A `curate review` process on any free port, stopped after the block: yields (port, the
    page's review token)."""
    proc = subprocess.Popen([sys.executable, "-m", "curate", "review", str(root), "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = ""
        while "open http" not in line:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
        port = int(re.search(r"127\.0\.0\.1:(\d+)/", line).group(1))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as page:
            token = re.search(rb'name="review-token" content="([^"]+)"', page.read()).group(1).decode()
        yield port, token
    finally:
        proc.terminate()
        proc.wait(30)
