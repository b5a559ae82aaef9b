"""The constraints file pins what CI passed on, and pyproject.toml's ranges must admit it.

`make install` installs with `-c constraints.txt`, so a fresh machine gets the versions the
suite last passed on; these tests catch a range edited without renewing the pins (`make lock`).
"""
from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def pins() -> dict[str, Version]:
    out = {}
    for n, line in enumerate((ROOT / "constraints.txt").read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"constraints.txt line {n}: {line!r} is not an exact pin NAME==VERSION"
        key = canonicalize_name(name)
        assert key not in out, f"constraints.txt line {n}: {name} is pinned twice"
        out[key] = Version(version)
    return out


def requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        listed += extra
    return [Requirement(r) for r in listed]


def test_pyproject_ranges_admit_every_pin():
    pinned = pins()
    for req in requirements():
        key = canonicalize_name(req.name)
        assert key in pinned, f"{req.name} is a dependency in pyproject.toml but not pinned in constraints.txt"
        assert req.specifier.contains(pinned[key], prereleases=True), \
            f"constraints.txt pins {req.name}=={pinned[key]}, outside pyproject.toml's {req.specifier}"


def test_makefile_installs_with_the_constraints():
    makefile = (ROOT / "Makefile").read_text()
    install = [line for line in makefile.splitlines() if "pip install" in line and "$(PY)" in line
               and "--no-deps" not in line and "pip==" not in line]
    assert install and all("-c $(CONSTRAINTS)" in line for line in install), install


def test_installed_direct_dependencies_match_the_pins():
    """The environment the tests run in is the pinned one (torch's local +cpu label aside)."""
    pinned = pins()
    for req in requirements():
        installed = Version(metadata.version(req.name))
        assert Version(installed.public) == pinned[canonicalize_name(req.name)], \
            f"{req.name} {installed} is installed but constraints.txt pins {pinned[canonicalize_name(req.name)]}"
