"""Releases from real HellaSwag rows: local folder, git repository, and the Hub (stand-in)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pandas as pd
import pytest

from conftest import HELLASWAG, run_cli

RULES_A = """
name: small-a
stages:
  - name: listed-rows
    description: rows named by index
    when: {ids: {row_index: [1, 2, 3]}}
  - name: in-domain
    description: HellaSwag in-domain items
    when: {field: {name: split_type, in: [indomain]}}
"""
RULES_B = RULES_A.replace("[1, 2, 3]", "[2, 3, 4, 5]").replace("name: small-a", "name: small-b")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """40 real HellaSwag rows, and two decisions folders made with different rules."""
    from curate.items.adapters import get_adapter
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions

    base = tmp_path_factory.mktemp("release")
    ws = Ingest(base / "ws", IngestOptions(data=str(HELLASWAG), limit=40), get_adapter("hellaswag")).run()
    for tag, text in (("a", RULES_A), ("b", RULES_B)):
        (base / f"rules-{tag}.yaml").write_text(text)
        Filter(ws, FilterOptions(rules=base / f"rules-{tag}.yaml", out=base / f"dec-{tag}")).run()
    return base


def test_local_release_writes_source_format_card_and_manifest(small, tmp_path):
    from curate.release import Release, verify_release
    from curate.release.options import ReleaseOptions
    from curate.items.store import Workspace

    manifest = Release(small / "ws", ReleaseOptions(decisions=small / "dec-a", name="hs-small", version="0.1.0",
                                                    to=str(tmp_path / "out"))).run()
    folder = tmp_path / "out" / "hs-small" / "0.1.0"
    decisions = pd.read_parquet(small / "dec-a" / "decisions.parquet")
    kept = decisions[decisions["kept"]]
    assert manifest["counts"] == {"items": 40, "kept": len(kept), "removed": 40 - len(kept),
                                  "kept_by_source": {"activitynet": len(kept)}}
    assert manifest["kept"] == kept["item_id"].tolist()
    assert manifest["removed"]["hellaswag/validation/1"][0] == "listed-rows"

    # The data is the source's own rows, unchanged, for exactly the kept items.
    data = pd.read_parquet(folder / "data" / "validation-00000-of-00001.parquet")
    with Workspace.open(small / "ws") as ws:
        raw = ws.raw_rows()
    assert list(data.columns) == list(raw[0])
    assert data["ind"].tolist() == [raw[i]["ind"] for i in kept["row_index"]]
    assert data["endings"].map(list).tolist() == [raw[i]["endings"] for i in kept["row_index"]]

    card = (folder / "README.md").read_text()
    assert card.startswith("---\nlicense: mit\n")
    assert "| 1 | listed-rows | rows named by index | 3 | 3 | 37 |" in card
    assert "zellers2019hellaswag" in card
    on_disk = json.loads((folder / "manifest.json").read_text())
    assert on_disk["rules"]["content"] == RULES_A
    assert on_disk["source"]["provenance"]["sha256"].startswith("sha256:")
    assert set(on_disk["files"]) == {"README.md", "croissant.json", "data/validation-00000-of-00001.parquet",
                                     "lm_eval_task/hs-small.yaml", "lm_eval_task/utils.py"}
    assert verify_release(str(folder)) == []


def test_versions_are_immutable_and_verify_catches_tampering(small, tmp_path):
    out = tmp_path / "out"
    run_cli("release", small / "ws", "--decisions", small / "dec-a", "--name", "hs-small", "--version", "1.0.0",
            "--to", out)
    again = run_cli("release", small / "ws", "--decisions", small / "dec-b", "--name", "hs-small",
                    "--version", "1.0.0", "--to", out, check=False)
    assert again.returncode == 2 and "immutable" in again.stderr
    bad = run_cli("release", small / "ws", "--decisions", small / "dec-b", "--name", "hs-small",
                  "--version", "1.0", "--to", out, check=False)
    assert bad.returncode == 2 and "X.Y.Z" in bad.stderr

    folder = out / "hs-small" / "1.0.0"
    assert run_cli("release", "verify", folder).stdout.startswith("OK")
    card = folder / "README.md"
    card.write_text(card.read_text().replace("| 3 | 3 |", "| 2 | 2 |"))
    (folder / "extra.txt").write_text("not released")
    result = run_cli("release", "verify", folder, check=False)
    assert result.returncode == 1
    assert "FAIL README.md: sha256 differs" in result.stdout
    assert "FAIL extra.txt: not listed in the manifest" in result.stdout
    (folder / "data" / "validation-00000-of-00001.parquet").unlink()
    assert "missing" in run_cli("release", "verify", folder, check=False).stdout


def test_a_release_folder_is_never_written_into_and_verify_checks_what_it_was_asked(small, tmp_path):
    """--to inside an existing release would add files its manifest does not list (breaking it);
    verify --name/--version checks the spelling (a path and a tag are made of them) and that the
    fetched manifest is that release."""
    out = tmp_path / "out"
    for version in ("0.1.0", "0.2.0"):
        run_cli("release", small / "ws", "--decisions", small / "dec-a", "--name", "hs-small", "--version", version,
                "--to", out)
    first = out / "hs-small" / "0.1.0"
    for inside in (first, first / "data"):
        proc = run_cli("release", small / "ws", "--decisions", small / "dec-b", "--name", "nested",
                       "--version", "0.1.0", "--to", inside, check=False)
        assert proc.returncode == 2 and f"is inside the release folder {first}" in proc.stderr, proc.stderr
    assert run_cli("release", "verify", first).stdout.startswith("OK")
    for name, version in (("hs-small", "0.1.0/../0.2.0"), ("../out/hs-small", "0.1.0")):
        proc = run_cli("release", "verify", out, "--name", name, "--version", version, check=False)
        assert proc.returncode == 2 and ("use X.Y.Z" in proc.stderr or "lowercase ASCII" in proc.stderr), proc.stderr
    shutil.copytree(out / "hs-small" / "0.2.0", out / "hs-small" / "9.9.9")
    proc = run_cli("release", "verify", out, "--name", "hs-small", "--version", "9.9.9", check=False)
    assert proc.returncode == 1 and "names release hs-small 0.2.0, not hs-small 9.9.9" in proc.stdout, proc.stdout
    assert run_cli("release", "verify", out, "--name", "hs-small", "--version", "0.2.0").stdout.startswith("OK")


def test_released_files_are_readable_by_others_under_the_usual_umask(small, tmp_path):
    """Atomic writes go through a temporary file (mode 0600) and temporary folders (0700):
    what lands must have the modes any new file or folder gets, as a team shares releases,
    workspaces and reports."""
    old = os.umask(0o022)
    try:
        run_cli("init", tmp_path / "ws", "--benchmark", "hellaswag", "--data", HELLASWAG, "--limit", "5")
        run_cli("release", small / "ws", "--decisions", small / "dec-a", "--name", "hs-small", "--version", "0.1.0",
                "--to", tmp_path / "out")
        run_cli("items", tmp_path / "ws", "--out", tmp_path / "items.csv")
        existing = tmp_path / "items.jsonl"
        existing.write_text("")
        existing.chmod(0o640)
        run_cli("items", tmp_path / "ws", "--out", existing)
    finally:
        os.umask(old)
    assert (tmp_path / "ws").stat().st_mode & 0o777 == 0o755
    release = tmp_path / "out" / "hs-small" / "0.1.0"
    for path in [release, *release.rglob("*")]:
        assert path.stat().st_mode & 0o777 == (0o755 if path.is_dir() else 0o644), path
    assert (tmp_path / "items.csv").stat().st_mode & 0o777 == 0o644
    assert existing.stat().st_mode & 0o777 == 0o640  # a file written over keeps its mode


def test_diff_lists_added_and_removed_items_with_reasons(small, tmp_path):
    out = tmp_path / "out"
    for version, dec in (("0.1.0", "dec-a"), ("0.2.0", "dec-b")):
        run_cli("release", small / "ws", "--decisions", small / dec, "--name", "hs-small", "--version", version,
                "--to", out)
    a, b = out / "hs-small" / "0.1.0", out / "hs-small" / "0.2.0"
    from curate.release import diff_releases
    d = diff_releases(str(a), str(b / "manifest.json"))
    added = {r["item_id"]: r["reasons"] for r in d["added"]}
    removed = {r["item_id"]: r["reasons"] for r in d["removed"]}
    in_domain = set(pd.read_parquet(small / "dec-a" / "decisions.parquet").query("first_stage == 'in-domain'")["item_id"])
    # Row 1 leaves the list in B; rows 4 and 5 join it (unless in-domain removes them anyway).
    assert "hellaswag/validation/1" in added or "hellaswag/validation/1" in in_domain
    if "hellaswag/validation/1" in added:
        assert added["hellaswag/validation/1"] == ["listed-rows"]
    for row in (4, 5):
        item = f"hellaswag/validation/{row}"
        assert (item in removed and removed[item][0] == "listed-rows") or item in in_domain
    assert d["rules_changed"] and not d["source_changed"]
    text = run_cli("release", "diff", a, b).stdout
    assert text.splitlines()[0].startswith("hs-small 0.1.0 -> hs-small 0.2.0: +")
    assert "(rules changed)" in text


def test_release_refuses_decisions_that_do_not_add_up(small, tmp_path):
    dec = tmp_path / "dec"
    shutil.copytree(small / "dec-a", dec)
    summary = json.loads((dec / "summary.json").read_text())
    summary["stages"][0]["removed_here"] += 1
    (dec / "summary.json").write_text(json.dumps(summary))
    result = run_cli("release", small / "ws", "--decisions", dec, "--name", "x", "--version", "0.1.0",
                     "--to", tmp_path / "out", check=False)
    assert result.returncode == 2 and "do not follow from decisions.parquet" in result.stderr
    assert not (tmp_path / "out" / "x").exists()


def git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_git_target_makes_one_commit_and_a_tag(small, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "tests@example.com")
    git(repo, "config", "user.name", "tests")
    (repo / "notes.txt").write_text("unrelated work in progress\n")  # must not be swept into the commit
    result = run_cli("release", small / "ws", "--decisions", small / "dec-a", "--name", "hs-small",
                     "--version", "0.1.0", "--to", f"git:{repo}")
    assert "tag hs-small-v0.1.0" in result.stdout
    assert git(repo, "rev-list", "--count", "HEAD") == "1"
    assert git(repo, "rev-parse", "hs-small-v0.1.0^{commit}") == git(repo, "rev-parse", "HEAD")
    committed = git(repo, "show", "--name-only", "--format=", "HEAD").splitlines()
    assert sorted(committed) == ["hs-small/0.1.0/README.md", "hs-small/0.1.0/croissant.json",
                                 "hs-small/0.1.0/data/validation-00000-of-00001.parquet",
                                 "hs-small/0.1.0/lm_eval_task/hs-small.yaml", "hs-small/0.1.0/lm_eval_task/utils.py",
                                 "hs-small/0.1.0/manifest.json"]
    assert "?? notes.txt" in git(repo, "status", "--porcelain")
    # Verify what the tag holds (git archive), not the work tree.
    assert run_cli("release", "verify", f"git:{repo}", "--name", "hs-small", "--version", "0.1.0").stdout.startswith("OK")
    again = run_cli("release", small / "ws", "--decisions", small / "dec-b", "--name", "hs-small",
                    "--version", "0.1.0", "--to", f"git:{repo}", check=False)
    assert again.returncode == 2 and "tag hs-small-v0.1.0 exists" in again.stderr
    assert git(repo, "rev-list", "--count", "HEAD") == "1"


@pytest.fixture
def hub():
    """The Hub stand-in from tests/hub_standin.py; see its docstring for what it covers."""
    from hub_standin import running

    with running() as (fake, env):
        yield fake, env


def release_to_hub(small, env, version, dec="dec-a", check=True):
    return run_cli("release", small / "ws", "--decisions", small / dec, "--name", "hs-small", "--version", version,
                   "--to", "hf:benchcurate/hs-small", env=env, check=check)


def test_hub_target_commits_tags_and_verifies_from_the_tag(small, hub):
    fake, env = hub
    out = release_to_hub(small, env, "0.1.0")
    repo = fake.repos["benchcurate/hs-small"]
    oid = repo["tags"]["hs-small-v0.1.0"]
    assert oid == repo["main"] and f"commit {oid[:12]}" in out.stdout
    files = repo["commits"][oid]
    assert {"README.md", "manifest.json", "data/validation-00000-of-00001.parquet"} <= set(files)
    manifest = json.loads(files["manifest.json"])
    assert manifest["name"] == "hs-small" and manifest["version"] == "0.1.0"

    # A second version replaces the files at the root; the first stays reachable by its tag.
    release_to_hub(small, env, "0.2.0", dec="dec-b")
    assert repo["tags"]["hs-small-v0.1.0"] == oid != repo["main"]
    again = release_to_hub(small, env, "0.1.0", check=False)
    assert again.returncode == 2 and "exists" in again.stderr

    verify = ["release", "verify", "hf:benchcurate/hs-small", "--name", "hs-small", "--version", "0.1.0"]
    assert run_cli(*verify, env=env).stdout.startswith("OK")
    fake.corrupt["README.md"] = files["README.md"].replace(b"listed-rows", b"listed-rowz")
    tampered = run_cli(*verify, env=env, check=False)
    assert tampered.returncode == 1 and "FAIL README.md: sha256 differs" in tampered.stdout


def test_failed_hub_push_leaves_no_release(small, hub):
    fake, env = hub
    release_to_hub(small, env, "0.1.0")
    repo = fake.repos["benchcurate/hs-small"]
    before = dict(repo["tags"])

    # Someone else commits between our read of main and our commit: parent_commit refuses it.
    fake.race = True
    failed = release_to_hub(small, env, "0.2.0", dec="dec-b", check=False)
    fake.race = False
    assert failed.returncode == 2 and "hf:benchcurate/hs-small" in failed.stderr
    assert repo["tags"] == before
    assert "other.txt" in repo["commits"][repo["main"]]                     # only the other writer's commit
    assert json.loads(repo["commits"][repo["main"]]["manifest.json"])["version"] == "0.1.0"

    # The commit lands but what the tag serves does not verify: the tag is taken back (and main
    # put back: tests/test_reliability_releases.py).
    fake.corrupt_next["README.md"] = b"something else"
    failed = release_to_hub(small, env, "0.2.0", dec="dec-b", check=False)
    assert failed.returncode == 2 and "does not verify" in failed.stderr
    assert "hs-small-v0.2.0" not in repo["tags"]
    fake.corrupt_next.clear()
    release_to_hub(small, env, "0.2.0", dec="dec-b")                         # a clean retry succeeds
    assert "hs-small-v0.2.0" in repo["tags"]
