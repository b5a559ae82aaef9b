"""Load a page in headless Chromium and report what a reader would see go wrong, or drive it.

A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (JSON messages
separated by NUL bytes on file descriptors 3 and 4), so no driver or extra package is needed:
a shell ``exec`` maps the child's stdin/stdout onto fds 3/4. Used by the report tests and, with
``Tab`` (key presses, script evaluation, screenshots), by the review app's tests.
"""
from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--remote-debugging-pipe"]

# Every image must decode; report how many there are and their natural sizes.
PROBE = """Promise.all(Array.from(document.images).map(img => img.decode().then(
    () => ({ok: true, w: img.naturalWidth, h: img.naturalHeight}),
    () => ({ok: false, w: img.naturalWidth, h: img.naturalHeight}))))
  .then(images => JSON.stringify({title: document.title, images,
                                  tables: document.querySelectorAll('table').length,
                                  text: document.body.innerText.length}))"""


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def require_chromium() -> str:
    """Debian's chromium, or skip the test (fail it where CI sets BENCHCURATE_REQUIRE_BROWSER,
    having installed the browser)."""
    import pytest

    binary = find_chromium()
    if binary is None:
        message = "Debian chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("BENCHCURATE_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    return binary


class Browser:
    def __init__(self, binary: str, timeout: float = 60):
        self.timeout, self.next_id, self.events = timeout, 0, []
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        self.log = open(Path(self.profile) / "stderr.log", "wb")
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", 'exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>&2', binary, *FLAGS,
             f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.inbox: queue.Queue = queue.Queue()
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self):
        buf = b""
        while chunk := self.proc.stdout.read1(65536):
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                self.inbox.put(json.loads(msg))
        self.inbox.put(None)

    def _next(self, deadline):
        msg = self.inbox.get(timeout=max(0.01, deadline - time.monotonic()))
        if msg is None:
            raise RuntimeError(f"chromium exited: {self.stderr()[-2000:]}")
        return msg

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.proc.stdin.write(json.dumps(msg).encode() + b"\0")
        self.proc.stdin.flush()
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._next(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, method: str, session: str, since: int = 0) -> dict:
        """The first ``method`` event of ``session`` among events from index ``since`` on."""
        for event in self.events[since:]:
            if event.get("method") == method and event.get("sessionId") == session:
                return event
        deadline = time.monotonic() + self.timeout
        while True:
            event = self._next(deadline)
            self.events.append(event)
            if event.get("method") == method and event.get("sessionId") == session:
                return event

    def drain(self, seconds: float):
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._next(deadline))
        except queue.Empty:
            pass

    def stderr(self) -> str:
        self.log.flush()
        return (Path(self.profile) / "stderr.log").read_text(errors="replace")

    def close(self):
        try:
            if self.proc.poll() is None:
                try:
                    self.call("Browser.close")
                except (RuntimeError, queue.Empty, BrokenPipeError):
                    pass
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)


#: DevTools key descriptions for the keys the tests press (code, Windows virtual key code, text).
KEYS = {"Enter": ("Enter", 13, "\r"), "Escape": ("Escape", 27, ""), "ArrowDown": ("ArrowDown", 40, ""),
        "ArrowUp": ("ArrowUp", 38, ""), "Tab": ("Tab", 9, "")}


class Tab:
    """One page in its own browser context (its own cookies and storage, like another person's
    browser): navigate, evaluate script, press keys, take a screenshot."""

    def __init__(self, browser: Browser, width: int = 1280, height: int = 900):
        self.browser = browser
        context = browser.call("Target.createBrowserContext")["browserContextId"]
        target = browser.call("Target.createTarget", {"url": "about:blank", "browserContextId": context})["targetId"]
        self.session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1, "mobile": False})

    def call(self, method: str, params: dict | None = None) -> dict:
        return self.browser.call(method, params, session=self.session)

    def goto(self, url: str) -> None:
        since = len(self.browser.events)
        self.call("Page.navigate", {"url": url})
        self.browser.wait_for("Page.loadEventFired", self.session, since)

    def reload(self) -> None:
        since = len(self.browser.events)
        self.call("Page.reload", {"ignoreCache": True})
        self.browser.wait_for("Page.loadEventFired", self.session, since)

    def evaluate(self, expression: str):
        reply = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True})
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression}: {reply['exceptionDetails'].get('text')}")
        return reply["result"].get("value")

    def wait_until(self, expression: str, timeout: float = 30):
        """Poll ``expression`` until it is truthy; return its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"still false after {timeout}s: {expression}")
            time.sleep(0.05)

    def press(self, key: str) -> None:
        """A real key press (keyDown with its text, then keyUp), as a keyboard sends it."""
        if key in KEYS:
            code, vk, text = KEYS[key]
        else:
            code, vk, text = (f"Digit{key}" if key.isdigit() else f"Key{key.upper()}"), ord(key.upper()), key
        down = {"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": vk}
        self.call("Input.dispatchKeyEvent", {**down, **({"text": text} if text else {})})
        self.call("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk})

    def screenshot(self, path: Path) -> None:
        import base64
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def errors(self) -> list[str]:
        """Uncaught exceptions and console errors seen on this page so far."""
        return page_errors([e for e in self.browser.events if e.get("sessionId") == self.session])


def page_errors(events: list[dict]) -> list[str]:
    errors = []
    for e in events:
        p = e.get("params", {})
        if e.get("method") == "Runtime.exceptionThrown":
            errors.append(p["exceptionDetails"].get("text", "exception"))
        elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif e.get("method") == "Log.entryAdded" and p["entry"]["level"] == "error":
            errors.append(p["entry"]["text"])
    return errors


def inspect_page(path: Path, binary: str, timeout: float = 60) -> dict:
    """Open ``path`` and return title, images (decoded?, natural sizes), table count and the
    errors seen: console errors, uncaught exceptions and browser log errors (failed loads)."""
    browser = Browser(binary, timeout)
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            browser.call(f"{domain}.enable", session=session)
        browser.call("Page.navigate", {"url": Path(path).resolve().as_uri()}, session=session)
        browser.wait_for("Page.loadEventFired", session)
        result = browser.call("Runtime.evaluate", {"expression": PROBE, "awaitPromise": True,
                                                   "returnByValue": True}, session=session)
        browser.drain(0.5)
        page = json.loads(result["result"]["value"])
        return {**page, "errors": page_errors(browser.events)}
    finally:
        browser.close()
