"""Keeping secrets out of everything stored or printed: one redaction function for the toolkit.

A secret is an API key or token read from the environment (``ANTHROPIC_API_KEY``, ``HF_TOKEN``,
...), the Hub token file huggingface_hub keeps, the user:password part of any URL (and its
base64 in a Basic authorization header, which an HTTP client makes of it), and, in the URLs the
environment names, every path segment and query value shaped like a key and every value of a
query parameter named like one (gateways that take their token as
``https://gateway.example/v1/<token>/anthropic`` or ``?key=<token>``). Secrets
come back in unexpected shapes: an endpoint may echo the key in an error or in a model reply; a
key with a non-ASCII character comes back as its UTF-8 bytes read as Latin-1 ("Ã©" for "é"), or
escaped by JSON or ``repr``. ``redact`` replaces each known secret in every one of those shapes,
and any ``scheme://user:password@`` credentials, with ``[redacted]``.

Where it runs: the annotation store (records, raw replies, run records, ledger), the score run
records, the annotation export, and the CLI's stdout and stderr (``redact_streams``), which
every message, progress bar and traceback passes through.
"""
from __future__ import annotations

import base64
import json
import os
import re
import sys
from functools import lru_cache
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlsplit

REDACTED = "[redacted]"

#: Environment variables that hold a secret outright.
SECRET_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
#: Environment variables holding URLs that may carry user:password.
URL_ENV = ("ANTHROPIC_BASE_URL", "HF_ENDPOINT", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
           "http_proxy", "https_proxy", "all_proxy")
#: Shorter values are not treated as secrets: replacing "1" everywhere would wreck every message.
MIN_SECRET = 6

# scheme://userinfo@ -- userinfo is everything up to the '@' that is not a path, space or quote;
# "scheme:/" too, as a URL looks once a path normalization has folded its "//".
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*:/{1,2})[^/\s@'\"<>]+@")


def _hub_token_path() -> str:
    home = os.environ.get("HF_HOME") or str(Path.home() / ".cache" / "huggingface")
    return os.environ.get("HF_TOKEN_PATH") or str(Path(home) / "token")


@lru_cache(maxsize=4)
def _hub_token(path: str) -> str | None:
    """The token huggingface_hub saved with `hf auth login`, read once, without importing it."""
    try:
        return Path(path).read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


# Key-shaped: 16+ characters with a run of 12+ letters and digits holding both ("sk-ant-api03-x7Gq...",
# a hex or base64url token, a UUID); not "v1", "anthropic", "my-gateway" or a model name like
# "claude-sonnet-4-5-20250929" (its longest such run is 8).
_KEY_RUN = re.compile(r"[A-Za-z0-9]{12,}")
# Query parameters whose value is a credential whatever its shape.
_SECRET_PARAM = re.compile(r"key|token|secret|auth|pass|sig|code|credential", re.IGNORECASE)


def _key_shaped(value: str) -> bool:
    """Whether a URL path segment or query value looks like a key rather than a name."""
    return len(value) >= 16 and any(re.search(r"[A-Za-z]", run) and re.search(r"[0-9]", run)
                                     for run in _KEY_RUN.findall(value))


def _url_secrets(url: str) -> list[str]:
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [p for p in (parts.username, parts.password) if p]
    found += [value for name, value in parse_qsl(parts.query) if _SECRET_PARAM.search(name) or _key_shaped(value)]
    found += [unquote(seg) for seg in parts.path.split("/") if _key_shaped(unquote(seg))]
    if parts.password:
        # also as an HTTP client sends them: the Basic authorization header's base64
        pair = f"{unquote(parts.username or '')}:{unquote(parts.password)}"
        found += [f"{parts.username}:{parts.password}", base64.b64encode(pair.encode("utf-8")).decode("ascii")]
    return found + [unquote(p) for p in found]


def known_secrets() -> tuple[str, ...]:
    """Every secret this process could leak, in every shape, longest first."""
    env = tuple(os.environ.get(name) for name in SECRET_ENV + URL_ENV + ("HF_HOME", "HF_TOKEN_PATH"))
    return _secrets(env)


@lru_cache(maxsize=8)
def _secrets(env: tuple) -> tuple[str, ...]:
    values = [os.environ.get(name) for name in SECRET_ENV] + [_hub_token(_hub_token_path())]
    for name in URL_ENV:
        values += _url_secrets(os.environ.get(name) or "")
    return _forms(tuple(v for v in values if v))


@lru_cache(maxsize=8)
def _forms(secrets: tuple[str, ...]) -> tuple[str, ...]:
    """Each secret as it may appear in text: as is, JSON- and repr-escaped, percent-encoded, and
    its UTF-8 bytes decoded as Latin-1 (how a server that reads headers as Latin-1 echoes it)."""
    forms = set()
    for s in secrets:
        s = s.strip()
        if len(s) < MIN_SECRET:
            continue
        mojibake = s.encode("utf-8").decode("latin-1")
        for variant in (s, mojibake):
            forms |= {variant, json.dumps(variant)[1:-1], variant.encode("unicode_escape").decode("ascii"),
                      repr(variant)[1:-1], quote(variant, safe="")}
    return tuple(sorted((f for f in forms if len(f) >= MIN_SECRET), key=len, reverse=True))


def redact(text):
    """``text`` with every known secret and any URL credentials replaced by ``[redacted]``
    (non-strings are returned unchanged)."""
    if not isinstance(text, str) or not text:
        return text
    for secret in known_secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _URL_CREDENTIALS.sub(lambda m: m.group("scheme") + REDACTED + "@", text)


def redact_data(value):
    """``redact`` applied to every string inside dicts and lists (run records, settings)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_data(k): redact_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(v) for v in value]
    return value


class RedactingStream:
    """A text stream that redacts what is written to it before passing it on; everything else
    (encoding, buffer, fileno, isatty) is the wrapped stream's, so click and tqdm treat it alike.
    Text written straight to ``.buffer`` as bytes would bypass it; nothing here does that."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        return self._stream.write(redact(text))

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        self._stream.flush()

    def __getattr__(self, name):
        return getattr(self._stream, name)


def redact_streams() -> None:
    """Route this process's stdout and stderr through ``redact`` (the CLI calls it first)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))
