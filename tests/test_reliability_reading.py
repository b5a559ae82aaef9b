"""Files handed to a command are read within bounds (issue 26): JSON nested thousands of levels
deep is one error line in every command that reads JSON, configuration files are refused past
their size limit without being read to the end, and `check-config` refuses every output folder
that `curate audit` would refuse later (after paying for annotation and scoring)."""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, one_line_error, run_cli, small_workspace

RULES = """
name: small
stages:
  - name: listed-rows
    when: {ids: {row_index: [1, 2]}}
"""


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- nested JSON --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """(base folder, workspace, decisions, release folder): 5 real items, one filter, one release."""
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions
    from curate.release import Release
    from curate.release.options import ReleaseOptions

    base = tmp_path_factory.mktemp("reading")
    ws = small_workspace(base / "ws", 5)
    (base / "rules.yaml").write_text(RULES)
    Filter(ws, FilterOptions(rules=base / "rules.yaml", out=base / "dec")).run()
    Release(ws, ReleaseOptions(decisions=base / "dec", name="small", version="0.1.0", to=str(base / "rel"))).run()
    return base, ws, base / "dec", base / "rel" / "small" / "0.1.0"


def nested_case(command: str, depth: int, base: Path, ws: Path, dec: Path, rel: Path, tmp: Path) -> tuple[list, str]:
    """(curate arguments, the file the error must name) for ``command`` fed JSON ``depth`` deep."""
    if command == "import-review jsonl":
        path = tmp / "verdicts.jsonl"
        path.write_text('{"item_id": "x", "labels": ' + deep(depth) + "}\n")
        return ["import-review", ws, "--format", "jsonl", "--file", path, "--reviewer", "dave"], "verdicts.jsonl, row 0"
    if command == "import-review argilla":
        path = tmp / "records.json"
        path.write_text('[{"id": "x", "responses": ' + deep(depth) + "}]")
        return ["import-review", ws, "--format", "argilla", "--file", path], "records.json"
    if command == "release":
        nested = shutil.copytree(dec, tmp / "dec")
        summary = json.loads((dec / "summary.json").read_text())
        (nested / "summary.json").write_text(json.dumps(summary)[:-1] + ', "x": ' + deep(depth) + "}")
        return (["release", ws, "--decisions", nested, "--name", "small", "--version", "0.2.0", "--to", tmp / "out"],
                "summary.json")
    manifest = json.loads((rel / "manifest.json").read_text())
    folder = shutil.copytree(rel, tmp / "rel")
    (folder / "manifest.json").write_text(json.dumps(manifest)[:-1] + ', "x": ' + deep(depth) + "}")
    if command == "release diff":
        return ["release", "diff", rel, folder / "manifest.json"], "manifest.json"
    return ["release", "verify", folder], "manifest.json"


@pytest.mark.parametrize("depth", [500, 5_000, 100_000])
@pytest.mark.parametrize("command", ["import-review jsonl", "import-review argilla", "release", "release diff",
                                     "release verify"])
def test_json_nested_thousands_deep_is_one_line_in_every_command(released, tmp_path, command, depth):
    """500 levels is read by Python's JSON reader (and refused by the depth limit), 5,000 and
    100,000 are beyond it: each is one line naming the file, and nothing is written."""
    args, where = nested_case(command, depth, *released, tmp_path)
    one_line_error(run_cli(*args, check=False), where, "nests values deeper than can be read")
    assert not (tmp_path / "out").exists()
    from annotate.store import open_annotations, read_annotations
    with open_annotations(released[1]) as ws:
        assert read_annotations(ws).empty


def test_json_at_the_depth_limit_is_read():
    from curate.core.errors import InputError
    from curate.core.reading import MAX_DEPTH, loads

    assert loads(deep(MAX_DEPTH), "f.json") is not None
    with pytest.raises(InputError, match="f.json: nests values deeper than can be read: more than 100 levels"):
        loads(deep(MAX_DEPTH + 1), "f.json")
    with pytest.raises(InputError, match=r"f.jsonl, row 2: line 3 nests values deeper"):
        loads('{"a": ' + deep(MAX_DEPTH) + "}", "f.jsonl", row=2, line=3)


# --- size limits --------------------------------------------------------------------------------

PROBE = """
import json, sys, time
from pathlib import Path
from curate.audit.config import read_yaml
from curate.core.errors import InputError
from curate.filter.kinds import rules_validator
from curate.filter.rules import load_rules
rules_validator()  # built once per process (every condition kind imported): not part of a read's time
out = {}
for path in sys.argv[1:]:
    for name, read in (("rules", load_rules), ("config", read_yaml)):
        start = time.perf_counter()
        try:
            read(Path(path))
            said = "accepted"
        except InputError as exc:
            said = str(exc)
        out[f"{name} {Path(path).name}"] = [said, time.perf_counter() - start]
print(json.dumps(out))
"""


def _memory_cap():  # a reader that reads to the end fails on this cap instead of taking the machine
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_config_files_past_their_size_limit_are_refused_at_once(tmp_path):
    """/dev/zero (endless), a file one byte over the 1 MiB limit and a FIFO that nobody writes
    to, as a rules file and as an audit config: refused within a second, not read to the end
    (OOM-killed, or minutes of YAML parsing for a 300 MB file) or waited on."""
    from curate.core.reading import CONFIG_LIMIT

    big = tmp_path / "big.yaml"
    big.write_text("name: big\nstages: []\n#" + "x" * (CONFIG_LIMIT - 21))
    assert big.stat().st_size == CONFIG_LIMIT + 1
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-c", PROBE, "/dev/zero", str(big), str(fifo)], capture_output=True,
                          text=True, timeout=120, preexec_fn=_memory_cap, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout)
    for name, kind in (("rules", "a rules file"), ("config", "an audit config")):
        for path in ("/dev/zero", str(big)):
            said, seconds = found[f"{name} {Path(path).name}"]
            assert said == f"{path}: is larger than 1 MiB, the size limit of {kind}", said
            assert seconds < 1.0, (name, path, seconds)
        said, seconds = found[f"{name} fifo.yaml"]  # read as empty: no rules, no settings
        assert said != "accepted" and seconds < 1.0, (said, seconds)
    one_line_error(run_cli("filter", tmp_path, "--rules", "/dev/zero", "--out", tmp_path / "out", check=False),
                   "/dev/zero: is larger than 1 MiB, the size limit of a rules file")
    for command in ("check-config", "audit"):
        one_line_error(run_cli(command, big, check=False), "big.yaml: is larger than 1 MiB, the size limit of an audit config")


def test_a_review_id_list_is_read_within_bounds(tmp_path, monkeypatch):
    """`curate review --queue ids:FILE`: a file that is not UTF-8 (a traceback before) or over
    the limit (lowered here) is one InputError naming it, read no further."""
    from curate.core.errors import InputError
    from curate.review import queues

    latin = tmp_path / "ids.txt"
    latin.write_bytes("caf\xe9/validation/1\n".encode("latin-1"))
    with pytest.raises(InputError, match="ids.txt: not UTF-8 text: byte 0xe9 at line 1"):
        queues.id_list(None, latin)
    monkeypatch.setattr(queues, "DOCUMENT_LIMIT", 10, raising=False)
    (tmp_path / "long.txt").write_text("x" * 11)
    with pytest.raises(InputError, match="long.txt: is larger than 10 bytes, the size limit of a list of item ids"):
        queues.id_list(None, tmp_path / "long.txt")


# --- check-config refuses what audit would refuse -------------------------------------------

@pytest.fixture
def config(tmp_path):
    """The demo config with its inputs absolute and its outputs under tmp_path/out (curate runs in
    tmp_path): a plan check-config passes."""
    from curate import demo
    from curate.audit.config import DEFAULT_CONFIG, read_yaml

    data = read_yaml(DEFAULT_CONFIG)
    data["benchmark"]["path"] = str(demo.benchmark_path())
    data["filter"]["rules"] = str(DEFAULT_CONFIG.parent / data["filter"]["rules"])
    data.update(workspace="out/ws", analyze={"out": "out/report"})
    data["filter"]["out"] = "out/dec"
    data["release"]["target"] = {"local": "out/rel"}
    return data


def _outputs(**paths):
    """Set output paths: workspace, analyze (analyze.out), filter (filter.out), local, git."""
    def change(data, tmp):
        for key, value in paths.items():
            if key == "workspace":
                data["workspace"] = value
            elif key in ("local", "git"):
                data["release"]["target"] = {key: value}
            else:
                data[key]["out"] = value
    return change


def _existing(path, what="file", **paths):
    """Outputs set as ``paths``, and ``path`` (under tmp_path) made first: a file, a folder holding
    a stranger's file, or a folder that is no git repository."""
    def change(data, tmp):
        _outputs(**paths)(data, tmp)
        target = tmp / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if what == "file":
            target.write_text("not a folder\n")
        else:
            target.mkdir()
            if what == "foreign":
                (target / "notes.txt").write_text("someone else's\n")
    return change


def _no_license(data, tmp):
    data["release"].pop("license")


CLASHES = [  # the filter runs before the analysis: of the two, analyze.out is named (it comes second)
    ("filter.out equals analyze.out", _outputs(filter="out/report"), "analyze.out", "the same folder as filter.out"),
    ("filter.out inside analyze.out", _outputs(filter="out/report/dec"), "analyze.out", "holds filter.out"),
    ("analyze.out inside filter.out", _outputs(analyze="out/dec/report"), "analyze.out", "inside filter.out"),
    ("workspace inside the report", _outputs(workspace="out/report/ws"), "analyze.out", "holds workspace"),
    ("workspace inside the decisions", _outputs(workspace="out/dec/ws"), "filter.out", "holds workspace"),
    ("workspace inside the release target", _outputs(workspace="out/rel/ws"), "release.target.local",
     "holds workspace"),
    ("release target equals the workspace", _outputs(local="out/ws"), "release.target.local",
     "the same folder as workspace"),
    ("release target inside the decisions", _outputs(local="out/dec/rel"), "release.target.local",
     "inside filter.out"),
    ("release target holds the report", _outputs(analyze="out/r/report", local="out/r"), "release.target.local",
     "holds analyze.out"),
    ("git target equals the report", _existing("out/report", "folder", git="out/report"), "release.target.git",
     "the same folder as analyze.out"),
    ("analyze.out an existing file", _existing("out/report"), "analyze.out", "exists and is not a folder"),
    ("filter.out an existing file", _existing("out/dec"), "filter.out", "exists and is not a folder"),
    ("workspace an existing file", _existing("out/ws"), "workspace", "is a file"),
    ("release target an existing file", _existing("out/rel"), "release.target.local", "exists and is not a folder"),
    ("a file where analyze.out needs a folder", _existing("out/x", analyze="out/x/report"), "analyze.out",
     "out/x is a file, not a folder"),
    ("a stranger's analyze.out", _existing("out/report", "foreign"), "analyze.out",
     "is not an earlier `curate analyze` report (it holds notes.txt); give analyze.out a new or empty folder"),
    ("a stranger's filter.out", _existing("out/dec", "foreign"), "filter.out",
     "is not an earlier `curate filter` output (it holds notes.txt)"),
    ("a stranger's workspace folder", _existing("out/ws", "foreign"), "workspace", "already exists and is not empty"),
    ("git target no repository", _existing("out/repo", "folder", git="out/repo"), "release.target.git",
     "not a git work tree"),
    ("git target missing", _outputs(git="out/repo"), "release.target.git", "no such file or folder"),
    ("release without a license", _no_license, "release.license", "the license of benchmark 'demo' is not known"),
]


@pytest.mark.parametrize("why, change, field, message", CLASHES, ids=[c[0] for c in CLASHES])
def test_check_config_refuses_every_output_the_audit_would_refuse(tmp_path, config, why, change, field, message):
    """Each case passed check-config ("plan complete") or was refused by `audit` only at its
    stage, after annotation and scoring were paid for. Now check-config names it, and `audit`
    refuses it before its first stage (load_config is its first step)."""
    from curate.audit.config import load_config
    from curate.core.errors import InputError

    change(config, tmp_path)
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    proc = run_cli("check-config", path, cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"audit.yaml, field '{field}': " in proc.stderr and message in proc.stderr, proc.stderr
    assert "plan complete" not in proc.stdout
    with pytest.raises(InputError) as refused:
        load_config(path, cwd=tmp_path)
    assert refused.value.field == field and message in refused.value.detail, refused.value
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing made


def test_the_base_config_of_the_clash_cases_passes(tmp_path, config):
    path = tmp_path / "audit.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    proc = run_cli("check-config", path, cwd=tmp_path)
    assert "plan complete" in proc.stdout, proc.stderr
