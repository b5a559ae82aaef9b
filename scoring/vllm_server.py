"""A running vLLM OpenAI-compatible server (``vllm serve`` / ``python -m
vllm.entrypoints.openai.api_server``), as the vllm backend's ``-o server URL`` reaches it:
/v1/completions with token-id prompts, ``prompt_logprobs`` and ``logprob_token_ids`` (vLLM's own
request fields).

Credentials: ``$VLLM_API_KEY``, when set, goes as the bearer token (the server's --api-key); a
URL's ``user:password@`` goes as HTTP basic authentication (a proxy in front of the server),
never into a message. Every call waits at most ``timeout`` seconds for the reply (the start-up
questions, /v1/models and /version, at most ``QUESTION_TIMEOUT``). Every reply is checked
against what a vLLM server sends: a service that is not vLLM (an HTML page, JSON of another
shape) or a completion without what was asked (its prompt's log-probabilities, a choice per
prompt, the asked token ids) is one line naming the URL and what is missing, never a traceback.
"""
from __future__ import annotations

import base64
import json
import os
import socket
import urllib.error
import urllib.request
from urllib.parse import unquote, urlsplit, urlunsplit

from curate.core.errors import CurateError
from curate.core.secrets import redact

#: Seconds /v1/models and /version may take: they answer at once on a server that is up.
QUESTION_TIMEOUT = 30
#: What a reply's start is shown as, in the line saying it is not vLLM's.
SHOWN = 60


class NotVllm(CurateError):
    """A reply that is not what a vLLM server sends."""


class Server:
    """The server at ``url``, its model and ``max_model_len`` read once (``timeout``: seconds a
    completions call may take)."""
    python = None

    def __init__(self, url: str, *, timeout: float):
        self.url, self.auth = split_credentials(url.rstrip("/"))
        self.url = self.url.removesuffix("/v1")
        self.shown, self.timeout = redact(url.rstrip("/")).removesuffix("/v1"), timeout
        if self.auth and os.environ.get("VLLM_API_KEY"):
            raise CurateError(f"-o server {self.shown}: the URL carries a user and password and $VLLM_API_KEY is set; "
                              "a request takes one of them: leave one out")
        models = self.call("GET", "/v1/models")
        data = models.get("data") if isinstance(models, dict) else None
        if not isinstance(data, list) or not data or not isinstance(data[0], dict) or "id" not in data[0]:
            raise NotVllm(f"{self.where('/v1/models')}: the reply lists no model (no 'data' list with an 'id'): "
                          "is this a vLLM server (vllm serve)?")
        self.model, self.max_model_len = data[0]["id"], data[0].get("max_model_len")
        if not isinstance(self.max_model_len, int) or self.max_model_len < 2:
            raise NotVllm(f"{self.where('/v1/models')}: the reply does not say the model's max_model_len: not a vLLM "
                          "server?")
        version = self.call("GET", "/version")
        self.version = str(version.get("version", "unknown")) if isinstance(version, dict) else "unknown"

    def where(self, path: str) -> str:
        return f"vLLM server {self.shown}{path}"

    def call(self, method: str, path: str, body: dict | None = None):
        """The reply's JSON; one line for an error, no answer in time, or a reply that is not JSON."""
        headers = {"Content-Type": "application/json"}
        if os.environ.get("VLLM_API_KEY"):
            headers["Authorization"] = f"Bearer {os.environ['VLLM_API_KEY']}"
        elif self.auth:
            headers["Authorization"] = "Basic " + base64.b64encode(self.auth.encode()).decode()
        data = json.dumps(body).encode() if body is not None else None
        wait = self.timeout if body is not None else min(self.timeout, QUESTION_TIMEOUT)
        request = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=wait) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise CurateError(redact(f"{self.where(path)}: HTTP {exc.code}: {error_detail(exc)}")) from None
        except ValueError as exc:  # http.client.InvalidURL: a port that is not a number, a space in the host
            raise CurateError(redact(f"-o server {self.shown}: not a URL a request can go to ({exc})")) from None
        except OSError as exc:  # URLError, or the timeout itself while reading
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise CurateError(f"{self.where(path)}: no answer within {wait:g} s (-o server-timeout); scores "
                                  "stored before are kept: run the command again once it answers") from None
            raise CurateError(redact(f"vLLM server {self.shown} unreachable ({reason}); scores stored before are "
                                     "kept: run the command again once it answers")) from None
        try:
            return json.loads(raw)
        except ValueError:
            start = raw[:SHOWN].decode("utf-8", "replace").replace("\n", " ").strip()
            raise NotVllm(redact(f"{self.where(path)}: the reply is not JSON (it starts {start!r}): is this a vLLM "
                                 "server (vllm serve)?")) from None

    def score(self, prompts: list[dict]) -> list[dict]:
        """One /v1/completions call per set of asked next tokens (a request takes one set), every
        prompt of the set in it."""
        replies: list[dict | None] = [None] * len(prompts)
        groups: dict[tuple, list[int]] = {}
        for i, p in enumerate(prompts):
            groups.setdefault((p["lp"], tuple(sorted(p["next"]))), []).append(i)
        for (lp, asked), which in groups.items():
            body = {"model": self.model, "prompt": [prompts[i]["ids"] for i in which], "max_tokens": 1,
                    "temperature": 0, "return_tokens_as_token_ids": True}
            if lp:
                body["prompt_logprobs"] = 0
            if asked:
                body["logprobs"], body["logprob_token_ids"] = len(asked), list(asked)
            for i, choice in zip(which, self.choices(self.call("POST", "/v1/completions", body), len(which))):
                replies[i] = self.reply(prompts[i], choice, lp)
        return replies

    def choices(self, answer, n: int) -> list[dict]:
        """The reply's choices in prompt order: one per prompt sent."""
        where = self.where("/v1/completions")
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or not all(isinstance(c, dict) and isinstance(c.get("index"), int)
                                                    for c in choices):
            raise NotVllm(f"{where}: the reply has no list of 'choices' with an 'index' each: is this a vLLM server?")
        if sorted(c["index"] for c in choices) != list(range(n)):
            raise NotVllm(f"{where}: {len(choices)} choices for {n} prompts sent: not what a vLLM server answers")
        return sorted(choices, key=lambda c: c["index"])

    def reply(self, prompt: dict, choice: dict, lp: bool) -> dict:
        """A choice as the worker's results are (``scoring/vllm_worker.py``), every number checked
        to be there: the prompt's own tokens' log-probabilities and ranks, the asked next tokens'."""
        try:
            return read_choice(prompt, choice, lp)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise NotVllm(f"{self.where('/v1/completions')}: choice {choice.get('index')}: {missing(exc, prompt, lp)}: "
                          "the server did not score the token ids sent (not vLLM, or not vLLM's token-id prompts "
                          "and prompt_logprobs)") from None

    def close(self) -> None:
        pass


def read_choice(prompt: dict, choice: dict, lp: bool) -> dict:
    ids, out = prompt["ids"], {"lp": None, "greedy": None, "asked": prompt["next"], "next": [], "top": None}
    if lp:
        positions = choice["prompt_logprobs"]
        if not isinstance(positions, list) or len(positions) != len(ids):
            raise ValueError(f"prompt_logprobs for {len(positions) if isinstance(positions, list) else 0} tokens, "
                             f"{len(ids)} sent")
        positions = positions[1:]
        out["lp"] = [float(positions[j][str(ids[j + 1])]["logprob"]) for j in range(len(ids) - 1)]
        out["greedy"] = [int(positions[j][str(ids[j + 1])]["rank"]) == 1 for j in range(len(ids) - 1)]
    if prompt["next"]:
        logprobs = choice["logprobs"]
        after = logprobs["top_logprobs"][0]
        out["next"] = [float(after[f"token_id:{t}"]) for t in prompt["next"]]
        out["top"] = int(str(logprobs["tokens"][0]).removeprefix("token_id:"))
    return out


def missing(exc: Exception, prompt: dict, lp: bool) -> str:
    """What a choice lacks, in words."""
    if isinstance(exc, KeyError):
        key = str(exc.args[0]) if exc.args else ""
        if key in ("prompt_logprobs", "logprobs", "top_logprobs", "tokens"):
            return f"no {key!r}"
        if key.removeprefix("token_id:").isdigit():
            return f"no log-probability of token id {key.removeprefix('token_id:')}"
        return f"no {key!r}"
    if isinstance(exc, ValueError) and "sent" in str(exc):
        return str(exc)
    return f"the log-probabilities are not where vLLM puts them ({type(exc).__name__})"


def split_credentials(url: str) -> tuple[str, str | None]:
    """(the URL without ``user:password@``, ``user:password`` or None)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        netloc = host + (f":{parts.port}" if parts.port else "")
    except ValueError:
        raise CurateError(redact(f"-o server {url}: the port is not a number")) from None
    user = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), user


def error_detail(exc: urllib.error.HTTPError) -> str:
    detail = exc.read().decode("utf-8", "replace")
    try:
        detail = json.loads(detail).get("error", {}).get("message", detail)
    except (ValueError, AttributeError):
        pass
    return str(detail).replace("\n", " ")[:300]
