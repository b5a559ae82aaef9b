"""The documentation: the site builds strictly, the README stays a short guide, every test or
benchmark the docs cite as evidence exists (so a claim cannot outlive the test that shows it), and
every `curate` command line they show names real commands and options."""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
from pathlib import Path

import click

from curate.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").rglob("*.md"))
# A repository path named as evidence: tests/..., benchmarks/... (not ../shared/data/benchmarks/...).
CITED_PATH = re.compile(r"(?<![\w./-])((?:tests|benchmarks)/[\w./*-]*\w)")
CITED_TEST = re.compile(r"`(test_\w+)")


def test_the_site_builds_strictly(tmp_path):
    """`mkdocs build --strict` fails on a broken link or anchor, a missing page or one the nav
    leaves out (mkdocs.yml's validation settings), and on any warning of the generators."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").exists()
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "curate score" in cli and "--batch-tokens" in cli and "Sentinel" not in cli   # from the click commands
    rules = (tmp_path / "site" / "reference" / "rules" / "index.html").read_text(encoding="utf-8")
    assert "near_duplicate_options" in rules                         # generated from schemas/rules.schema.json


def test_readme_is_a_short_guide_whose_links_resolve():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "make demo" in text and "make test" in text and "make lock" in text
    for target in re.findall(r"\]\(([^)#\s]+)", text):
        if not re.match(r"https?://", target):
            assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def test_every_test_and_benchmark_cited_in_the_docs_exists():
    defined = {name for path in (ROOT / "tests").rglob("*.py")
               for name in re.findall(r"def (test_\w+)", path.read_text(encoding="utf-8"))}
    modules = {path.stem for path in (ROOT / "tests").glob("test_*.py")}
    missing = []
    for page in [README, *PAGES]:
        text = page.read_text(encoding="utf-8")
        for cited in CITED_PATH.findall(text):
            if not glob.glob(str(ROOT / cited)) and not glob.glob(str(ROOT / cited) + ".*"):     # `name.*`
                missing.append(f"{page.relative_to(ROOT)}: {cited}")
        for name in CITED_TEST.findall(text):
            if name not in defined and name not in modules and not name.startswith("test_reliability_"):
                missing.append(f"{page.relative_to(ROOT)}: {name}")
    assert not missing, "cited as evidence but not found:\n" + "\n".join(missing)


def shown_command_lines(text: str):
    """`curate ...` lines of the code blocks (fenced, or indented four spaces) of a page."""
    fenced = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
        elif fenced or line.startswith("    "):
            stripped = stripped.removeprefix(".venv/bin/")
            if stripped.startswith("curate "):
                yield stripped


def command_of(words: list[str]) -> click.Command | None:
    """The click command a command line runs (a group's default subcommand included), or None."""
    command, rest = main, words
    while isinstance(command, click.Group) and rest and rest[0] in command.commands:
        command, rest = command.commands[rest[0]], rest[1:]
    if isinstance(command, click.Group) and getattr(command, "default_command", ""):
        return command.commands[command.default_command]
    return None if command is main else command


def test_every_command_line_the_docs_show_runs_a_real_command_with_real_options():
    problems = []
    for page in [README, *PAGES]:
        for line in shown_command_lines(page.read_text(encoding="utf-8")):
            words = line.split("#")[0].replace("\\", " ").split()[1:]
            command = command_of(words)
            if command is None:
                problems.append(f"{page.relative_to(ROOT)}: no such command: {line}")
                continue
            options = {o for p in command.params for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]}
            for word in words:
                flag = word.split("=")[0].strip("[]|")
                if flag.startswith("--") and flag not in options | {"--help"}:
                    problems.append(f"{page.relative_to(ROOT)}: {flag} is no option of: {line}")
    assert not problems, "\n".join(problems)


def test_the_docs_name_a_backends_own_setting_as_its_o_setting():
    """Settings of one backend (`retries`, `key-header`, ...) are given as `-o NAME VALUE`, and
    `--help` lists them only there: the docs name them so too (`-o retries 3`, not `--retries 3`),
    except where they say that the old flags still work."""
    from annotate.options import ANNOTATE
    from generate.options import GENERATE
    from scoring.options import SCORE

    flags = {o.spelling for table in (ANNOTATE, GENERATE, SCORE) for o in table if o.backend}
    assert {"--retries", "--parse-retries", "--key-header", "--batch-size"} <= flags
    named = re.compile(r"`(" + "|".join(map(re.escape, sorted(flags, key=len, reverse=True))) + r")[` =]")
    problems = [f"{page.relative_to(ROOT)}:{n}: {line.strip()}"
                for page in [README, *PAGES]
                for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
                if named.search(line) and "old flags" not in line]
    assert not problems, "name these as -o settings:\n" + "\n".join(problems)
