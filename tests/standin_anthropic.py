"""A small local stand-in for the parts of the Anthropic API that llm-katan does not serve.

llm-katan (the real test server used where it can be) has no Message Batches endpoints, cannot
send a spend-limit error, a refusal or a 529, and its echo backend always answers a tool call with
dummy arguments. This stand-in answers ``POST /v1/messages`` with well-formed tool calls derived
from the item text, serves ``/v1/messages/batches`` (create, retrieve, results), and injects the
faults a test scripts. It is a test double, used only where no real server can play the part.
"""
from __future__ import annotations

import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StandIn:
    """Run with ``with StandIn(...) as s:``; ``s.url`` is the base URL.

    Faults: ``statuses`` -- HTTP statuses returned by the first messages requests, in order;
    ``spend_limit_after`` -- after that many answered requests every request gets the API's 400
    "credit balance is too low"; ``refuse`` -- items whose text contains it get stop_reason
    'refusal'; ``malformed`` -- items whose text contains it get a text reply with no tool call;
    ``batch_faults`` -- result types ('errored', 'expired') for the first batch's requests by
    position; ``polls_before_end`` -- retrieve calls answered 'in_progress' before 'ended';
    ``text_reply`` -- for requests without tools (generation), a function of the request body
    giving the reply text (None: a refusal).
    """

    def __init__(self, *, statuses=(), spend_limit_after=None, refuse=None, malformed=None,
                 batch_faults=None, polls_before_end=1, text_reply=None):
        self.statuses = list(statuses)
        self.spend_limit_after = spend_limit_after
        self.refuse, self.malformed = refuse, malformed
        self.batch_faults = dict(batch_faults or {})
        self.polls_before_end = polls_before_end
        self.text_reply = text_reply
        self.lock = threading.Lock()
        self.answered = 0
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

    def message(self, body: dict, first: bool) -> dict:
        text = json.dumps(body["messages"])
        usage = {"input_tokens": 120, "output_tokens": 40,
                 "cache_creation_input_tokens": 400 if first else 0, "cache_read_input_tokens": 0 if first else 400}
        msg = {"id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message", "role": "assistant",
               "model": body["model"] + "-20990101", "stop_sequence": None, "usage": usage}
        if self.refuse and self.refuse in text:
            return {**msg, "content": [], "stop_reason": "refusal"}
        if "tools" not in body:
            reply = self.text_reply(body) if self.text_reply else ""
            if reply is None:
                return {**msg, "content": [], "stop_reason": "refusal"}
            return {**msg, "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn"}
        if self.malformed and self.malformed in text:
            return {**msg, "content": [{"type": "text", "text": '{"labels": oops'}], "stop_reason": "end_turn"}
        return {**msg, "content": [self.tool_answer(body)], "stop_reason": "tool_use"}

    def messages(self, body: dict) -> tuple[int, dict]:
        with self.lock:
            self.requests.append(body)
            if self.statuses:
                status = self.statuses.pop(0)
                return status, {"type": "error", "error": {"type": "api_error", "message": f"injected {status}"}}
            if self.spend_limit_after is not None and self.answered >= self.spend_limit_after:
                return 400, {"type": "error", "error": {"type": "invalid_request_error", "message":
                             "Your credit balance is too low to access the Anthropic API."}}
            self.answered += 1
            first = self.answered == 1
        return 200, self.message(body, first)

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
                    first = self.answered == 1
                result = {"type": "succeeded", "message": self.message(req["params"], first)}
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
                self.wfile.write(data)

            def do_POST(self):
                standin.headers.append(dict(self.headers))
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if self.path.startswith("/v1/messages/batches"):
                    return self.reply(200, standin.create_batch(body))
                if self.path.startswith("/v1/messages"):
                    return self.reply(*standin.messages(body))
                self.reply(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

            def do_GET(self):
                standin.headers.append(dict(self.headers))
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
