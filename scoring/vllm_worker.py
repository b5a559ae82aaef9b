"""The vLLM worker: run by file path with the interpreter of vLLM's own environment, it loads one
model with ``vllm.LLM`` and answers scoring requests, one JSON object per line on stdin and
stdout. It imports only vLLM (and numpy, which vLLM brings, for text scores) and the standard
library, never benchcurate, so vLLM's pins (transformers, numpy, fastapi) need not agree with
benchcurate's: the backend that drives it is ``scoring/backends/vllm.py``.

    python vllm_worker.py

First line out, once vLLM is imported: ``{"machine": {...}}``, what vLLM will run on and the
memory it has (``machine``), or ``{"error": LINE}``. The backend sizes vLLM's memory from it
and answers with one line ``{"load": {...}}`` (vllm.LLM's keywords); the worker loads the model
and says ``{"ready": {"vllm": VERSION, "max_model_len": N}}`` or ``{"error": LINE}``. Then per
request line ``{"prompts": [{"ids": [...], "lp": bool, "next": [...]}, ...], "echo": bool}``
one reply ``{"results": [...]}`` (or ``{"error": LINE}``), a result per prompt:

- ``lp``, ``greedy``: for prompt positions 1..n-1 (asked with ``"lp": true``, else null), the
  log-probability of the prompt's own token there and whether it is the model's top token
  (vLLM's ``prompt_logprobs=0``: the actual token's log-probability and rank);
- ``next``: the log-probability of each of ``next`` as the token after the whole prompt
  (``logprob_token_ids``), and ``top``: the greedy next token (temperature 0);
- ``mu``, ``sigma``, ``next_mu``, ``next_sigma`` (asked with ``"stats": true``): the mean and
  standard deviation of log p(z) under the whole next-token distribution at each prompt position
  1..n-1 and after the prompt (text scores' Min-K%++; vLLM's ``prompt_logprobs=-1`` and
  ``logprobs=-1``, the model loaded with ``max_logprobs=-1``);
- ``ids`` (with ``"echo": true``): the token ids vLLM scored, to check they are those sent.

vLLM's own log lines go to stderr: the worker moves file descriptor 1 there first (vLLM's
processes inherit it), keeping the protocol on a copy of the original stdout.
"""
import json
import os
import sys

QUIET = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "VLLM_DO_NOT_TRACK": "1",
         "VLLM_LOGGING_LEVEL": "WARNING", "TOKENIZERS_PARALLELISM": "false"}


def first_line(exc: BaseException) -> str:
    """The exception as one line: pydantic's validation errors (vLLM's settings) by their
    messages, not by the link to pydantic's docs their text ends with."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            messages = [str(e.get("msg", "")).removeprefix("Value error, ") for e in errors()]
            return f"{type(exc).__name__}: {'; '.join(m for m in messages if m)}"
        except Exception:
            pass
    text = [ln.strip() for ln in str(exc).strip().splitlines()
            if ln.strip() and not ln.strip().startswith("For further information")]
    return f"{type(exc).__name__}: {text[-1] if text else ''}".rstrip(": ")


def reply(channel, obj) -> None:
    channel.write(json.dumps(obj) + "\n")
    channel.flush()


def machine() -> dict:
    """What vLLM runs on and its memory now: on a CPU the NUMA node vLLM binds its memory to
    (vLLM's own reading of it), on GPUs each visible device's free and total memory."""
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        try:
            from vllm.utils.cpu_resource_utils import get_allowed_cpu_list, get_memory_node_info
            cpus = get_allowed_cpu_list()
            node = get_memory_node_info(cpus[0].numa_node)
            return {"device": "cpu", "node": cpus[0].numa_node, "cpus": len(cpus), "total": node.total_memory,
                    "available": node.available_memory}
        except Exception:  # another vLLM's internals: the whole machine's memory
            import psutil
            memory = psutil.virtual_memory()
            return {"device": "cpu", "node": None, "cpus": os.cpu_count(), "total": memory.total,
                    "available": memory.available}
    if current_platform.is_cuda_alike():
        import torch
        gpus = [torch.cuda.mem_get_info(i) for i in range(torch.cuda.device_count())]
        return {"device": current_platform.device_type, "gpus": [{"free": f, "total": t} for f, t in gpus]}
    return {"device": current_platform.device_type}


def params_of(SamplingParams, p: dict):
    """One prompt's sampling: its own tokens' log-probabilities (``lp``: the actual token's;
    ``stats``: the whole vocabulary's, as the next token's, in vLLM's flat lists)."""
    stats = p.get("stats", False)
    return SamplingParams(max_tokens=1, temperature=0.0, detokenize=False,
                          prompt_logprobs=(-1 if stats else 0) if p["lp"] else None,
                          logprobs=-1 if stats else None, flat_logprobs=stats,
                          logprob_token_ids=None if stats else (sorted(set(p["next"])) or None))


def score(llm, SamplingParams, TokensPrompt, prompts: list, echo: bool) -> list:
    """One ``llm.generate`` call over every prompt (vLLM schedules them), one result each; a
    prompt asking for statistics in a call of its own, its whole-vocabulary lists reduced before
    the next (one prompt's take tokens x vocabulary floats)."""
    results: list = [None] * len(prompts)
    plain = [i for i, p in enumerate(prompts) if not p.get("stats")]
    calls = [plain] * bool(plain) + [[i] for i, p in enumerate(prompts) if p.get("stats")]
    for which in calls:
        chosen = [prompts[i] for i in which]
        outputs = llm.generate([TokensPrompt(prompt_token_ids=p["ids"]) for p in chosen],
                               [params_of(SamplingParams, p) for p in chosen], use_tqdm=False)
        for i, p, out in zip(which, chosen, outputs):
            results[i] = (read_stats if p.get("stats") else read)(p, out)
            if echo:
                results[i]["ids"] = list(out.prompt_token_ids)
    return results


def read(p: dict, out) -> dict:
    ids, res = p["ids"], {"lp": None, "greedy": None}
    if p["lp"]:
        positions = out.prompt_logprobs[1:]
        res["lp"] = [positions[j][ids[j + 1]].logprob for j in range(len(ids) - 1)]
        res["greedy"] = [positions[j][ids[j + 1]].rank == 1 for j in range(len(ids) - 1)]
    sample = out.outputs[0]
    res["top"] = sample.token_ids[0]
    after = sample.logprobs[0] if sample.logprobs else {}
    res["next"] = [after[t].logprob for t in p["next"]]
    return res


def read_stats(p: dict, out) -> dict:
    """``read``'s result off vLLM's flat whole-vocabulary lists, with the moments of each
    position's distribution: ``mu``, ``sigma`` (prompt positions 1..n-1), ``next_mu``, ``next_sigma``."""
    ids, res = p["ids"], {"lp": None, "greedy": None, "mu": [], "sigma": []}
    if p["lp"]:
        read_off = [at_position(out.prompt_logprobs, j + 1, [ids[j + 1]]) for j in range(len(ids) - 1)]
        res["lp"] = [lps[0] for lps, _, _, _ in read_off]
        res["greedy"] = [ranks[0] == 1 for _, ranks, _, _ in read_off]
        res["mu"], res["sigma"] = [mu for *_, mu, _ in read_off], [sd for *_, sd in read_off]
    sample = out.outputs[0]
    res["top"] = sample.token_ids[0]
    res["next"], _, res["next_mu"], res["next_sigma"] = at_position(sample.logprobs, 0, p["next"])
    return res


def at_position(flat, i: int, tokens: list) -> tuple:
    """At position ``i`` of vLLM's ``FlatLogprobs``: the log-probabilities and ranks of
    ``tokens``, and the mean and standard deviation of log p(z) for z drawn from the position's
    whole distribution (Min-K%++'s mu and sigma, as the engine computes them: a token the model
    rules out adds nothing)."""
    import numpy as np

    lo, hi = flat.start_indices[i], flat.end_indices[i]
    where = [flat.token_ids.index(t, lo, hi) for t in tokens]
    # vLLM lists the position's own (or sampled) token first, then the whole vocabulary by rank,
    # that token again among them: counted once.
    first = lo + 1 if hi - lo > 1 and flat.token_ids[lo] in flat.token_ids[lo + 1:hi] else lo
    lp = np.asarray(flat.logprobs[first:hi], dtype=np.float64)
    prob = np.exp(lp)
    live = prob > 0
    mean = float(np.sum(prob[live] * lp[live]))
    sd = float(np.sqrt(np.sum(prob[live] * (lp[live] - mean) ** 2)))
    return [flat.logprobs[k] for k in where], [flat.ranks[k] for k in where], mean, sd


def load(channel):
    """vLLM imported, the machine reported, the model loaded with the settings the backend
    answers: (the LLM, SamplingParams, TokensPrompt), or None once an error line is sent."""
    try:
        import vllm
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt
        facts = machine()
    except Exception as exc:  # no vllm here, or a broken install: the backend says so in one line
        reply(channel, {"error": f"cannot import vllm with {sys.executable}: {first_line(exc)}"})
        return None
    reply(channel, {"machine": facts})
    line = sys.stdin.readline()
    if not line.strip():
        return None  # the backend gave up (a refusal on its side): nothing to load
    try:
        llm = LLM(**json.loads(line)["load"])
    except Exception as exc:
        reply(channel, {"error": f"vllm.LLM could not load the model: {first_line(exc)}"})
        return None
    reply(channel, {"ready": {"vllm": vllm.__version__, "max_model_len": llm.llm_engine.model_config.max_model_len}})
    return llm, SamplingParams, TokensPrompt


def main() -> int:
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # everything else written to stdout, here or by vLLM's processes, goes to stderr
    sys.stdout = sys.stderr
    for key, value in QUIET.items():
        os.environ.setdefault(key, value)
    loaded = load(channel)
    if loaded is None:
        return 2
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            reply(channel, {"results": score(*loaded, request["prompts"], request.get("echo", False))})
        except Exception as exc:
            reply(channel, {"error": f"vLLM failed on a request: {first_line(exc)}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
