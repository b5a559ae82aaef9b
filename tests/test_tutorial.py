"""docs/tutorial.md run as a user types it: every ```sh block at the page's margin, in order, each
command through bash after the README's set-up line (`. .venv/bin/activate`), in a fresh folder
laid out like the repository (`rules/`, `examples/` and `.venv` linked, `../shared/data` beside
it). Claude is the loopback stand-in (tests/standin_anthropic.py) named by ANTHROPIC_BASE_URL and
ANTHROPIC_API_KEY, as a user's gateway would be; `curate review` is started, its page fetched, and
stopped with Ctrl-C (SIGINT); `make demo`, which installs, is replaced by the same `curate audit`
on 6 demo items with a tiny random model (tests/test_audit.py's config). lm_eval itself runs (5
items, about half a minute). The README's own-benchmark block must be the tutorial's section-2
block, and every other command the README shows after its set-up one the tutorial runs."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd

from annotate_helpers import KEY
from conftest import ROOT, SHARED, save_tiny
from standin_anthropic import StandIn

TUTORIAL = ROOT / "docs" / "tutorial.md"
README = ROOT / "README.md"
ACTIVATE = ". .venv/bin/activate"
NOT_RUN = '!!! note "Not run by the tutorial test"'
REVIEW_PORT = 8000  # the port the docs open


def sh_blocks(text: str, *, indented: bool = False) -> list[list[str]]:
    """The commands of each ```sh block (at the margin, or indented: inside an admonition), one
    per command: comment lines dropped, a line ending in a backslash joined with the next."""
    blocks, block, pending = [], None, ""
    for line in text.splitlines():
        stripped = line.strip()
        if block is None:
            if stripped == "```sh" and line.startswith(" ") == indented:
                block = []
        elif stripped == "```":
            blocks.append(block)
            block = None
        elif stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
        elif pending or (stripped and not stripped.startswith("#")):
            block.append(pending + stripped)
            pending = ""
    return blocks


def bare(command: str) -> str:
    """A command without its trailing comment."""
    return re.sub(r"\s+#.*$", "", command)


def readme_blocks() -> tuple[list[str], list[list[str]], list[str]]:
    """(the set-up block, the blocks after it, the own-benchmark block) of the README."""
    text = README.read_text(encoding="utf-8")
    setup, after = text.split("## Set-up", 1)[1].split("\n## ", 1)
    [setup_block] = sh_blocks(setup)
    own = sh_blocks(text.split("**6. Your own benchmark.**", 1)[1])[0]
    return setup_block, sh_blocks(after), own


class Shell:
    """Runs commands as typed into a shell in ``cwd`` after the README's set-up line; every
    command's output goes to files in ``logs`` (a pipe nobody reads can block a child)."""

    def __init__(self, cwd: Path, env: dict, logs: Path):
        self.cwd, self.env, self.logs = cwd, env, logs
        logs.mkdir()
        self.ran: list[tuple[str, float]] = []
        self.out: dict[str, str] = {}

    def record(self, command: str, start: float) -> None:
        """Each command's seconds, in logs/seconds.txt as they go (a failed run keeps them)."""
        self.ran.append((command, time.monotonic() - start))
        with (self.logs / "seconds.txt").open("a") as fh:
            fh.write(f"{self.ran[-1][1]:6.1f} s  {command}\n")

    def files(self):
        n = len(self.ran) + 1
        return self.logs / f"{n:02d}.out", self.logs / f"{n:02d}.err"

    def run(self, command: str, timeout: float = 900) -> str:
        """Run ``command``; one that changes folder (``cd``) leaves the shell there, as a shell does."""
        out, err = self.files()
        start = time.monotonic()
        moved = self.logs / "cwd.txt"
        then = f" && pwd > {moved}" if re.search(r"(^|&&|;)\s*cd\s", command) else ""
        with out.open("w") as o, err.open("w") as e:
            proc = subprocess.run(["bash", "-c", f"{ACTIVATE} && {command}{then}"], cwd=self.cwd, env=self.env,
                                  stdout=o, stderr=e, timeout=timeout)
        self.record(command, start)
        assert proc.returncode == 0, f"{command}\nexited {proc.returncode}:\n{err.read_text()[-3000:]}"
        if then:
            self.cwd = Path(moved.read_text().strip())
        self.out[bare(command)] = out.read_text()
        return self.out[bare(command)]

    def serve(self, command: str) -> str:
        """Start `curate review ...`, fetch its first page, stop it with Ctrl-C; the page."""
        if not port_free(REVIEW_PORT):  # another program holds the docs' port: any free one
            command += " --port 0"
        out, err = self.files()
        start = time.monotonic()
        with out.open("w") as o, err.open("w") as e:
            proc = subprocess.Popen(["bash", "-c", f"{ACTIVATE} && exec {command}"], cwd=self.cwd, env=self.env,
                                    stdout=o, stderr=e)
            try:
                deadline = time.monotonic() + 180
                while not (found := re.search(r"open (http://127\.0\.0\.1:\d+/)", out.read_text())):
                    assert proc.poll() is None, f"{command}\nexited {proc.returncode}:\n{err.read_text()[-3000:]}"
                    assert time.monotonic() < deadline, f"{command}: no address printed:\n{err.read_text()[-3000:]}"
                    time.sleep(0.2)
                with urllib.request.urlopen(found.group(1), timeout=60) as reply:
                    page = reply.read().decode()
            finally:
                proc.send_signal(signal.SIGINT)  # Ctrl-C, as the docs say
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.record(command, start)
        assert proc.returncode == 0 and "stopped; run the same command again to resume" in out.read_text(), \
            err.read_text()[-3000:]
        return page


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def repository_like(tmp_path: Path) -> Path:
    """tmp/shared -> the real ../shared, and tmp/repo with the repository's rules/, examples/ and
    .venv linked: the docs' relative paths resolve there, and what the commands write stays."""
    (tmp_path / "shared").symlink_to(SHARED.parent, target_is_directory=True)
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("rules", "examples"):
        (repo / name).symlink_to(ROOT / name, target_is_directory=True)
    venv = ROOT / ".venv" if (ROOT / ".venv" / "bin" / "activate").is_file() else Path(sys.prefix)
    assert (venv / "bin" / "activate").is_file() and (venv / "bin" / "curate").is_file(), \
        f"the tests run from {sys.prefix}, which is no venv with curate installed"
    (repo / ".venv").symlink_to(venv, target_is_directory=True)
    return repo


def make_demo_stand_in(shell: Shell, tmp_path: Path) -> None:
    """demo-out/ as `make demo` leaves it, from the same audit on 6 items with a tiny random model."""
    from scoring.models import load_tokenizer, resolve
    from test_audit import small_demo_config

    folder = tmp_path / "demo-config"
    folder.mkdir()
    model = save_tiny(folder / "tiny", "llama", load_tokenizer(resolve("smollm2-135m")))
    shell.run(f"curate audit {small_demo_config(folder, n_items=6, model=model)}")


def test_readme_says_how_to_run_the_commands_and_shows_the_tutorials():
    setup, after, own = readme_blocks()
    assert ACTIVATE in map(bare, setup)
    tutorial = sh_blocks(TUTORIAL.read_text(encoding="utf-8"))
    section_2 = next(block for block in tutorial if block[0].startswith("curate init ws "))
    assert list(map(bare, own)) == list(map(bare, section_2)), "the README's own-benchmark block is section 2's"
    run = {bare(c) for block in tutorial for c in block}
    shown = [bare(c) for block in after for c in block]
    assert shown and set(shown) <= run, f"not in the tutorial: {sorted(set(shown) - run)}"


def test_tutorial_runs_as_written(tmp_path):
    from scoring.models import resolve

    text = TUTORIAL.read_text(encoding="utf-8")
    blocks = sh_blocks(text)
    assert text.count(NOT_RUN) == len(sh_blocks(text, indented=True)) == 1  # each one said so where it is
    model = resolve("smollm2-135m").path  # converted now if it was not yet
    assert f"pretrained={model.replace(str(Path.home()), '$HOME')}," in text, \
        f"the tutorial's lm_eval line names another folder than {model}"

    repo = repository_like(tmp_path)
    with StandIn(polls_before_end=0, text_reply=lambda body: "2") as claude:
        shell = Shell(repo, {**os.environ, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": claude.url},
                      tmp_path / "logs")
        pages = []
        for block in blocks:
            for command in block:
                if command.startswith("make demo"):
                    make_demo_stand_in(shell, tmp_path)
                elif command.startswith("curate review "):
                    pages.append(shell.serve(bare(command)))
                else:
                    shell.run(command)
    total = sum(seconds for _, seconds in shell.ran)
    print("\n".join(f"{seconds:6.1f} s  {command}" for command, seconds in shell.ran) + f"\n{total:6.1f} s  in all")
    out = shell.out

    # section 1: the demo's removed items were served, its release verified
    assert len(pages) == 2 and all('name="review-token"' in page for page in pages)
    assert "demo/validation/" in pages[0] and "hellaswag/validation/" in pages[1]
    # section 2: the numbers the page gives
    filtered = next(v for k, v in out.items() if k.startswith("curate filter ws"))
    assert "kept 5087 of 10042 items" in filtered
    table = {line.split()[0]: line.split()[1:] for line in filtered.splitlines()[1:6]}
    assert table == {"start": ["10042"], "study-refused": ["6", "6", "10036"], "length-spread": ["817", "816", "9220"],
                     "gold-longest": ["1270", "1270", "7950"], "zero-prompt-core": ["3963", "2863", "5087"]}, filtered
    # section 3: Claude (stand-in) and the local model annotated; both are compared
    agreement = out["curate agreement ws --round 1"]
    assert "anthropic:claude-haiku-4-5" in agreement and "local:smollm2-135m" in agreement
    # lm-eval's logs imported under the label given, then the report and the item statistics
    imported = next(v for k, v in out.items() if "--format lm-eval-samples" in k)
    assert "smollm2-135m-lm-eval" in imported and "5 items" in imported
    work = shell.cwd  # the folder the page works in from section 2 on, beside the checkout
    assert work == tmp_path / "tutorial"
    metrics = json.loads((work / "report" / "metrics.json").read_text())
    assert "smollm2-135m-lm-eval" in json.dumps(metrics)
    stats = pd.read_csv(work / "item-stats.csv")
    assert len(stats) == 10042 and stats["label_error_score"].notna().all()
    assert len(stats["models"].iloc[0].split(", ")) == 10  # the study's ten, in seq_mean
    # the models that answered 5 items by generation are set apart as the 5-item score run is (issue 44)
    assert stats["set_apart"].iloc[0] == ("smollm2-135m-lm-eval: no `seq_mean` scores; "
                                          "smollm2-135m: scored on 5 of 10042 items; "
                                          "anthropic:claude-haiku-4-5 (answers): answered 5 of 10042 items; "
                                          "smollm2-135m (answers): answered 5 of 10042 items")
    # section 4: the dry run showed Claude's requests and their cost, with no request sent
    dry = next(v for k, v in out.items() if k.startswith("curate audit") and k.endswith("--dry-run"))
    assert "the request for hellaswag/validation/0" in dry and "if every first reply is usable" in dry
    # the checkout holds nothing the page wrote but `make demo`'s demo-out/ (git ignores it)
    assert sorted(p.name for p in repo.iterdir()) == [".venv", "demo-out", "examples", "rules"]
