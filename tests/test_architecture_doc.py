"""docs/architecture.md is the map a newcomer reads first: every file, folder and name it cites
exists, so the map cannot drift from the code (issue 38)."""
from __future__ import annotations

import re

from conftest import ROOT

DOC = ROOT / "docs" / "architecture.md"
#: A cited path: a Python file, a folder (ending in /), a JSON/YAML file of ours.
PATH = re.compile(r"`((?:curate|scoring|annotate|generate|schemas|tests|benchmarks|docs|examples)/[\w./*-]*)`")
#: A cited file and the names it defines: "`scoring/run.py` (`Score`)", "`x.py` (`a`, `b`; ...)".
NAMED = re.compile(r"`([\w/]+\.py)` \(([^)]*)\)")


def _defines(text: str, name: str) -> bool:
    return re.search(rf"^\s*(?:def|class)\s+{name}\b|^{name}\s*(?::[^=]*)?=", text, re.M) is not None


def test_every_cited_path_exists():
    missing = []
    for path in PATH.findall(DOC.read_text(encoding="utf-8")):
        if "*" in path:
            continue
        if "NAME" in path:  # the file to write for a new extension: its folder must exist
            path = path.rsplit("/", 1)[0] + "/"
        if not (ROOT / path).exists():
            missing.append(path)
    assert not missing, f"docs/architecture.md cites what does not exist: {missing}"


def test_every_cited_name_is_defined_in_its_file():
    text, missing = DOC.read_text(encoding="utf-8"), []
    for path, inside in NAMED.findall(text):
        folder = (ROOT / path).parent
        for name in re.findall(r"`([A-Za-z_]\w*)`", inside.split(";")[0]):
            candidates = [ROOT / path] + [folder / f"{n}.py" for n in re.findall(r"`(\w+)\.py`", inside)]
            if not any(c.exists() and _defines(c.read_text(encoding="utf-8"), name) for c in candidates):
                missing.append(f"{path}: {name}")
    assert not missing, f"docs/architecture.md names what its file does not define: {missing}"


def test_the_report_sections_are_listed_in_their_order():
    """The sentence listing the sections' ORDER says what the section files say."""
    sections = ROOT / "curate" / "analyses" / "sections"
    order = sorted((int(re.search(r"^ORDER = (\d+)", f.read_text(), re.M).group(1)), f.stem)
                   for f in sections.glob("[a-z]*.py"))
    listed = DOC.read_text(encoding="utf-8").split("their `ORDER` (")[1].split(")")[0]
    assert [(int(n), name) for name, n in re.findall(r"(\w+) (\d+)", listed)] == order


def test_no_flag_the_commands_do_not_have():
    """Every `curate CMD --flag` the page writes is a flag of that command."""
    from click.testing import CliRunner

    from curate.cli import main

    for command, flag in re.findall(r"`curate ([a-z-]+)[^`]*?(--[a-z-]+)", DOC.read_text(encoding="utf-8")):
        shown = CliRunner().invoke(main, [command, "--help"]).output
        assert flag in shown or flag == "--help", f"curate {command} has no {flag}"


def test_the_audit_stages_are_listed_in_their_order():
    """The sentence listing the audit stages' ORDER says what the stage files say."""
    from curate.audit.stages import STAGES

    order = sorted((module.Step.ORDER, name) for name, module in STAGES.modules.items())
    listed = DOC.read_text(encoding="utf-8").split("runs the stages by their `ORDER` values: ")[1].split(".")[0]
    assert [(int(n), name) for name, n in re.findall(r"(\w+) (\d+)", listed)] == order
    assert "\n## Adding a stage to the audit\n" in DOC.read_text(encoding="utf-8")
