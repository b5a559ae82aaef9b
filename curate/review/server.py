"""`curate review`: a local web app for reviewing items one at a time (standard library only).

Security, by construction and checked on every request:

- it listens on 127.0.0.1 only and answers only loopback clients;
- the Host header must name 127.0.0.1 or localhost with the server's port, so a page on another
  site whose name was rebound to 127.0.0.1 (DNS rebinding) gets nothing;
- every /api/ request must carry the per-process token of the page (``X-Review-Token``) and
  state-changing requests must also come from the app's own origin with a JSON body, so another
  site cannot read verdicts nor forge one (CSRF);
- no path in a URL is ever mapped to a file: the app serves three files from this package, named
  in ``STATIC``, and JSON built from the workspace, so no request reaches a file anywhere else;
- pages load no script, style or font from elsewhere (Content-Security-Policy 'self'), so the app
  works offline.
"""
from __future__ import annotations

import hmac
import html
import json
import secrets
import sqlite3
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from annotate.store import LABELS, VersionConflict, open_annotations, read_annotations
from curate.core.errors import CurateError
from curate.review import queues
from curate.review.data import ReviewData
from curate.review.sections import ItemContext, item_sections, sections_html
from curate.review.verdicts import LABEL_TEXT, annotator_name, reviewer_verdicts, save_verdict

HOST = "127.0.0.1"
STATIC_DIR = Path(__file__).parent / "static"
STATIC = {"/static/review.js": ("review.js", "text/javascript; charset=utf-8"),
          "/static/review.css": ("review.css", "text/css; charset=utf-8")}
MAX_BODY = 64 * 1024
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class ApiError(Exception):
    def __init__(self, status: HTTPStatus, message: str, **extra):
        super().__init__(message)
        self.status, self.extra = status, extra


class ReviewApp:
    """The app's state and its JSON API, independent of HTTP (the handler below only checks and
    routes requests)."""

    def __init__(self, data: ReviewData, *, reviewer: str | None = None, queue: str = "all"):
        self.data, self.queue = data, queue
        self.reviewer = annotator_name(reviewer)[len("human:"):] if reviewer else None
        self.token = secrets.token_urlsafe(32)
        self._queues: dict[str, list[str]] = {}
        self._reasons: dict[str, dict[str, dict]] = {}
        self._lock = threading.Lock()
        self.queue_items(queue)  # a bad --queue fails at start, not in the browser

    # --- queues ----------------------------------------------------------------------------

    def queue_items(self, spec: str) -> list[str]:
        """Queue ids, resolved once per spec. An ``ids:FILE`` queue only as given at start: the
        browser never names files."""
        if spec.startswith("ids:") and spec != self.queue:
            raise ApiError(HTTPStatus.BAD_REQUEST, "item-id list queues are chosen on the command line (--queue ids:FILE)")
        with self._lock:
            if spec not in self._queues:
                with open_annotations(self.data.root) as ws:
                    records = read_annotations(ws) if spec.startswith("disagree") else None
                self._queues[spec] = queues.resolve(self.data, spec, records)
            return self._queues[spec]

    def queue_reasons(self, spec: str) -> dict[str, dict]:
        """Why queue ``spec`` holds each item (``queues.reasons``), resolved once per spec."""
        self.queue_items(spec)  # the same checks as the queue itself
        with self._lock:
            if spec not in self._reasons:
                self._reasons[spec] = queues.reasons(self.data, spec)
            return self._reasons[spec]

    def queue_list(self) -> list[dict]:
        with open_annotations(self.data.root) as ws:
            listed = queues.available(self.data, read_annotations(ws))
        if self.queue not in [q["name"] for q in listed]:
            listed.insert(0, {"name": self.queue, "items": len(self.queue_items(self.queue)), "about": "from --queue"})
        return listed

    def progress(self, ids: list[str], verdicts: dict) -> dict:
        return {"total": len(ids), "round1": sum(1 in verdicts.get(i, {}) for i in ids),
                "round2": sum(2 in verdicts.get(i, {}) for i in ids),
                "either": sum(bool(verdicts.get(i)) for i in ids)}

    # --- API -------------------------------------------------------------------------------

    def config(self) -> dict:
        return {"reviewer": self.reviewer, "queue": self.queue, "queues": self.queue_list(),
                "labels": [[label, LABEL_TEXT[label]] for label in LABELS],
                "workspace": self.data.root.name, "items": len(self.data.items)}

    def queue_state(self, spec: str, reviewer: str) -> dict:
        ids = self.queue_items(spec)
        with open_annotations(self.data.root) as ws:
            verdicts = reviewer_verdicts(ws, reviewer)
        return {"name": spec, "items": ids, "answered": {i: sorted(verdicts[i]) for i in ids if i in verdicts},
                "progress": self.progress(ids, verdicts)}

    def item(self, item_id: str, reviewer: str, queue: str | None = None) -> dict:
        """One item's page as ``reviewer`` sees it in ``queue`` (which adds why the queue holds it)."""
        item = self.data.by_id.get(item_id)
        if item is None:
            raise ApiError(HTTPStatus.NOT_FOUND, f"no item {item_id!r} in this workspace")
        suspect = self.queue_reasons(queue).get(item_id) if queue else None
        with open_annotations(self.data.root) as ws:
            records = read_annotations(ws, item_id=item_id)  # read now: reviewers write them
            mine = reviewer_verdicts(ws, reviewer).get(item_id, {})
        sections = sections_html(item_sections(ItemContext(self.data, item, records, suspect)))
        return {"item_id": item_id, "row_index": item["row_index"], "source": item["source"],
                "options": item["options"], "gold": item["gold"], "sections": sections,
                "verdicts": {str(r): v for r, v in mine.items()}}

    def first_item_html(self, query: dict) -> str | None:
        """The item the page opens on (the queue's first unanswered, as review.js picks it when
        the URL names no position), rendered into the page itself: the page shows it before its
        script has asked for anything. None without a reviewer or with a queue that fails (the
        script then asks for a name or says why)."""
        try:
            reviewer = annotator_name(query.get("reviewer") or self.reviewer or "")[len("human:"):]
            spec = query.get("queue") or self.queue
            state = self.queue_state(spec, reviewer)
            if not state["items"]:
                return None
            item_id = next((i for i in state["items"] if i not in state["answered"]), state["items"][0])
            item = self.item(item_id, reviewer, spec)
        except (ApiError, CurateError, sqlite3.Error, OSError):
            return None
        title = item_id + (f" ({item['source']})" if item["source"] else "")
        return f'<h2 id="item-id">{html.escape(title)}</h2>{item["sections"]}'

    def save(self, body: dict) -> dict:
        check_verdict(body)
        reviewer, item_id, round_ = body["reviewer"], body["item_id"], body["round"]
        # The version the page showed: a page that showed no verdict (0, null or no version) makes
        # a first save, refused as stale once another tab or server has saved one.
        result, note, version = body["result"], body.get("note", ""), body.get("version") or 0
        item = self.data.by_id.get(item_id)
        if item is None:
            raise ApiError(HTTPStatus.NOT_FOUND, f"no item {item_id!r} in this workspace")
        with open_annotations(self.data.root) as ws:
            try:
                new = save_verdict(ws, item, round_, reviewer, result, note=note, expected_version=version)
            except VersionConflict as exc:
                raise ApiError(HTTPStatus.CONFLICT, str(exc), current=exc.current) from None
        return {"item_id": item_id, "round": round_, "version": new}


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: A verdict's fields: (required, check, what it must be).
VERDICT_SHAPE = {
    "reviewer": (True, lambda v: isinstance(v, str), "text (a reviewer name)"),
    "item_id": (True, lambda v: isinstance(v, str), "text (an item id)"),
    "round": (True, lambda v: _whole(v) and v in (1, 2), "1 or 2"),
    "result": (True, lambda v: isinstance(v, dict), "an object"),
    "note": (False, lambda v: isinstance(v, str), "text"),
    "version": (False, lambda v: v is None or _whole(v), "a whole number"),
}


def check_verdict(body: dict) -> None:
    """Refuse (400) a verdict body that lacks a field or holds one of the wrong type, naming it."""
    missing = [k for k, (required, _, _) in VERDICT_SHAPE.items() if required and k not in body]
    if missing:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"a verdict needs reviewer, item_id, round and result "
                                               f"(missing: {', '.join(missing)})")
    for field, (_, ok, what) in VERDICT_SHAPE.items():
        if field in body and not ok(body[field]):
            raise ApiError(HTTPStatus.BAD_REQUEST, f"{field} must be {what}, not {json.dumps(body[field])[:60]}")


def page(app: ReviewApp, query: dict | None = None) -> bytes:
    """The app's one HTML page with its first item rendered in (``ReviewApp.first_item_html``);
    the token travels in a meta tag (no inline script: the CSP forbids it)."""
    text = (STATIC_DIR / "review.html").read_text(encoding="utf-8")
    first = app.first_item_html(query or {})
    if first is not None:
        text = text.replace('<p class="hint">loading&hellip;</p>', first)
    return text.replace("{{TOKEN}}", app.token).encode("utf-8")


class Handler(BaseHTTPRequestHandler):
    app: ReviewApp           # set on the subclass made by ``make_server``
    port: int
    server_version = "curate-review"
    sys_version = ""

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass  # quiet: the terminal shows the URL, not one line per request

    # --- checks ----------------------------------------------------------------------------

    def _refuse(self) -> str | None:
        """Why this request is refused (None: it may proceed)."""
        if self.client_address[0] not in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):
            return "only this computer may connect"
        if self.headers.get("Host", "") not in (f"127.0.0.1:{self.port}", f"localhost:{self.port}"):
            return "unexpected Host header"
        return None

    def _api_allowed(self, state_changing: bool) -> str | None:
        token = self.headers.get("X-Review-Token", "")
        if not hmac.compare_digest(token.encode(), self.app.token.encode()):
            return "missing or wrong review token (reload the page)"
        if state_changing:
            origin = self.headers.get("Origin")
            if origin is not None and origin not in (f"http://127.0.0.1:{self.port}", f"http://localhost:{self.port}"):
                return "cross-origin request"
            if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
                return "a JSON body is required"
        return None

    # --- responses -------------------------------------------------------------------------

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in HEADERS.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: HTTPStatus, value) -> None:
        self._send(status, json.dumps(value, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8")

    def _error(self, status: HTTPStatus, message: str, **extra) -> None:
        self._json(status, {"error": message, **extra})

    # --- routing ---------------------------------------------------------------------------

    def do_GET(self):  # noqa: N802 (the base class's naming)
        self._route(False)

    def do_HEAD(self):  # noqa: N802
        self._route(False)

    def do_POST(self):  # noqa: N802
        self._route(True)

    def _route(self, post: bool) -> None:
        refused = self._refuse()
        if refused:
            return self._error(HTTPStatus.FORBIDDEN, refused)
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path = url.path
        try:
            if not post and path in ("/", "/index.html"):
                return self._send(HTTPStatus.OK, page(self.app, query), "text/html; charset=utf-8")
            if not post and path in STATIC:
                name, kind = STATIC[path]
                return self._send(HTTPStatus.OK, (STATIC_DIR / name).read_bytes(), kind)
            if not path.startswith("/api/"):
                return self._error(HTTPStatus.NOT_FOUND, "not found")
            denied = self._api_allowed(post)
            if denied:
                return self._error(HTTPStatus.FORBIDDEN, denied)
            if post:
                return self._json(HTTPStatus.OK, self._post(path))
            return self._json(HTTPStatus.OK, self._get(path, query))
        except ApiError as exc:
            return self._error(exc.status, str(exc), **exc.extra)
        except CurateError as exc:
            return self._error(HTTPStatus.BAD_REQUEST, str(exc))
        except ConnectionError:
            raise  # the browser went away: Server.handle_error ignores it
        except (sqlite3.Error, OSError) as exc:
            # e.g. another process held the workspace past SQLite's busy timeout, or the disk is
            # full: the request's transaction rolled back, so say so rather than drop the connection
            return self._error(HTTPStatus.SERVICE_UNAVAILABLE,
                               f"the workspace could not be read or written ({exc}); nothing was changed: try again")

    def _reviewer(self, query: dict) -> str:
        name = query.get("reviewer") or self.app.reviewer
        if not name:
            raise ApiError(HTTPStatus.BAD_REQUEST, "no reviewer: open the page with ?reviewer=NAME")
        return annotator_name(name)[len("human:"):]

    def _get(self, path: str, query: dict):
        if path == "/api/config":
            return self.app.config()
        if path == "/api/queue":
            return self.app.queue_state(query.get("name") or self.app.queue, self._reviewer(query))
        if path == "/api/item":
            return self.app.item(query.get("id", ""), self._reviewer(query), query.get("queue"))
        raise ApiError(HTTPStatus.NOT_FOUND, "not found")

    def _post(self, path: str):
        if path != "/api/verdict":
            raise ApiError(HTTPStatus.NOT_FOUND, "not found")
        length = self.headers.get("Content-Length") or "0"
        if not (length.isascii() and length.isdigit()):
            raise ApiError(HTTPStatus.BAD_REQUEST, f"Content-Length must be a number of bytes, not {length[:20]!r}")
        length = int(length)
        if length <= 0 or length > MAX_BODY:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"body must be 1..{MAX_BODY} bytes")
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError:
            raise ApiError(HTTPStatus.BAD_REQUEST, "body is not JSON") from None
        except RecursionError:  # a small body can nest deeper than Python's JSON reader goes
            raise ApiError(HTTPStatus.BAD_REQUEST, "body nests values too deeply") from None
        if not isinstance(body, dict):
            raise ApiError(HTTPStatus.BAD_REQUEST, "body must be a JSON object")
        return self.app.save(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # the browser went away mid-reply (a closed tab): nothing to report
        super().handle_error(request, client_address)


def make_server(app: ReviewApp, port: int = 8000) -> ThreadingHTTPServer:
    """A server bound to 127.0.0.1:``port`` (0: any free port); call ``serve_forever``."""
    handler = type("ReviewHandler", (Handler,), {"app": app, "port": port})
    server = Server((HOST, port), handler)
    handler.port = server.server_address[1]
    return server
