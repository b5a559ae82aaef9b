"""Reliability, releases (issue 14, items 5 and 10): verify checks the manifest itself and every
file; git releases interrupted by kill -9 are finished by a retry; a Hub release that fails its
check leaves main as it was; names and versions are validated strictly; cards and manifests
never carry a local path."""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pandas as pd
import pytest

from conftest import HELLASWAG, one_line_error, run_cli, unwritable_place
from test_release import git, hub, release_to_hub, small  # noqa: F401  (fixtures and helpers)

from curate.release.manifest import content_digest


@pytest.fixture
def released(small, tmp_path):  # noqa: F811
    out = tmp_path / "out"
    run_cli("release", small / "ws", "--decisions", small / "dec-a", "--name", "hs-small", "--version", "1.0.0",
            "--to", out)
    folder = out / "hs-small" / "1.0.0"
    (folder / "manifest.json").chmod(0o644)
    return folder


def edit_manifest(folder, change, *, redigest=False):
    path = folder / "manifest.json"
    m = json.loads(path.read_text())
    change(m)
    if redigest:  # an editor who also knows how to recompute the digest
        m["content_sha256"] = content_digest(m)
    path.write_text(json.dumps(m, indent=1))


def verify_fails(folder, *expected):
    result = run_cli("release", "verify", folder, check=False)
    assert result.returncode == 1, result.stdout
    for text in expected:
        assert text in result.stdout, result.stdout
    assert "Traceback" not in result.stderr


def swap_kept_and_removed(m):
    gone, back = m["kept"][0], next(iter(m["removed"]))
    m["kept"][0] = back
    m["removed"][gone] = m["removed"].pop(back)


@pytest.mark.parametrize("case, change, redigest, expected", [
    ("kept ids", swap_kept_and_removed, False, "content differs from its recorded digest"),
    ("kept ids", lambda m: m["kept"].append("hellaswag/validation/999"), True, "1 listed ids are not items of hellaswag/validation/0..39"),
    ("kept ids", lambda m: m["kept"].__setitem__(0, "hellaswag/validation/1"), True, "1 ids are both kept and removed"),
    ("rules text", lambda m: m["rules"].__setitem__("content", m["rules"]["content"] + "# x\n"), False,
     "content differs from its recorded digest"),
    ("rules text", lambda m: m["rules"].__setitem__("content", m["rules"]["content"] + "# x\n"), True,
     "rules.content does not hash to rules.sha256"),
    ("counts", lambda m: m["counts"].__setitem__("kept", m["counts"]["kept"] + 1), False,
     "content differs from its recorded digest"),
    ("counts", lambda m: m["stages"][0].__setitem__("removed_here", 2), True, "stage 'listed-rows': the table says"),
    ("files", lambda m: m["files"].__setitem__("../../etc/passwd", {"sha256": "sha256:" + "0" * 64, "bytes": 1}),
     True, "files lists paths outside the release: ../../etc/passwd"),
])
def test_verify_checks_the_manifest_against_itself(released, case, change, redigest, expected):
    assert run_cli("release", "verify", released).stdout.startswith("OK")
    edit_manifest(released, change, redigest=redigest)
    verify_fails(released, f"FAIL manifest.json: {expected}")


def test_verify_checks_the_data_rows_against_the_kept_ids(released, small, tmp_path):  # noqa: F811
    import pandas as pd
    data = released / "data" / "validation-00000-of-00001.parquet"
    frame = pd.read_parquet(data)
    frame.iloc[:-1].to_parquet(data, index=False)
    edit_manifest(released, lambda m: m["files"][data.relative_to(released).as_posix()].update(
        sha256=__import__("curate.items.sources", fromlist=["x"]).file_sha256(data), bytes=data.stat().st_size),
        redigest=True)
    verify_fails(released, f"rows, but the manifest keeps {len(frame)} items")


@pytest.mark.parametrize("hidden", [".cache/huggingface/x.lock", ".git/config", "data/.extra.parquet"])
def test_files_under_hidden_folders_are_not_ignored(released, hidden):
    (released / hidden).parent.mkdir(parents=True, exist_ok=True)
    (released / hidden).write_text("smuggled")
    verify_fails(released, f"FAIL {hidden}: not listed in the manifest")


def new_repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "tests@example.com")
    git(repo, "config", "user.name", "tests")
    return repo


def kill_curate_in_hook(repo, hook, status=0):
    """A git hook that kills the `curate` process running `git commit` (kill -9 of git's parent):
    a real interruption at that point of a release. A pre-commit hook exiting 1 then stops the
    commit too, as if it had never started."""
    path = repo / ".git" / "hooks" / hook
    path.write_text(f"#!/bin/sh\nkill -9 $(awk '{{print $4}}' /proc/$PPID/stat)\nexit {status}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def git_release(small, repo, dec="dec-a", check=True, env=None):  # noqa: F811
    return run_cli("release", small / "ws", "--decisions", small / dec, "--name", "hs-small", "--version", "0.1.0",
                   "--to", f"git:{repo}", check=check, env=env)


def release_path(repo, sub):
    """The repository itself, or a folder inside it (`--to git:repo/sub`)."""
    (repo / sub).mkdir(exist_ok=True)
    return repo / sub if sub else repo


@pytest.mark.parametrize("sub", ["", "sub"])
def test_git_release_killed_between_commit_and_tag_is_finished_by_a_retry(small, tmp_path, sub):  # noqa: F811
    repo = new_repo(tmp_path)
    to = release_path(repo, sub)
    hook = kill_curate_in_hook(repo, "post-commit")
    killed = git_release(small, to, check=False)
    assert killed.returncode == -9
    assert git(repo, "rev-list", "--count", "HEAD") == "1" and git(repo, "tag") == ""   # committed, not tagged
    hook.unlink()
    other = git_release(small, to, dec="dec-b", check=False)       # other decisions: refused, named
    assert other.returncode == 2 and "holds a different release" in other.stderr and git(repo, "tag") == ""
    retry = git_release(small, to)
    assert "finished an interrupted release" in retry.stdout
    assert git(repo, "rev-list", "--count", "HEAD") == "1"
    assert git(repo, "rev-parse", "hs-small-v0.1.0^{commit}") == git(repo, "rev-parse", "HEAD")
    assert run_cli("release", "verify", f"git:{to}", "--name", "hs-small", "--version", "0.1.0").stdout.startswith("OK")


@pytest.mark.parametrize("sub", ["", "sub"])
def test_git_release_killed_before_its_commit_is_redone_by_a_retry(small, tmp_path, sub):  # noqa: F811
    repo = new_repo(tmp_path)
    to = release_path(repo, sub)
    hook = kill_curate_in_hook(repo, "pre-commit", status=1)
    assert git_release(small, to, check=False).returncode == -9
    prefix = f"{sub}/" if sub else ""
    assert f"A  {prefix}hs-small/0.1.0/manifest.json" in git(repo, "status", "--porcelain")   # staged, not committed
    hook.unlink()
    git_release(small, to)
    assert git(repo, "rev-list", "--count", "HEAD") == "1" and git(repo, "tag") == "hs-small-v0.1.0"
    assert git(repo, "status", "--porcelain") == ""
    assert run_cli("release", "verify", f"git:{to}", "--name", "hs-small", "--version", "0.1.0").stdout.startswith("OK")


def kill_after_first_copied_file(tmp_path):
    """Environment for a `curate` that kills itself (kill -9) right after copying the release's
    first file (README.md) to its destination: a real interruption in the middle of the copy."""
    hooks = tmp_path / "kill-hook"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(
        "import os, shutil, signal\n"
        "_copyfile = shutil.copyfile\n"
        "def copyfile(src, dst, **kw):\n"
        "    _copyfile(src, dst, **kw)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "shutil.copyfile = copyfile\n")
    from conftest import ROOT
    return {"PYTHONPATH": f"{hooks}{os.pathsep}{ROOT}"}


@pytest.mark.parametrize("kind", ["git", "git-sub", "local"])
def test_a_release_killed_in_the_middle_of_its_copy_is_redone_and_its_leftovers_removed(small, tmp_path, kind):  # noqa: F811
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    repo = new_repo(tmp_path)
    to = release_path(repo, "sub" if kind == "git-sub" else "")
    dest = f"git:{to}" if kind.startswith("git") else str(tmp_path / "out")
    home = to if kind.startswith("git") else tmp_path / "out"

    def release(env=None, check=True):
        return run_cli("release", small / "ws", "--decisions", small / "dec-a", "--name", "hs-small", "--version",
                       "0.1.0", "--to", dest, env={"TMPDIR": str(tmpdir), **(env or {})}, check=check)

    assert release(kill_after_first_copied_file(tmp_path), check=False).returncode == -9
    partial = list((home / "hs-small").glob(".0.1.0.*.partial"))
    assert len(partial) == 1 and [p.name for p in partial[0].iterdir()] == ["README.md"]     # one file copied
    assert not (home / "hs-small" / "0.1.0").exists()
    assert [p.name for p in tmpdir.iterdir() if p.name.startswith("benchcurate-release-")]   # staging left too
    release()
    assert sorted(p.name for p in (home / "hs-small").iterdir()) == ["0.1.0"]                 # leftovers removed
    assert not [p for p in tmpdir.iterdir() if p.name.startswith("benchcurate-release-")]
    if kind.startswith("git"):
        assert git(repo, "tag") == "hs-small-v0.1.0" and git(repo, "status", "--porcelain") == ""
        assert run_cli("release", "verify", dest, "--name", "hs-small", "--version", "0.1.0").stdout.startswith("OK")
    else:
        assert run_cli("release", "verify", home / "hs-small" / "0.1.0").stdout.startswith("OK")


def test_leftovers_are_judged_by_who_holds_them_not_only_by_the_pid_in_their_name(tmp_path):
    """A leftover copy named after a pid that now belongs to another process (reused) is removed
    once it has sat unclaimed for STALE_AFTER_S; a copy held by a live release is kept even where
    its pid means nothing here (another pid namespace sharing the disk), and removed once that
    process has ended."""
    import subprocess
    import sys
    import time

    from curate.core.lock import STALE_AFTER_S, _pid_alive, remove_stale

    pattern = r"\.0\.1\.0\.(\d+)\.[a-z0-9_]+\.partial"
    reused = tmp_path / f".0.1.0.{os.getppid()}.abc.partial"  # a live process that is no release
    recent = tmp_path / f".0.1.0.{os.getppid()}.def.partial"
    for folder in (reused, recent):
        folder.mkdir()
    old = time.time() - STALE_AFTER_S - 5
    os.utime(reused, (old, old))
    dead_pid = next(p for p in range(4_000_000, 4_100_000) if not _pid_alive(p))
    elsewhere = tmp_path / f".0.1.0.{dead_pid}.ghi.partial"
    elsewhere.mkdir()
    code = ("import sys\nfrom pathlib import Path\nfrom curate.release.targets import claimed\n"
            "with claimed(Path(sys.argv[1])):\n    print('held', flush=True)\n    sys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(elsewhere)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent)
    try:
        assert holder.stdout.readline() == "held\n"
        remove_stale(tmp_path, pattern)
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([recent.name, elsewhere.name])
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    remove_stale(tmp_path, pattern)
    assert [p.name for p in tmp_path.iterdir()] == [recent.name]  # its pid alive, and too young to judge


@pytest.mark.parametrize("what", ["a folder of someone else", "a committed folder"])
def test_git_release_refuses_a_folder_it_did_not_leave(small, tmp_path, what):  # noqa: F811
    repo = new_repo(tmp_path)
    (repo / "hs-small" / "0.1.0").mkdir(parents=True)
    (repo / "hs-small" / "0.1.0" / "README.md").write_text("mine\n")      # no manifest of this release
    if what == "a committed folder":
        git(repo, "add", ".")
        git(repo, "commit", "-qm", "work")
    result = git_release(small, repo, check=False)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "exists and is not an unfinished release of hs-small 0.1.0" in result.stderr
    assert (repo / "hs-small" / "0.1.0" / "README.md").read_text() == "mine\n" and git(repo, "tag") == ""


def test_git_release_commits_the_data_file_a_gitignore_matches(small, tmp_path):  # noqa: F811
    repo = new_repo(tmp_path)
    (repo / ".gitignore").write_text("*.parquet\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore parquet files")
    git_release(small, repo)
    committed = git(repo, "ls-tree", "-r", "--name-only", "hs-small-v0.1.0", "--", "hs-small").splitlines()
    assert committed == ["hs-small/0.1.0/README.md", "hs-small/0.1.0/croissant.json",
                         "hs-small/0.1.0/data/validation-00000-of-00001.parquet",
                         "hs-small/0.1.0/lm_eval_task/hs-small.yaml", "hs-small/0.1.0/lm_eval_task/utils.py",
                         "hs-small/0.1.0/manifest.json"]
    assert run_cli("release", "verify", f"git:{repo}", "--name", "hs-small", "--version", "0.1.0").stdout.startswith("OK")


def test_git_release_whose_commit_does_not_hold_the_release_is_undone(small, tmp_path):  # noqa: F811
    repo = new_repo(tmp_path)
    git(repo, "config", "filter.cut.clean", "head -c 100")                  # stores 100 bytes of each parquet
    (repo / ".gitattributes").write_text("*.parquet filter=cut\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")
    before = git(repo, "rev-parse", "HEAD")
    result = git_release(small, repo, check=False)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "the commit does not hold the release as built" in result.stderr and "Traceback" not in result.stderr
    assert git(repo, "rev-parse", "HEAD") == before and git(repo, "tag") == ""
    assert not (repo / "hs-small").exists() and git(repo, "status", "--porcelain") == ""  # no empty NAME/ left


def test_two_git_releases_into_one_repository_at_once_are_refused(small, tmp_path):  # noqa: F811
    """Found by an audit: two releases into one repository at once could fail on git's index lock,
    leave staged deletions, or undo the other run's commit. A release holds the repository (its
    .git folder) from its check to its tag; a second one is one line and changes nothing."""
    from curate.core.lock import folder_lock
    repo = new_repo(tmp_path)
    with folder_lock(repo / ".git", command="release"):
        result = git_release(small, repo, check=False)
    one_line_error(result, f"{repo / '.git'}: another `curate release` is writing into this folder; wait for it "
                           "to finish, or release into another repository")
    assert git(repo, "status", "--porcelain") == "" and git(repo, "tag") == ""
    git_release(small, repo)
    assert git(repo, "tag") == "hs-small-v0.1.0" and git(repo, "status", "--porcelain") == ""


def test_hub_release_that_fails_its_check_leaves_main_as_it_was(small, hub):  # noqa: F811
    fake, env = hub
    release_to_hub(small, env, "0.1.0")
    repo = fake.repos["benchcurate/hs-small"]
    before = dict(repo["commits"][repo["main"]])
    fake.corrupt_next["data/validation-00000-of-00001.parquet"] = b"not what was uploaded"
    failed = release_to_hub(small, env, "0.2.0", dec="dec-b", check=False)
    fake.corrupt_next.clear()
    assert failed.returncode == 2 and "does not verify" in failed.stderr and "main put back" in failed.stderr
    assert "hs-small-v0.2.0" not in repo["tags"]
    assert repo["commits"][repo["main"]] == before                                   # main shows 0.1.0 again
    release_to_hub(small, env, "0.2.0", dec="dec-b")
    assert json.loads(repo["commits"][repo["main"]]["manifest.json"])["version"] == "0.2.0"


@pytest.mark.parametrize("name, version", [("hs-small", "0.3.0\n"), ("hs-small\n", "0.3.0")])
def test_a_name_or_version_ending_in_a_newline_is_refused(small, tmp_path, name, version):  # noqa: F811
    out = tmp_path / "out"
    result = run_cli("release", small / "ws", "--decisions", small / "dec-a", "--name", name, "--version", version,
                     "--to", out, check=False)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert ("release name" in result.stderr) or ("release version" in result.stderr)
    assert not out.exists()


@pytest.mark.parametrize("name, version", [
    ("hs-small", " 0.3.0"), ("hs-small", "v0.3.0"), ("hs-small", "0.3.0-rc1"), ("hs-small", "0.3"),
    ("hs-small", "00.3.0"), ("hs-small", "\u0660.3.0"), ("hs-small", "0.3.0.0"), ("hs-small", "0.3.0\r"),
    ("Hs-small", "0.3.0"), ("hs--small", "0.3.0"), ("hs-small-", "0.3.0"), ("hs/small", "0.3.0"),
    ("..", "0.3.0"), ("h" * 97, "0.3.0"), ("hs-smal\u0142", "0.3.0"),
])
def test_non_canonical_names_and_versions_are_refused(name, version):
    import schemas
    from curate.core.errors import CurateError
    from curate.release.manifest import check_name_version

    with pytest.raises(CurateError, match="release (name|version)"):
        check_name_version(name, version)
    release = {"name": name, "version": version, "target": {"local": "out"}}
    assert schemas.errors("audit", {"workspace": "ws", "benchmark": {"adapter": "hellaswag", "path": "x"},
                                    "release": release})       # the audit config refuses them too


def test_release_to_an_existing_file_is_one_clear_line(small, tmp_path):  # noqa: F811
    target = tmp_path / "a-file"
    target.write_text("not a folder\n")
    result = run_cli("release", small / "ws", "--decisions", small / "dec-a", "--name", "hs-small",
                     "--version", "0.1.0", "--to", target, check=False)
    assert result.returncode == 2 and result.stderr.startswith(f"error: {target}: exists and is not a folder")
    assert target.read_text() == "not a folder\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def strings(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)
    elif isinstance(value, str):
        yield value


def test_card_and_manifest_name_the_source_never_a_local_path(tmp_path):
    from curate.items.adapters import get_adapter
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions
    from curate.items.ingest import Ingest
    from curate.items.ingest_options import IngestOptions

    ws = Ingest(tmp_path / "ws", IngestOptions(data=str(HELLASWAG), limit=30,
                                               copy_of="Rowan/hellaswag@0123abc"), get_adapter("hellaswag")).run()
    (tmp_path / "rules.yaml").write_text("name: r\nstages:\n  - name: one\n    when: {ids: {row_index: [1]}}\n")
    Filter(ws, FilterOptions(rules=tmp_path / "rules.yaml", out=tmp_path / "dec")).run()
    run_cli("release", ws, "--decisions", tmp_path / "dec", "--name", "x", "--version", "0.1.0", "--to", tmp_path / "out")
    folder = tmp_path / "out" / "x" / "0.1.0"
    card = (folder / "README.md").read_text()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert "Released from `validation.jsonl.gz` (sha256 `sha256:8b5fa523" in card
    assert "a copy of the Hugging Face Hub dataset `Rowan/hellaswag` at revision `0123abc`" in card
    assert "--data validation.jsonl.gz --copy-of Rowan/hellaswag@0123abc" in card
    assert "source_datasets:\n- Rowan/hellaswag" in card
    prov = manifest["source"]["provenance"]
    assert "path" not in prov and prov["name"] == "validation.jsonl.gz" and prov["copy_of"]["repo_id"] == "Rowan/hellaswag"
    assert str(tmp_path) not in card and str(HELLASWAG.parent) not in card
    assert [s for s in strings(manifest) if s.startswith("/")] == []
    # Without --copy-of: the file name and its sha256.
    shutil.rmtree(tmp_path / "out")
    bare = Ingest(tmp_path / "ws2", IngestOptions(data=str(HELLASWAG), limit=30), get_adapter("hellaswag")).run()
    Filter(bare, FilterOptions(rules=tmp_path / "rules.yaml", out=tmp_path / "dec2")).run()
    run_cli("release", bare, "--decisions", tmp_path / "dec2", "--name", "x", "--version", "0.1.0", "--to", tmp_path / "out")
    card = (tmp_path / "out" / "x" / "0.1.0" / "README.md").read_text()
    assert "Released from `validation.jsonl.gz` (sha256 `sha256:8b5fa523" in card and str(tmp_path) not in card


def test_committed_release_0_1_1_corrects_the_card_and_keeps_the_items_of_0_1_0():
    from conftest import ROOT
    from curate.release.manifest import manifest_problems
    from curate.items.sources import file_sha256

    old, new = (ROOT / "releases" / "hellaswag-zero-core" / v for v in ("0.1.0", "0.1.1"))
    m0, m1 = (json.loads((d / "manifest.json").read_text()) for d in (old, new))
    # 0.1.0 is as published: its card still hashes to what its manifest recorded.
    assert file_sha256(old / "README.md") == m0["files"]["README.md"]["sha256"]
    assert manifest_problems(m0) == [] and manifest_problems(m1) == []
    assert file_sha256(new / "README.md") == m1["files"]["README.md"]["sha256"]
    for key in ("kept", "removed", "stages", "counts"):
        assert m1[key] == m0[key], key
    assert m1["rules"]["sha256"] == m0["rules"]["sha256"]
    assert m1["source"]["provenance"]["sha256"] == m0["source"]["provenance"]["sha256"]
    card = (new / "README.md").read_text()
    assert "/work/" not in card and "/root/" not in card and m0["source"]["provenance"]["path"] in \
        (old / "README.md").read_text()
    assert "absolute path" in m1["changelog"] and m1["changelog"] in card
    assert [s for s in strings(m1) if s.startswith("/")] == []


def test_committed_release_0_2_0_counts_gold_longest_as_the_study_and_adds_only_ties():
    """0.2.0 was made with the shipped rules/zero-prompt-core.yaml (gold-longest strict): its
    gold-longest stage matched the study's 1270, and against 0.1.1 it keeps the same items plus
    only items 0.1.1 removed at gold-longest (a gold tied for longest)."""
    from conftest import ROOT
    from curate.release.manifest import manifest_problems
    from curate.items.sources import file_sha256

    folder = ROOT / "releases" / "hellaswag-zero-core"
    m1, m2 = (json.loads((folder / v / "manifest.json").read_text()) for v in ("0.1.1", "0.2.0"))
    assert manifest_problems(m2) == [] and file_sha256(folder / "0.2.0" / "README.md") == m2["files"]["README.md"]["sha256"]
    assert m2["rules"]["content"] == (ROOT / "rules" / "zero-prompt-core.yaml").read_text()
    stages = {s["stage"]: s for s in m2["stages"]}
    assert stages["gold-longest"]["matched"] == 1270 and m2["counts"]["kept"] == 5087
    added = set(m2["kept"]) - set(m1["kept"])
    assert set(m1["kept"]) <= set(m2["kept"]) and len(added) == 47
    assert {m1["removed"][i][0] for i in added} == {"gold-longest"}
    assert m2["source"]["provenance"]["sha256"] == m1["source"]["provenance"]["sha256"]
    assert "1270" in m2["changelog"] and m2["changelog"] in (folder / "0.2.0" / "README.md").read_text()
    assert [s for s in strings(m2) if s.startswith("/")] == []


def test_a_local_tokenizer_folder_never_reaches_the_release(small, tmp_path):  # noqa: F811
    from scoring.models import tokenizer as load_tokenizer

    tok = tmp_path / "private" / "my-tok"
    builtin = load_tokenizer("smollm2-135m")
    builtin.save_pretrained(tok)
    shutil.copy(Path(builtin.name_or_path) / "config.json", tok)           # a model folder, as users have
    rules = tmp_path / "rules.yaml"
    rules.write_text("name: r\nstages:\n  - name: spread\n    description: \"long | short\\nspread\"\n"
                     "    when: {length_spread: {unit: tokens, over: options, ge: 0.5}}\n")
    run_cli("filter", small / "ws", "--rules", rules, "--out", tmp_path / "dec", "--tokenizer", tok)
    run_cli("release", small / "ws", "--decisions", tmp_path / "dec", "--name", "x", "--version", "0.1.0",
            "--to", tmp_path / "out")
    folder = tmp_path / "out" / "x" / "0.1.0"
    for path in folder.rglob("*"):
        if path.is_file():
            assert str(tmp_path).encode() not in path.read_bytes(), path
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["rules"]["defaults"]["tokenizer"] == "my-tok" and manifest["tokenizers"][0]["name"] == "my-tok"
    card = (folder / "README.md").read_text()
    assert "tokenizer `my-tok`" in card and "--tokenizer my-tok" in card
    # A stage description with '|' and a line break stays in its cell of the stage table.
    assert "| 1 | spread | long \\| short spread | " in card


def test_verify_reports_symlinks_added_to_a_release(released, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.txt").write_text("x")
    (released / "data" / "more").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (released / "gone.txt").symlink_to(tmp_path / "nothing-here")
    verify_fails(released, "FAIL data/more: a symlink", "FAIL gone.txt: a symlink")




@pytest.mark.parametrize("how", ["chmod", "through a file"])
def test_a_release_to_an_unwritable_place_is_one_line(small, tmp_path, how):  # noqa: F811
    where, named = unwritable_place(tmp_path, how)
    result = run_cli("release", small / "ws", "--decisions", small / "dec-a", "--name", "hs-small",
                     "--version", "0.1.0", "--to", where, check=False)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "cannot be written" in result.stderr and str(named) in result.stderr


@pytest.mark.parametrize("how", ["chmod", "through a file"])
def test_a_git_release_into_an_unwritable_repo_is_one_line(small, tmp_path, how):  # noqa: F811
    repo = new_repo(tmp_path)
    if how == "chmod":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        repo.chmod(0o555)
    else:
        (repo / "hs-small").write_text("a file where the release's folder goes\n")
    result = git_release(small, repo, check=False)
    repo.chmod(0o755)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr and str(repo) in result.stderr and git(repo, "tag") == ""


def test_a_source_column_mixing_types_is_refused_naming_it(tmp_path):
    """JSON sources keep values as written (ids "001" and 1): parquet cannot hold both in one
    column, so the release refuses in one line naming the column instead of converting them."""
    import pandas as pd

    from curate.core.errors import CurateError
    from curate.release.package import write_rows
    with pytest.raises(CurateError, match=r"source column 'id' holds values of several types \(int, str\)"):
        rows = [{"id": "001", "q": "a"}, {"id": 1, "q": "b"}]
        write_rows(rows, tmp_path / "mixed.parquet", columns_from=rows)
    rows = [{"id": "001", "q": "a"}, {"id": "1", "q": "b"}]
    write_rows(rows, tmp_path / "ok.parquet", columns_from=rows)
    assert pd.read_parquet(tmp_path / "ok.parquet")["id"].tolist() == ["001", "1"]


def test_decisions_that_keep_no_item_release_the_source_columns_and_no_rows(small, tmp_path):  # noqa: F811
    """Rules that remove every item (a small --limit in an audit can do it) gave a parquet file
    with no columns at all; now it has the source's columns, zero rows, and verifies."""
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions
    from curate.items.store import Workspace

    rules = tmp_path / "all.yaml"
    rules.write_text("name: all\nstages:\n  - name: every-row\n    description: every row\n"
                     f"    when: {{ids: {{row_index: {list(range(40))}}}}}\n")
    Filter(small / "ws", FilterOptions(rules=rules, out=tmp_path / "dec")).run()
    run_cli("release", small / "ws", "--decisions", tmp_path / "dec", "--name", "hs-none", "--version", "1.0.0",
            "--to", tmp_path / "out")
    folder = tmp_path / "out" / "hs-none" / "1.0.0"
    data = pd.read_parquet(folder / "data" / "validation-00000-of-00001.parquet")
    with Workspace.open(small / "ws") as ws:
        full = pd.DataFrame.from_records(ws.raw_rows())
    assert len(data) == 0 and list(data.columns) == list(full.columns)
    assert json.loads((folder / "manifest.json").read_text())["counts"]["kept"] == 0
    assert "OK" in run_cli("release", "verify", folder).stdout


def test_diff_sees_the_same_rules_file_applied_with_other_defaults(small, tmp_path):  # noqa: F811
    """A release diff compared only the rules file's digest, so the same file applied with
    another --tokenizer (or --annotator) read as "rules unchanged"."""
    from curate.filter.run import Filter
    from curate.filter.options import FilterOptions
    from curate.release import diff_releases, Release
    from curate.release.options import ReleaseOptions

    Filter(small / "ws", FilterOptions(rules=small / "rules-a.yaml", out=tmp_path / "dec-tok", tokenizer="gpt2")).run()
    out = tmp_path / "out"
    Release(small / "ws", ReleaseOptions(decisions=small / "dec-a", name="hs-small", version="0.1.0",
                                         to=str(out))).run()
    Release(small / "ws", ReleaseOptions(decisions=tmp_path / "dec-tok", name="hs-small", version="0.1.1",
                                         to=str(out))).run()
    Release(small / "ws", ReleaseOptions(decisions=small / "dec-a", name="hs-small", version="0.1.2",
                                         to=str(out))).run()
    assert diff_releases(str(out / "hs-small" / "0.1.0"), str(out / "hs-small" / "0.1.1"))["rules_changed"]
    assert not diff_releases(str(out / "hs-small" / "0.1.0"), str(out / "hs-small" / "0.1.2"))["rules_changed"]


def test_a_release_reading_decisions_while_a_filter_rewrites_them_blames_no_hand_edit(small, tmp_path):  # noqa: F811
    """A `curate filter` rewrites the decisions folder in a loop (rules A, then B, ...) while the
    release reads it: every read is either a consistent set (the rules text, the stage table and
    the decisions all of one run) or "is being rewritten" / "no summary.json"; never the hand-edit
    message, which an old summary beside new decisions used to give."""
    import subprocess
    import sys
    import time

    from curate.core.errors import InputError
    from curate.release.package import read_decisions

    folder = tmp_path / "dec"
    shutil.copytree(small / "dec-a", folder)
    script = ("import sys, time\nfrom curate.filter.run import Filter\nfrom curate.filter.options import FilterOptions\n"
              "end = time.time() + float(sys.argv[1])\n"
              "while time.time() < end:\n"
              "    for tag in 'ab':\n"
              f"        Filter({str(small / 'ws')!r}, FilterOptions(rules={str(small)!r} + f'/rules-{{tag}}.yaml', "
              f"out={str(folder)!r})).run()\n")
    # The writer's progress bars go to a file: a pipe nobody reads fills up (64 KB, a few hundred
    # filter runs on a fast machine) and blocks the writer, and this loop would then never end.
    log = tmp_path / "writer.log"
    with open(log, "w") as err:
        writer = subprocess.Popen([sys.executable, "-c", script, "6"], cwd=Path(__file__).parent.parent,
                                  stdout=err, stderr=subprocess.STDOUT)
    outcomes = {"consistent": 0, "refused": 0}
    deadline = time.time() + 120
    try:
        time.sleep(1.0)  # the writer's imports
        while writer.poll() is None:
            assert time.time() < deadline, "the filter loop did not end"
            try:
                decisions, summary, rules_text = read_decisions(folder)
            except InputError as exc:
                assert "is being rewritten" in str(exc) or "no summary.json" in str(exc), str(exc)
                outcomes["refused"] += 1
            else:
                assert f"name: {summary['rules']['name']}\n" in rules_text
                removed = {"small-a": {1, 2, 3}, "small-b": {2, 3, 4, 5}}[summary["rules"]["name"]]
                listed = decisions[decisions["matched"].map(lambda m: "listed-rows" in m)]
                assert set(listed["row_index"]) == removed
                outcomes["consistent"] += 1
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.wait(timeout=60)
    assert writer.returncode == 0, log.read_text()[-3000:]
    assert outcomes["consistent"] > 10 and outcomes["refused"] > 0, outcomes


def test_decisions_made_from_scores_or_labels_changed_since_are_not_released(tmp_path):
    """A release is made from the decisions' items, but the decisions came from scores and
    annotation records: when those were re-imported or redone after the filter ran, the release
    is refused, naming what changed, until the filter runs again."""
    ws = tmp_path / "ws"
    run_cli("init", ws, "--benchmark", "hellaswag", "--data", HELLASWAG, "--limit", "4")
    scores = tmp_path / "scores" / "zero_prompt"
    scores.mkdir(parents=True)
    (scores / "org--m.csv").write_text("nll_0,nll_1,nll_2,nll_3\n" + "-1,-2,-3,-4\n" * 4)
    run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "scores")
    labels = tmp_path / "r1.csv"
    labels.write_text("original_index,quality_label\n" + "".join(f"{i},[high quality]\n" for i in range(4)))
    run_cli("import-annotations", ws, "--format", "study", "--round", "1", "--file", labels)
    rules = tmp_path / "rules.yaml"
    rules.write_text("name: r\nstages:\n"
                     "  - {name: core, when: {correct: {models: [org/m], mode: zero, normalization: seq_mean, at_least: 1}}}\n"
                     "  - {name: labelled, when: {labels: {annotator: 'imported:study', any: [nonsense_prompt]}}}\n")
    run_cli("filter", ws, "--rules", rules, "--out", tmp_path / "dec")

    def release(version):
        return run_cli("release", ws, "--decisions", tmp_path / "dec", "--name", "r", "--version", version,
                       "--to", tmp_path / "out", check=False)

    (scores / "org--m.csv").write_text("nll_0,nll_1,nll_2,nll_3\n" + "-4,-2,-3,-1\n" * 4)
    run_cli("import-scores", ws, "--format", "study-csv", "--dir", tmp_path / "scores", "--replace")
    proc = release("0.1.0")
    assert proc.returncode == 2 and "were made from the scores of 'org/m' in mode zero (runs study-csv:org/m:zero:" \
        in proc.stderr and "run `curate filter` again" in proc.stderr, proc.stderr
    run_cli("filter", ws, "--rules", rules, "--out", tmp_path / "dec")
    labels.write_text("original_index,quality_label\n" + "".join(f'{i},"[nonsense, prompt]"\n' for i in range(4)))
    run_cli("import-annotations", ws, "--format", "study", "--round", "1", "--file", labels)
    proc = release("0.1.0")
    assert proc.returncode == 2 and "the round-1 records of annotator 'imported:study'" in proc.stderr, proc.stderr
    assert not (tmp_path / "out" / "r").exists()
    run_cli("filter", ws, "--rules", rules, "--out", tmp_path / "dec")
    assert release("0.1.0").returncode == 0
