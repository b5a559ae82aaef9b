"""One lm-eval process for benchmarks/scale_side_by_side.py: load a model once with one of lm-eval's
backends (hf, vllm), run each exported task group ``--repeats`` times, and time what lm-eval itself
spends computing log-likelihoods (its ``LM.loglikelihood``) apart from loading and task building.

It imports lm-eval and the standard library only, so it runs in any environment that has lm-eval:
the project's (hf) or vLLM's own (.venv-vllm, for lm-eval's vllm backend). The last repeat's
samples are written as ``lm_eval --log_samples --output_path OUT`` writes them, for
`curate import-scores --format lm-eval-samples`. Prints one line, ``MARK`` and JSON (vLLM prints
to standard output too).

    python benchmarks/lm_eval_driver.py --model hf --model-args pretrained=FOLDER,dtype=float32 \\
        --device cpu --batch-size 32 --tasks TASKS --group curate_hellaswag --out OUT
"""
from __future__ import annotations

import argparse
import json
import time

MARK = "LM_EVAL_DRIVER "


def timed_loglikelihood(lm, seconds: list[float]) -> None:
    """Wrap ``lm.loglikelihood`` so each call's seconds are appended to ``seconds``."""
    inner = lm.loglikelihood

    def loglikelihood(requests, *args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(requests, *args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - start)
    lm.loglikelihood = loglikelihood


def evaluate(lm, tasks: str, group: str, out: str | None, repeats: int) -> dict:
    """``repeats`` runs of ``group``; the fastest run's log-likelihood seconds and wall seconds."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    runs = []
    for r in range(repeats):
        seconds: list[float] = []
        timed_loglikelihood(lm, seconds)
        tracker = EvaluationTracker(output_path=out) if out and r == repeats - 1 else None
        start = time.perf_counter()
        results = lm_eval.simple_evaluate(model=lm, tasks=[group], log_samples=tracker is not None,
                                          task_manager=TaskManager(include_path=tasks, include_defaults=False),
                                          evaluation_tracker=tracker)
        runs.append({"wall_seconds": round(time.perf_counter() - start, 3),
                     "loglikelihood_seconds": round(sum(seconds), 3)})
        del lm.loglikelihood  # the wrapper is an instance attribute: the class's method again
        if tracker is not None:
            samples = results.pop("samples")
            tracker.save_results_aggregated(results=results, samples=samples)
            for task in results["configs"]:
                tracker.save_results_samples(task_name=task, samples=samples[task])
    best = min(runs, key=lambda run: run["loglikelihood_seconds"])
    return {"group": group, **best, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="lm-eval's backend name: hf, vllm, ...")
    parser.add_argument("--model-args", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", default="32")
    parser.add_argument("--tasks", required=True, help="the folder `curate export WS lm-eval-tasks` wrote")
    parser.add_argument("--group", action="append", required=True, help="a task group; repeat for more")
    parser.add_argument("--out", action="append", help="per group: where its samples go (omit: none written)")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()

    import lm_eval
    from lm_eval.api.registry import get_model

    start = time.perf_counter()
    lm = get_model(args.model).create_from_arg_string(
        args.model_args, {"batch_size": args.batch_size, "device": args.device})
    load = time.perf_counter() - start
    outs = args.out or [None] * len(args.group)
    groups = [evaluate(lm, args.tasks, g, o, args.repeats) for g, o in zip(args.group, outs)]
    print(MARK + json.dumps({"lm_eval": lm_eval.__version__, "backend": args.model, "load_seconds": round(load, 3),
                      "groups": groups}), flush=True)


if __name__ == "__main__":
    main()
