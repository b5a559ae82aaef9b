"""A local HTTP stand-in for the few Hugging Face Hub endpoints a release uses.

The real Hub cannot be reached from tests, so this in-memory server answers what
huggingface_hub sends for: create_repo, list_repo_refs, preupload (every file 'regular', so no
LFS/Xet upload), validate-yaml, create_commit (ndjson, honouring parentCommit like the Hub:
412 when the branch moved), create_tag / delete_tag, and HEAD/GET of resolve URLs. Tests
point huggingface_hub at it with HF_ENDPOINT, which must be set before huggingface_hub is
imported (the CLI subprocess gets it in its environment).

Hooks for failure tests: ``race`` (someone else commits to main just before our commit lands),
``corrupt`` (serve different bytes for a path than were committed, at every revision),
``corrupt_next`` (the same, only for the commits made while it is set: what a faulty upload would
leave, while older revisions still serve what they hold).
"""
from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


class FakeHub:
    def __init__(self):
        self.repos: dict[str, dict] = {}   # repo_id -> {"commits": {oid: files}, "main": oid, "tags": {name: oid}}
        self.race = False
        self.corrupt: dict[str, bytes] = {}
        self.corrupt_next: dict[str, bytes] = {}
        self.corrupted: dict[str, dict[str, bytes]] = {}  # commit oid -> path -> bytes served
        self.lock = threading.Lock()

    def new_commit(self, repo: dict, files: dict[str, bytes], message: str) -> str:
        oid = hashlib.sha1(f"{len(repo['commits'])}:{message}:{sorted(files)}".encode()).hexdigest()
        repo["commits"][oid] = files
        repo["main"] = oid
        if self.corrupt_next:
            self.corrupted[oid] = dict(self.corrupt_next)
        return oid

    def create(self, repo_id: str) -> None:
        repo = {"commits": {}, "main": None, "tags": {}}
        self.new_commit(repo, {".gitattributes": b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"}, "initial commit")
        self.repos[repo_id] = repo

    def resolve(self, repo_id: str, revision: str) -> str | None:
        repo = self.repos[repo_id]
        if revision == "main":
            return repo["main"]
        if revision in repo["tags"]:
            return repo["tags"][revision]
        return revision if revision in repo["commits"] else None

    def serve(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status: int, body=None, headers=None):
                data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if not isinstance(body, bytes) else "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def do_POST(self):
                path = unquote(urlparse(self.path).path)
                payload = self.body()
                with hub.lock:
                    if path == "/api/repos/create":
                        req = json.loads(payload)
                        repo_id = f"{req['organization']}/{req['name']}"
                        if repo_id in hub.repos:
                            return self.reply(409, {"error": "exists"})
                        hub.create(repo_id)
                        return self.reply(200, {"url": f"http://{self.headers['Host']}/datasets/{repo_id}"})
                    if path == "/api/validate-yaml":
                        return self.reply(200, {"errors": [], "warnings": []})
                    m = re.match(r"^/api/datasets/([^/]+/[^/]+)/(preupload|commit|tag)/(.+)$", path)
                    if not m or m.group(1) not in hub.repos:
                        return self.reply(404, {"error": "not found"}, {"X-Error-Code": "RepoNotFound"})
                    repo_id, action, rev = m.groups()
                    repo = hub.repos[repo_id]
                    if action == "preupload":
                        files = json.loads(payload)["files"]
                        return self.reply(200, {"files": [{"path": f["path"], "uploadMode": "regular",
                                                           "shouldIgnore": False} for f in files]})
                    if action == "commit":
                        lines = [json.loads(l) for l in payload.decode().splitlines() if l.strip()]
                        header = lines[0]["value"]
                        if hub.race:  # another writer lands first
                            hub.new_commit(repo, dict(repo["commits"][repo["main"]], **{"other.txt": b"x"}), "other")
                        if header.get("parentCommit") and header["parentCommit"] != repo["main"]:
                            return self.reply(412, {"error": "A commit has happened since. Please refresh and try again."})
                        files = dict(repo["commits"][repo["main"]])
                        for line in lines[1:]:
                            value = line["value"]
                            if line["key"] == "file":
                                files[value["path"]] = base64.b64decode(value["content"])
                            elif line["key"] == "deletedFile":
                                files.pop(value["path"], None)
                        oid = hub.new_commit(repo, files, header["summary"])
                        return self.reply(200, {"commitUrl": f"http://{self.headers['Host']}/datasets/{repo_id}/commit/{oid}",
                                                "commitOid": oid, "pullRequestUrl": None})
                    req = json.loads(payload)  # tag
                    if req["tag"] in repo["tags"]:
                        return self.reply(409, {"error": "tag exists"})
                    target = hub.resolve(repo_id, rev)
                    if target is None:
                        return self.reply(404, {"error": "no revision"}, {"X-Error-Code": "RevisionNotFound"})
                    repo["tags"][req["tag"]] = target
                    return self.reply(200, {})

            def do_DELETE(self):
                path = unquote(urlparse(self.path).path)
                m = re.match(r"^/api/datasets/([^/]+/[^/]+)/tag/(.+)$", path)
                with hub.lock:
                    if m and m.group(1) in hub.repos and m.group(2) in hub.repos[m.group(1)]["tags"]:
                        del hub.repos[m.group(1)]["tags"][m.group(2)]
                        return self.reply(200, {})
                return self.reply(404, {"error": "not found"}, {"X-Error-Code": "RevisionNotFound"})

            def do_GET(self):
                path = unquote(urlparse(self.path).path)
                with hub.lock:
                    m = re.match(r"^/api/datasets/([^/]+/[^/]+)/refs$", path)
                    if m:
                        if m.group(1) not in hub.repos:
                            return self.reply(404, {"error": "not found"}, {"X-Error-Code": "RepoNotFound"})
                        repo = hub.repos[m.group(1)]
                        return self.reply(200, {
                            "branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": repo["main"]}],
                            "tags": [{"name": t, "ref": f"refs/tags/{t}", "targetCommit": o} for t, o in repo["tags"].items()],
                            "converts": []})
                    m = re.match(r"^/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
                    if not m or m.group(1) not in hub.repos:
                        return self.reply(404, {"error": "not found"}, {"X-Error-Code": "RepoNotFound"})
                    repo_id, rev, file = m.groups()
                    oid = hub.resolve(repo_id, rev)
                    if oid is None:
                        return self.reply(404, {"error": "no revision"}, {"X-Error-Code": "RevisionNotFound"})
                    files = hub.repos[repo_id]["commits"][oid]
                    if file not in files:
                        return self.reply(404, {"error": "no entry"}, {"X-Error-Code": "EntryNotFound"})
                    data = hub.corrupt.get(file, hub.corrupted.get(oid, {}).get(file, files[file]))
                    etag = hashlib.sha1(data).hexdigest()
                    return self.reply(200, data, {"X-Repo-Commit": oid, "ETag": f'"{etag}"'})

            do_HEAD = do_GET

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server


@contextlib.contextmanager
def running():
    """A served FakeHub and the environment a `curate` subprocess needs to use it. HF_ENDPOINT is
    read when huggingface_hub is imported, so it goes into the environment of the subprocess,
    which imports huggingface_hub after it is set."""
    fake = FakeHub()
    server = fake.serve()
    env = {"HF_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}", "HF_HUB_OFFLINE": "0",
           "HF_TOKEN": "hf_standin_token", "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_ETAG_TIMEOUT": "5"}
    try:
        yield fake, env
    finally:
        server.shutdown()
