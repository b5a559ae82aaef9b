"""Where releases go: a local folder, a git repository, or a Hugging Face Hub dataset repo.

Each target can say whether a version exists (versions are immutable: an existing one is
refused), publish a built release folder, and fetch a published version back into a folder for
``verify``/``diff``. Target strings:

- ``PATH``             local: the release lands in ``PATH/NAME/VERSION/`` by one rename
- ``git:REPO``         one commit adding ``NAME/VERSION/`` to the work tree REPO (a repository or a
                       folder in one), checked against the release, tagged ``NAME-vX.Y.Z``; a release
                       interrupted between commit and tag (or before the commit) is finished or redone
                       by running the same release again
- ``hf:OWNER/DATASET`` one Hub commit (``parent_commit`` pinned) with the release at the repo root,
                       tagged ``NAME-vX.Y.Z`` at that commit, then downloaded from the tag and verified;
                       if that fails the tag is deleted and main is put back to its previous content
"""
from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from curate.core.atomic import check_writable, unwritable
from curate.core.errors import CurateError, InputError
from curate.core.lock import claimed, folder_lock, remove_stale
from curate.core.reading import read_json
from curate.release.manifest import MANIFEST, read_manifest, tag_name, verify_dir


class VersionExists(CurateError):
    """The release version is already published at the target (versions are immutable)."""


def parse_target(spec: str):
    if spec.startswith("git:"):
        return GitTarget(Path(spec[4:]))
    if spec.startswith(("hf:", "hf://datasets/")):
        return HubTarget(spec.split("hf://datasets/", 1)[-1] if spec.startswith("hf://") else spec[3:])
    return LocalTarget(Path(spec))


def _check_verified(folder: Path, where: str) -> None:
    problems = verify_dir(folder)
    if problems:
        raise CurateError(f"{where}: the published release does not verify: {'; '.join(problems[:3])}")


@contextmanager
def _copy_beside(staging: Path, final: Path) -> Iterator[Path]:
    """A copy of ``staging`` in a hidden sibling of ``final`` named after this process
    (``.VERSION.PID.XXXX.partial``) and held (``claimed``) for the block, so an interrupted copy
    is never mistaken for a release and the next run can tell it is stale. Rename it into place
    inside the block; whatever is left of it afterwards is removed. Stale copies go first."""
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(final.parent, rf"\.{re.escape(final.name)}\.(\d+)\.[a-z0-9_]+\.partial")
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.{os.getpid()}.", suffix=".partial", dir=final.parent))
    try:
        with claimed(tmp):
            shutil.copytree(staging, tmp, dirs_exist_ok=True)
            yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # nothing there once renamed into place


class LocalTarget:
    kind = "local"

    def __init__(self, root: Path):
        self.root = root

    def folder(self, name: str, version: str) -> Path:
        return self.root / name / version

    def check_new(self, name: str, version: str) -> None:
        for parent in (self.root, self.root / name):
            if parent.exists() and not parent.is_dir():
                raise CurateError(f"{parent}: exists and is not a folder; --to names the folder releases go in")
        inside = next((f for f in (self.root, *self.root.absolute().parents) if (f / MANIFEST).is_file()), None)
        if inside is not None:  # the new release would be a file the other one's manifest does not list
            raise CurateError(f"{self.root}: is inside the release folder {inside} (it holds {MANIFEST}); --to names "
                              f"a folder releases go in, outside any release")
        if self.folder(name, version).exists():
            raise VersionExists(f"{self.folder(name, version)}: release {name} {version} exists; versions are "
                              f"immutable, choose a new version")
        check_writable(self.root / name)

    def publish(self, staging: Path, name: str, version: str) -> dict:
        """Copy into a hidden sibling, verify it, then rename it into place in one step."""
        final = self.folder(name, version)
        try:
            with _copy_beside(staging, final) as tmp:
                _check_verified(tmp, str(final))
                self.check_new(name, version)
                try:
                    os.rename(tmp, final)
                except OSError as exc:
                    if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                        raise
                    raise CurateError(f"{final}: release {name} {version} was published by another process "
                                      f"meanwhile; versions are immutable") from None
        except OSError as exc:
            raise unwritable(exc, final) from None
        return {"kind": self.kind, "location": str(final.resolve())}

    def fetch(self, name: str, version: str, into: Path) -> Path:
        folder = self.folder(name, version)
        if not (folder / MANIFEST).is_file():
            raise CurateError(f"{folder}: no release {name} {version} here")
        return folder


class GitTarget:
    kind = "git"

    def __init__(self, repo: Path):
        self.repo = repo

    def git(self, *args, check=True, **kw) -> subprocess.CompletedProcess:
        proc = subprocess.run(["git", "-C", str(self.repo), *args], capture_output=True, **kw)
        if check and proc.returncode != 0:
            err = proc.stderr.decode(errors="replace") if isinstance(proc.stderr, bytes) else proc.stderr
            raise CurateError(f"git {' '.join(args[:2])} in {self.repo} failed: {_git_reason(err)}")
        return proc

    def _out(self, *args) -> str:
        return self.git(*args, check=False, text=True).stdout.strip()

    def state(self, name: str, version: str) -> str:
        """'released' (tagged), 'committed' (the commit went in, the tag did not), 'leftover' (an
        uncommitted release folder of this very version), 'other' (something else is at the
        path) or 'new'. Paths are relative to REPO, which may be a folder inside the repository
        (``HEAD:./PATH`` resolves from there, not from the repository's root)."""
        rel = f"{name}/{version}"
        if self.git("rev-parse", "-q", "--verify", f"refs/tags/{tag_name(name, version)}", check=False).returncode == 0:
            return "released"
        if self.git("cat-file", "-e", f"HEAD:./{rel}/{MANIFEST}", check=False).returncode == 0:
            return "committed"
        if (self.repo / rel).exists() or (self.repo / rel).is_symlink():
            # Ours: a whole release folder (the copy lands by one rename, so there is no partial
            # one at this path) of this name and version, that no commit holds.
            try:
                m = read_json(self.repo / rel / MANIFEST, "a manifest file")
                ours = (m.get("name"), m.get("version")) == (name, version) and not (self.repo / rel).is_symlink()
            except (InputError, AttributeError):
                ours = False
            tracked = self._out("ls-tree", "-r", "--name-only", "HEAD", "--", rel)
            return "leftover" if ours and not tracked else "other"
        return "new"

    def check_new(self, name: str, version: str) -> None:
        inside = self.git("rev-parse", "--is-inside-work-tree", check=False, text=True)
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            raise CurateError(f"{self.repo}: not a git work tree (create one with `git init`)")
        state = self.state(name, version)
        if state == "released":
            raise VersionExists(f"{self.repo}: tag {tag_name(name, version)} exists; versions are immutable, "
                              f"choose a new version")
        if state == "other":
            raise CurateError(f"{self.repo / name / version} exists and is not an unfinished release of {name} "
                              f"{version} made here; versions are immutable, choose a new version")
        check_writable(self.repo / name)
        git_dir = Path(self._out("rev-parse", "--absolute-git-dir"))
        check_writable(git_dir)

    def publish(self, staging: Path, name: str, version: str) -> dict:
        """Add NAME/VERSION/ (ignored files too), commit only that path, check that the commit
        holds exactly the release, tag it; undone on any failure. Run again after an
        interruption, it tags a release whose commit went in (when it holds the same release)
        and replaces an uncommitted leftover folder."""
        self.check_new(name, version)
        # Two releases into one repository at once would commit, tag and undo over each other
        # (one run's undo can drop the other's commit): one at a time, the second refused.
        git_dir = self._out("rev-parse", "--absolute-git-dir")
        with folder_lock(git_dir, command="release", busy="release into another repository"):
            return self._publish(staging, name, version)

    def _publish(self, staging: Path, name: str, version: str) -> dict:
        self.check_new(name, version)  # again, now that no other release can change the answer
        rel, tag = f"{name}/{version}", tag_name(name, version)
        state = self.state(name, version)
        if state == "committed":
            return self._finish(staging, name, version)
        head = self._out("rev-parse", "-q", "--verify", "HEAD") or None
        try:
            if state == "leftover":
                self.git("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", rel, check=False)
                shutil.rmtree(self.repo / rel)
            with _copy_beside(staging, self.repo / rel) as copy:
                os.rename(copy, self.repo / rel)
        except OSError as exc:
            raise unwritable(exc, self.repo / rel) from None
        commit = None
        try:
            # --force: a .gitignore matching *.parquet (common) must not drop the data file.
            self.git("add", "--force", "--", rel)
            self.git("commit", "-q", "-m", f"Release {name} {version}", "--", rel)
            commit = self._out("rev-parse", "HEAD")
            self._check_commit(commit, rel)
            self.git("tag", "-a", tag, "-m", f"{name} {version}", commit)
        except BaseException:
            self._undo(rel, head, commit)
            raise
        return {"kind": self.kind, "location": str(self.repo.resolve()), "commit": commit, "tag": tag}

    def _check_commit(self, commit: str, rel: str) -> None:
        """The commit must hold the release exactly (every file, byte for byte, nothing more),
        read back from git's objects: a filter, an attribute or a hook may have changed it."""
        with tempfile.TemporaryDirectory() as tmp:
            problems = verify_dir(self._extract(commit, rel, Path(tmp)))
        if problems:
            raise CurateError(f"{self.repo}: the commit does not hold the release as built ({problems[0]}; a "
                              f".gitattributes filter or a hook?); it was undone and nothing was released")

    def _finish(self, staging: Path, name: str, version: str) -> dict:
        """Tag the commit that added NAME/VERSION/ when it holds the release just built."""
        rel, tag = f"{name}/{version}", tag_name(name, version)
        commit = self._out("log", "-1", "--format=%H", "--diff-filter=A", "HEAD", "--", f"{rel}/{MANIFEST}")
        with tempfile.TemporaryDirectory() as tmp:
            folder = self._extract(commit, rel, Path(tmp))
            problems = verify_dir(folder)
            committed = read_manifest(folder)
        built = read_manifest(staging)
        same = all(committed.get(k) == built.get(k) for k in SAME_RELEASE)
        if problems or not same:
            why = f"it does not verify ({problems[0]})" if problems else "it holds a different release"
            raise CurateError(f"{self.repo}: commit {commit[:12]} added {rel} without tag {tag}, but {why}; "
                              f"undo that commit or choose a new version")
        self.git("tag", "-a", tag, "-m", f"{name} {version}", commit)
        return {"kind": self.kind, "location": str(self.repo.resolve()), "commit": commit, "tag": tag,
                "finished": f"an interrupted release: commit {commit[:12]} was already in, the tag was added"}

    def _undo(self, rel: str, head: str | None, commit: str | None) -> None:
        current = self._out("rev-parse", "-q", "--verify", "HEAD") or None
        if commit and current == commit != head:  # ours went in: move the branch back, keep all else
            if head:
                self.git("reset", "-q", "--soft", head, check=False)
            else:  # ours was the repository's first commit: the branch did not exist before it
                self.git("update-ref", "-d", "HEAD", check=False)
        self.git("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", rel, check=False)
        shutil.rmtree(self.repo / rel, ignore_errors=True)
        for parent in (self.repo / rel).parents:  # NAME/ (and SUB/) made for this release, now empty
            if parent == self.repo or not parent.is_dir() or any(parent.iterdir()):
                break
            parent.rmdir()

    def _extract(self, revision: str, rel: str, into: Path) -> Path:
        """The files under ``rel`` at ``revision``, exactly as stored in git (blobs: no
        .gitattributes export rules or filters applied), into ``into/rel``. Anything that is
        not a plain file (a symlink, a submodule) is left out, so verifying the folder flags it."""
        listing = self.git("ls-tree", "-r", "-z", revision, "--", rel).stdout
        entries = []
        for line in filter(None, listing.split(b"\0")):
            meta, path = line.split(b"\t", 1)
            mode, kind, sha = meta.split()
            path = path.decode("utf-8", errors="surrogateescape")
            if kind == b"blob" and mode in (b"100644", b"100755") and ".." not in Path(path).parts:
                entries.append((sha.decode(), path))
        blobs = self.git("cat-file", "--batch", input=b"".join(f"{sha}\n".encode() for sha, _ in entries)).stdout
        pos = 0
        for sha, path in entries:
            header_end = blobs.index(b"\n", pos)
            size = int(blobs[pos:header_end].split()[2])
            target = into / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blobs[header_end + 1:header_end + 1 + size])
            pos = header_end + 1 + size + 1
        (into / rel).mkdir(parents=True, exist_ok=True)
        return into / rel

    def fetch(self, name: str, version: str, into: Path) -> Path:
        """The release as committed at its tag (not the work tree), read from git's objects."""
        tag = tag_name(name, version)
        if self.git("rev-parse", "-q", "--verify", f"refs/tags/{tag}", check=False).returncode != 0:
            raise CurateError(f"{self.repo}: no tag {tag}")
        return self._extract(tag, f"{name}/{version}", into)


def _git_reason(stderr: str) -> str:
    """git's own reason in one line (its 'fatal:'/'error:' line, not the hints around it)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return next((ln for ln in lines if ln.startswith(("fatal:", "error:"))), lines[0] if lines else "no message")


#: Manifest keys that must agree for a half-done release to count as the one being made again.
SAME_RELEASE = ("name", "version", "source", "rules", "stages", "counts", "kept", "removed")


class HubTarget:
    kind = "hf"
    repo_type = "dataset"

    def __init__(self, repo_id: str):
        if repo_id.count("/") != 1:
            raise CurateError(f"hf:{repo_id}: name a dataset repo as hf:OWNER/NAME")
        self.repo_id = repo_id

    def api(self):
        from huggingface_hub import HfApi
        return HfApi()

    def _refs(self, create: bool = False):
        from huggingface_hub.errors import RepositoryNotFoundError
        api = self.api()
        try:
            return api.list_repo_refs(self.repo_id, repo_type=self.repo_type)
        except RepositoryNotFoundError:
            if not create:
                raise CurateError(f"hf:{self.repo_id}: no such dataset repository on {api.endpoint}") from None
            api.create_repo(self.repo_id, repo_type=self.repo_type, exist_ok=True)
            return api.list_repo_refs(self.repo_id, repo_type=self.repo_type)

    def check_new(self, name: str, version: str) -> None:
        with _hub_errors(self.repo_id):
            from huggingface_hub.errors import RepositoryNotFoundError
            try:
                refs = self.api().list_repo_refs(self.repo_id, repo_type=self.repo_type)
            except RepositoryNotFoundError:
                return
        if tag_name(name, version) in {t.name for t in refs.tags}:
            raise VersionExists(f"hf:{self.repo_id}: tag {tag_name(name, version)} exists; versions are immutable, "
                              f"choose a new version")

    def publish(self, staging: Path, name: str, version: str) -> dict:
        """One commit on top of the branch head read just before (parent_commit), then a tag at
        that commit's oid, then a download from the tag that must verify. If the commit is
        refused nothing changed. If the tag or the verification fails, the tag is removed and a
        second commit puts main back to its previous content, so neither a version name nor the
        head of main ever shows an unverified release."""
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete
        from huggingface_hub.errors import HfHubHTTPError

        tag = tag_name(name, version)
        api = self.api()
        with _hub_errors(self.repo_id):
            refs = self._refs(create=True)
            if tag in {t.name for t in refs.tags}:
                raise CurateError(f"hf:{self.repo_id}: tag {tag} exists; versions are immutable")
            parent = next((b.target_commit for b in refs.branches if b.name == "main"), None)
            files = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
            stale = sorted(set(self._previous_files(parent)) - set(files))
            ops = [CommitOperationAdd(path_in_repo=f, path_or_fileobj=str(staging / f)) for f in files]
            ops += [CommitOperationDelete(path_in_repo=f) for f in stale]
            try:
                info = api.create_commit(self.repo_id, ops, commit_message=f"Release {name} {version}",
                                         repo_type=self.repo_type, parent_commit=parent)
            except HfHubHTTPError as exc:
                raise CurateError(f"hf:{self.repo_id}: the commit was refused, nothing was released "
                                  f"({_first_line(exc)}); a 412 means the branch moved since it was read: retry") from exc
            try:
                api.create_tag(self.repo_id, tag=tag, revision=info.oid, repo_type=self.repo_type,
                               tag_message=f"{name} {version}")
                with tempfile.TemporaryDirectory() as tmp:
                    _check_verified(self.fetch(name, version, Path(tmp)), f"hf:{self.repo_id}@{tag}")
            except Exception as exc:
                self._drop_tag(tag)
                undone = self._restore(parent, info.oid, files + stale, f"{name} {version}")
                raise CurateError(f"{_first_line(exc)}; tag {tag} removed, nothing was released ({undone})") from exc
        return {"kind": self.kind, "location": f"{api.endpoint}/datasets/{self.repo_id}", "commit": info.oid,
                "tag": tag}

    def _restore(self, parent: str | None, bad: str, paths: list[str], what: str) -> str:
        """Commit, on top of ``bad``, the content ``paths`` had at ``parent`` (deleting those it
        lacked), so main shows what it showed before; returns what happened, for the message."""
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete, hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError

        try:
            with tempfile.TemporaryDirectory() as tmp:
                ops = []
                for rel in paths:
                    try:
                        old = hf_hub_download(self.repo_id, rel, repo_type=self.repo_type, revision=parent,
                                              cache_dir=tmp) if parent else None
                    except EntryNotFoundError:
                        old = None
                    ops.append(CommitOperationAdd(path_in_repo=rel, path_or_fileobj=old) if old
                               else CommitOperationDelete(path_in_repo=rel))
                info = self.api().create_commit(
                    self.repo_id, ops, repo_type=self.repo_type, parent_commit=bad,
                    commit_message=f"Revert unverified release {what} (commit {bad[:12]})")
        except Exception as exc:  # the original failure is what the user must see first
            return (f"putting main back failed ({_first_line(exc)}): commit {bad[:12]} is still at the head of "
                    f"main and must be reverted by hand")
        return f"main put back to its previous content by commit {info.oid[:12]}; {bad[:12]} stays in its history"

    def _previous_files(self, parent: str | None) -> list[str]:
        """Files of the previous release at the branch head (from its manifest), to delete."""
        if parent is None:
            return []
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError
        with tempfile.TemporaryDirectory() as tmp:
            try:
                path = hf_hub_download(self.repo_id, MANIFEST, repo_type=self.repo_type, revision=parent, cache_dir=tmp)
            except EntryNotFoundError:
                return []
            return [MANIFEST, *read_json(path, "a manifest file")["files"]]

    def _drop_tag(self, tag: str) -> None:
        try:
            self.api().delete_tag(self.repo_id, tag=tag, repo_type=self.repo_type)
        except Exception:  # the tag may never have been made; the original error is what matters
            pass

    def fetch(self, name: str, version: str, into: Path) -> Path:
        """Download the manifest and every file it lists from the tag into ``into`` (the
        download cache lives elsewhere: ``into`` holds the release and nothing more)."""
        from huggingface_hub import hf_hub_download

        tag = tag_name(name, version)
        with _hub_errors(self.repo_id), tempfile.TemporaryDirectory(prefix="benchcurate-hub-") as cache:
            def get(rel: str) -> None:
                if Path(rel).is_absolute() or ".." in Path(rel).parts:
                    raise CurateError(f"hf:{self.repo_id}@{tag}: the manifest lists a file outside the release: {rel!r}")
                path = hf_hub_download(self.repo_id, rel, repo_type=self.repo_type, revision=tag, cache_dir=cache)
                (into / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, into / rel)
            get(MANIFEST)
            for rel in read_manifest(into)["files"]:
                get(rel)
        return into


class _hub_errors:
    """Turn huggingface_hub/network errors into one CurateError line naming the repo."""

    def __init__(self, repo_id: str):
        self.repo_id = repo_id

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None or isinstance(exc, CurateError) or not isinstance(exc, Exception):
            return False
        raise CurateError(f"hf:{self.repo_id}: {type(exc).__name__}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
