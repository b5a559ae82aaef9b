"""A small local stand-in for the parts of the Anthropic API that llm-katan does not serve.

llm-katan (the real test server used where it can be) has no Message Batches endpoints, no
``count_tokens`` and no prompt cache, cannot send a spend-limit error, a refusal, a 529 or a 200
that is not JSON, and its echo backend always answers a tool call with dummy arguments. This
stand-in answers ``POST /v1/messages`` with well-formed tool calls derived from the item text,
serves ``/v1/messages/count_tokens`` and ``/v1/messages/batches`` (create, retrieve, results),
and injects the faults a test scripts. It is a test double, used only where no real server can
play the part.

Tokens and the prompt cache follow the API's rules, with a stand-in tokenizer (one token per 4
UTF-8 bytes of each text, rounded up, plus the tool-use system prompt when tools are given):
a prefix marked with ``cache_control`` is cached only when it reaches the model's minimum
cacheable length (``CACHE_MINIMUM``, from Anthropic's prompt-caching documentation; kept here,
apart from the toolkit's own table, so the test checks it against an independent copy); the
first request with a prefix writes it, later ones within 5 minutes read it; an unmarked or
too-short prefix is neither written nor read.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: Minimum cacheable prompt length by model prefix (longest prefix wins; others 1024).
CACHE_MINIMUM = {"claude-haiku-4-5": 4096, "claude-opus-4-5": 4096, "claude-3-5-haiku": 2048,
                 "claude-3-haiku": 2048}
TOOL_PROMPT = 313
CACHE_TTL = 300.0


def tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4)


def cache_minimum(model: str) -> int:
    matches = [p for p in CACHE_MINIMUM if model.startswith(p)]
    return CACHE_MINIMUM[max(matches, key=len)] if matches else 1024


def content_tokens(content) -> int:
    if isinstance(content, str):
        return tokens(content) + 3
    return sum(tokens(json.dumps(b, ensure_ascii=False)) + 3 for b in content)


def prompt_tokens(body: dict) -> tuple[int, int, bool]:
    """(tokens of the whole prompt, tokens of the prefix up to the last cache_control mark in
    tools or system, whether there is such a mark)."""
    tools = body.get("tools") or []
    system = body.get("system") or []
    system = [{"type": "text", "text": system}] if isinstance(system, str) else system
    prefix, upto, marked = TOOL_PROMPT if tools else 0, 0, False
    for block in [*tools, *system]:
        prefix += tokens(json.dumps(block, ensure_ascii=False)) + 3
        if "cache_control" in block:
            upto, marked = prefix, True
    total = prefix + sum(content_tokens(m["content"]) + 4 for m in body["messages"])
    return total, upto, marked


def unprefixed(path: str) -> str:
    """The request path from "/v1/" on: a gateway's own prefix ("/gw/TOKEN/anthropic") removed."""
    start = path.find("/v1/")
    return path[start:] if start > 0 else path


class StandIn:
    """Run with ``with StandIn(...) as s:``; ``s.url`` is the base URL.

    Faults: ``statuses`` -- HTTP statuses returned by the first messages requests, in order;
    ``spend_limit_after`` -- after that many answered requests every request gets the API's 400
    "credit balance is too low"; ``refuse`` -- items whose text contains it get stop_reason
    'refusal'; ``malformed`` -- items whose text contains it get a text reply with no tool call;
    ``batch_faults`` -- result types ('errored', 'expired') for the first batch's requests by
    position; ``polls_before_end`` -- retrieve calls answered 'in_progress' before 'ended';
    ``body`` -- answer every messages and batch request with HTTP 200 and 'html' (a login page),
    'broken-json' (a cut-off JSON body) or 'other-json' (JSON of another shape); ``echo_key`` --
    put the request's API key and path into each reply's text and model name, as a careless proxy
    might (a gateway prefix before "/v1/" in the path is accepted and echoed);
    ``count_tokens`` -- False: the endpoint does not offer counting (404); ``text_reply`` -- for
    requests without tools (generation), a function of the request body giving the reply text
    (None: a refusal); ``delay`` -- seconds each messages reply is held back after it is made and
    counted in ``billed`` (the API bills a request it completes, whether or not the client still
    waits for the reply); ``count_under`` -- divide every ``count_tokens`` answer by this (an
    endpoint that under-counts).
    """

    def __init__(self, *, statuses=(), spend_limit_after=None, refuse=None, malformed=None,
                 batch_faults=None, polls_before_end=1, body=None, echo_key=False, count_tokens=True,
                 text_reply=None, delay=0.0, count_under=1):
        self.body, self.echo_key, self.count_tokens = body, echo_key, count_tokens
        self.cache: dict[str, float] = {}   # prefix hash -> last use
        self.statuses = list(statuses)
        self.spend_limit_after = spend_limit_after
        self.refuse, self.malformed = refuse, malformed
        self.batch_faults = dict(batch_faults or {})
        self.polls_before_end = polls_before_end
        self.text_reply = text_reply
        self.delay, self.count_under = delay, count_under
        self.billed = []            # usage of every messages reply made (and so billed)
        self.lock = threading.Lock()
        self.answered = 0
        self.counted = 0            # count_tokens requests answered
        self.requests = []          # every messages request body
        self.headers = []           # every request's headers
        self.batches = {}           # id -> {"requests": [...], "polls": int}

    # --- answers ---------------------------------------------------------------------------

    @staticmethod
    def tool_answer(body: dict) -> dict:
        content = body["messages"][0]["content"]
        text = content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)
        tool = body["tools"][0]["name"]
        if tool == "submit_labels":
            args = {"labels": ["ungrammatical_prompt"] if " ," in text else ["high_quality"]}
        else:
            lines = [line for line in text.splitlines() if re.match(r"[A-Z]\. ", line)]
            letters = [line[0] for line in lines]
            gold = next(line[0] for line in lines if line.endswith("(marked correct)"))
            args = {"best": gold, "equally_good": [], "all_implausible": False,
                    "worst": next(x for x in letters if x != gold)}
        return {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:12]}", "name": tool, "input": args}

    def usage(self, body: dict) -> dict:
        """Input and cache tokens as the API reports them, by the caching rules above."""
        total, prefix, marked = prompt_tokens(body)
        usage = {"input_tokens": total, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not marked or prefix < cache_minimum(body["model"]):
            return usage
        cached = {k: body.get(k) for k in ("model", "tools", "system")}
        key = hashlib.sha256(json.dumps(cached, sort_keys=True).encode()).hexdigest()
        with self.lock:
            hit = time.monotonic() - self.cache.get(key, -1e9) < CACHE_TTL
            self.cache[key] = time.monotonic()
        usage["cache_read_input_tokens" if hit else "cache_creation_input_tokens"] = prefix
        usage["input_tokens"] = total - prefix
        return usage

    def message(self, body: dict, key: str = "") -> dict:
        text = json.dumps(body["messages"])
        msg = {"id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message", "role": "assistant",
               "model": body["model"] + "-20990101" + (f"-{key}" if self.echo_key else ""), "stop_sequence": None}
        if self.refuse and self.refuse in text:
            content, stop = [], "refusal"
        elif not body.get("tools"):
            reply = self.text_reply(body) if self.text_reply else "ok"
            content, stop = ([], "refusal") if reply is None else ([{"type": "text", "text": reply}], "end_turn")
        elif self.malformed and self.malformed in text:
            content, stop = [{"type": "text", "text": '{"labels": oops'}], "end_turn"
        else:
            content, stop = [self.tool_answer(body)], "tool_use"
        if self.echo_key:
            content = [{"type": "text", "text": f"request made with key {key}"}, *content]
        output = min(body["max_tokens"], sum(tokens(json.dumps(b)) for b in content) + 5)
        return {**msg, "content": content, "stop_reason": stop, "usage": {**self.usage(body), "output_tokens": output}}

    def messages(self, body: dict, key: str = "") -> tuple[int, dict]:
        with self.lock:
            self.requests.append(body)
            if self.statuses:
                status = self.statuses.pop(0)
                return status, {"type": "error", "error": {"type": "api_error", "message": f"injected {status}"}}
            if self.spend_limit_after is not None and self.answered >= self.spend_limit_after:
                return 400, {"type": "error", "error": {"type": "invalid_request_error", "message":
                             "Your credit balance is too low to access the Anthropic API."}}
            self.answered += 1
        message = self.message(body, key)
        with self.lock:
            self.billed.append(message["usage"])
        time.sleep(self.delay)
        return 200, message

    # --- batches ---------------------------------------------------------------------------

    def batch_object(self, batch_id: str) -> dict:
        b = self.batches[batch_id]
        ended = b["polls"] > self.polls_before_end
        return {"id": batch_id, "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
                "request_counts": {"processing": 0 if ended else len(b["requests"]), "succeeded": 0, "errored": 0,
                                   "canceled": 0, "expired": 0},
                "created_at": "2026-01-01T00:00:00Z", "expires_at": "2026-01-02T00:00:00Z",
                "ended_at": "2026-01-01T00:10:00Z" if ended else None, "archived_at": None,
                "cancel_initiated_at": None,
                "results_url": f"{self.url}/v1/messages/batches/{batch_id}/results" if ended else None}

    def create_batch(self, body: dict) -> dict:
        with self.lock:
            batch_id = f"msgbatch_{uuid.uuid4().hex[:12]}"
            faults = self.batch_faults if not self.batches else {}
            self.batches[batch_id] = {"requests": body["requests"], "polls": 0, "faults": faults}
        return self.batch_object(batch_id)

    def results(self, batch_id: str) -> str:
        lines = []
        for n, req in enumerate(self.batches[batch_id]["requests"]):
            fault = self.batches[batch_id]["faults"].get(n)
            if fault == "errored":
                result = {"type": "errored", "error": {"type": "error", "error": {"type": "api_error", "message": "x"}}}
            elif fault == "expired":
                result = {"type": "expired"}
            else:
                with self.lock:
                    self.answered += 1
                result = {"type": "succeeded", "message": self.message(req["params"])}
            lines.append(json.dumps({"custom_id": req["custom_id"], "result": result}))
        return "\n".join(lines) + "\n"

    # --- server ----------------------------------------------------------------------------

    def __enter__(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status, payload, content_type="application/json"):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting
                    pass

            def do_POST(self):
                standin.headers.append(dict(self.headers))
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                key = self.headers.get("x-api-key") or self.headers.get("authorization", "").removeprefix("Bearer ")
                key, self.path = f"{key} at {self.path}", unprefixed(self.path)
                if self.path.startswith("/v1/messages/count_tokens"):
                    if not standin.count_tokens:
                        return self.reply(404, {"type": "error", "error": {"type": "not_found_error", "message": "Not Found"}})
                    standin.counted += 1
                    return self.reply(200, {"input_tokens": prompt_tokens(body)[0] // standin.count_under})
                if standin.body == "html":
                    return self.reply(200, b"<html><body><h1>Sign in</h1></body></html>", "text/html")
                if standin.body == "broken-json":
                    return self.reply(200, b'{"id": "msg_1", "type": "message", "content": [{"ty', "application/json")
                if standin.body == "other-json":
                    return self.reply(200, {"status": "ok", "result": "accepted"})
                if self.path.startswith("/v1/messages/batches"):
                    return self.reply(200, standin.create_batch(body))
                if self.path.startswith("/v1/messages"):
                    return self.reply(*standin.messages(body, key))
                self.reply(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

            def do_GET(self):
                standin.headers.append(dict(self.headers))
                self.path = unprefixed(self.path)
                parts = self.path.split("?")[0].strip("/").split("/")
                if parts[:3] == ["v1", "messages", "batches"] and len(parts) >= 4 and parts[3] in standin.batches:
                    if len(parts) == 5 and parts[4] == "results":
                        return self.reply(200, standin.results(parts[3]).encode(), "application/x-jsonl")
                    standin.batches[parts[3]]["polls"] += 1
                    return self.reply(200, standin.batch_object(parts[3]))
                self.reply(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class OverloadedAfterFirst(StandIn):
    """Answers the first messages request, then 529 to every other: a re-ask outlasts its retries."""

    def messages(self, body, key=""):
        if self.answered >= 1:
            with self.lock:
                self.requests.append(body)
            return 529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        return super().messages(body, key)
