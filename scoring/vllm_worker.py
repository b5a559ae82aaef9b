"""The vLLM worker: run by file path with the interpreter of vLLM's own environment, it loads one
model with ``vllm.LLM`` and answers scoring requests, one JSON object per line on stdin and
stdout. It imports only vLLM and the standard library (never benchcurate), so vLLM's pins
(transformers, numpy, fastapi) need not agree with benchcurate's: the backend that drives it is
``scoring/backends/vllm.py``.

    python vllm_worker.py '{"model": FOLDER, "dtype": "float32", ...}'   # vllm.LLM's keywords

First line out: ``{"ready": {"vllm": VERSION, "max_model_len": N}}`` or ``{"error": LINE}``. Then
per request line ``{"prompts": [{"ids": [...], "lp": bool, "next": [...]}, ...], "echo": bool}``
one reply ``{"results": [...]}`` (or ``{"error": LINE}``), a result per prompt:

- ``lp``, ``greedy``: for prompt positions 1..n-1 (asked with ``"lp": true``, else null), the
  log-probability of the prompt's own token there and whether it is the model's top token
  (vLLM's ``prompt_logprobs=0``: the actual token's log-probability and rank);
- ``next``: the log-probability of each of ``next`` as the token after the whole prompt
  (``logprob_token_ids``), and ``top``: the greedy next token (temperature 0);
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
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}".rstrip(": ")


def reply(channel, obj) -> None:
    channel.write(json.dumps(obj) + "\n")
    channel.flush()


def score(llm, SamplingParams, TokensPrompt, prompts: list, echo: bool) -> list:
    """One ``llm.generate`` call over every prompt (vLLM schedules them), one result each."""
    params = []
    for p in prompts:
        nxt = sorted(set(p["next"]))
        params.append(SamplingParams(max_tokens=1, temperature=0.0, detokenize=False,
                                     prompt_logprobs=0 if p["lp"] else None,
                                     logprob_token_ids=nxt or None))
    outputs = llm.generate([TokensPrompt(prompt_token_ids=p["ids"]) for p in prompts], params, use_tqdm=False)
    results = []
    for p, out in zip(prompts, outputs):
        ids, res = p["ids"], {"lp": None, "greedy": None}
        if p["lp"]:
            positions = out.prompt_logprobs[1:]
            res["lp"] = [positions[j][ids[j + 1]].logprob for j in range(len(ids) - 1)]
            res["greedy"] = [positions[j][ids[j + 1]].rank == 1 for j in range(len(ids) - 1)]
        sample = out.outputs[0]
        res["top"] = sample.token_ids[0]
        after = sample.logprobs[0] if sample.logprobs else {}
        res["next"] = [after[t].logprob for t in p["next"]]
        if echo:
            res["ids"] = list(out.prompt_token_ids)
        results.append(res)
    return results


def main() -> int:
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # everything else written to stdout, here or by vLLM's processes, goes to stderr
    sys.stdout = sys.stderr
    for key, value in QUIET.items():
        os.environ.setdefault(key, value)
    try:
        settings = json.loads(sys.argv[1])
        import vllm
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt
    except Exception as exc:  # no vllm here, or a broken install: the backend says so in one line
        reply(channel, {"error": f"cannot import vllm with {sys.executable}: {first_line(exc)}"})
        return 2
    try:
        llm = LLM(**settings)
    except Exception as exc:
        reply(channel, {"error": f"vllm.LLM could not load the model: {first_line(exc)}"})
        return 2
    reply(channel, {"ready": {"vllm": vllm.__version__, "max_model_len": llm.llm_engine.model_config.max_model_len}})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            reply(channel, {"results": score(llm, SamplingParams, TokensPrompt, request["prompts"],
                                             request.get("echo", False))})
        except Exception as exc:
            reply(channel, {"error": f"vLLM failed on a request: {first_line(exc)}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
