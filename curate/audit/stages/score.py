"""``scoring.models``: each model scored on every item in the section's modes (``scoring.run.Score``,
one run per model, the section's other keys its options); stored scores are reused by content key,
so a rerun computes only what is missing."""
from __future__ import annotations

import time

from curate.audit.stages import AuditStage, Outcome, Run, line
from curate.core.errors import CurateError
from scoring.options import SCORE
from scoring.run import Score


#: Seconds a check-config waits for a scoring server to answer.
SERVER_TIMEOUT = 3


def server_problems(options, plan) -> list[tuple[str, str]]:
    """A vLLM server the scores come from (``scoring.server``) must be up: asked for its models
    (``GET /v1/models``, ``$VLLM_API_KEY`` as its key) with a short timeout. No answer is not
    known from here ("cannot check offline"), an answer that is not a model list a problem."""
    import json
    import os
    import urllib.error
    import urllib.request

    url = getattr(options, "server", None)
    if not url or options.backend != "vllm":
        return []
    if not plan.online:
        plan.unchecked.append((f"scoring.server {url}", "a dry run asks no server"))
        return []
    request = urllib.request.Request(url.rstrip("/") + "/v1/models")
    if os.environ.get("VLLM_API_KEY"):
        request.add_header("Authorization", f"Bearer {os.environ['VLLM_API_KEY']}")
    try:
        with urllib.request.urlopen(request, timeout=SERVER_TIMEOUT) as reply:
            body = json.loads(reply.read(1 << 20) or b"null")
    except urllib.error.HTTPError as exc:
        return [("scoring.server", f"{url} answered GET /v1/models with HTTP {exc.code}: not a vLLM server, or "
                                   f"it refused the key ($VLLM_API_KEY)")]
    except ValueError:
        return [("scoring.server", f"{url} answered GET /v1/models with no JSON: not a vLLM server")]
    except OSError as exc:  # refused, unreachable, timed out
        plan.unchecked.append((f"scoring.server {url}", f"no answer in {SERVER_TIMEOUT} s ({exc}): whether it "
                                                         "serves the model"))
        return []
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        return [("scoring.server", f"{url} answered GET /v1/models without a model list: not a vLLM server")]
    return []


class Step(AuditStage):
    name, section, ORDER, PROVIDES = "score", "scoring", 40, ("scores",)

    @classmethod
    def check(cls, section: dict, config: dict) -> list[tuple[str, str]]:
        """Something to score or import; no backend's own setting (``prefix_cache_mb`` of the
        engine, ``tensor_parallel_size`` of vllm, ...) while the models run on another backend,
        which would ignore it (`curate score -o` refuses it too)."""
        from curate.core.options import in_config

        problems = []
        if not section.get("models") and not section.get("imports"):
            problems.append(("scoring", "give models (with modes) to score, imports to import, or both"))
        backend = section.get("backend", "engine")
        return problems + [(f"scoring.{o.name}", f"is a setting of the {o.backend} backend; scoring.backend is "
                                                 f"{backend}, which would ignore it")
                           for o in in_config(SCORE) if o.backend and o.backend != backend and o.name in section]

    @classmethod
    def from_config(cls, section) -> list[Run]:
        """One run per model, each with the section's options; a few-shot pool file is relative
        to the config file ('evaluated' names the workspace's own items)."""
        pool = section.get("fewshot_pool")
        given = {"fewshot_pool": str(section.input(pool))} if pool not in (None, "evaluated") else {}
        formulations = list(section["formulations"]) if "formulations" in section else None
        return [Run(cls, model_key, Score.from_config(section, model=model, modes=list(section["modes"]),
                                                      formulations=formulations, **given))
                for model_key, model in ((section.name("models") + f"[{i}]", m)
                                         for i, m in enumerate(section.get("models") or ()))]

    @classmethod
    def provides(cls, run: Run, plan) -> set[tuple]:
        """``Score.provides``, scores in no named formulation in the workspace's own."""
        return {(kind, model, mode, form or plan.default_formulation, *rest)
                for kind, model, mode, form, *rest in Score.provides(run.options)}

    @classmethod
    def machine_and_model(cls, run: Run, plan) -> list[tuple[str, str]]:
        """The device and a scoring server (once), and (with the input files) the model: it must
        be found."""
        from curate.audit.needs import Unknown, unresolvable
        from scoring.models import check_device

        problems = []
        if run is plan.config.runs_of(cls.name)[0]:
            try:
                check_device(run.options.device)
            except CurateError as exc:
                problems.append((f"{cls.section}.device", str(exc).replace("--device", "device")))
            problems += server_problems(run.options, plan)
        model = run.options.model
        if plan.files and (why := unresolvable(model, "model")):
            if isinstance(why, Unknown):
                plan.unchecked.append((f"{run.key} {model!r}", why))
            else:
                problems.append((run.key, f"{model!r} cannot be found: {why}"))
        return problems

    @classmethod
    def problems(cls, run: Run, plan) -> list[tuple[str, str]]:
        return cls.machine_and_model(run, plan) + cls.fits(run, plan)

    @classmethod
    def fits(cls, run: Run, plan) -> list[tuple[str, str]]:
        """A rotation (``letters+rK``) that no item has more than K options for: known once the
        workspace holds its items (checked again right after the ingest)."""
        from curate.items.formulations import ALL_ROTATIONS, parse

        most = plan.most_options
        if run is not plan.config.runs_of(cls.name)[0] or most is None:
            return []
        return [(f"{cls.section}.formulations", f"{name} applies to no item: a rotation letters+rK needs more than K "
                                                f"options, and the workspace's items have at most {most}")
                for name in run.options.formulations or () if name != ALL_ROTATIONS and parse(name)[1] >= most]

    @classmethod
    def describe(cls, runs: list[Run]) -> list[str]:
        """The models, modes, dtype and device, and the backend that computes the scores (a vLLM
        server by its address)."""
        o = runs[0].options
        backend = f"the {o.backend} backend" + (f" at {o.server}" if getattr(o, "server", None) else "")
        return [line("score", f"{', '.join(run.options.model for run in runs)} on {', '.join(o.modes)} "
                              f"({o.dtype}, {o.device}; {backend})")]

    @classmethod
    def run(cls, run: Run, config) -> list[Outcome]:
        start, o = time.perf_counter(), run.options
        s = Score(config.workspace, o).run()
        status = "ran" if s["computed"] or s["text_computed"] else "skipped"
        texts = f", {s['text_computed']} text scores computed" if o.text_scores else ""
        return [Outcome("score", status, f"{o.model} ({', '.join(o.modes)}, {o.dtype}): {s['computed']} item-modes "
                                         f"computed, {s['cached']} cached{texts}", s, time.perf_counter() - start)]
