"""``annotators``: each annotator on each round it names (``annotate.run.Annotate``), the
annotation cached by request key, so a rerun asks only what is not stored yet. A round that
stopped (its spend cap reached) stops the audit."""
from __future__ import annotations

import math
import time

from annotate.run import Annotate
from curate.audit.stages import AuditStage, Outcome, Run, line
from curate.core.errors import CurateError
from scoring import model_spec


def canonical(spec: str) -> str:
    """An annotator as annotations store it: its backend written out (``scoring.model_spec``, the
    grammar of every stage); a reviewer's verdicts (human:NAME) are no model and stay as given."""
    return spec if spec.startswith("human:") else model_spec.canonical(spec, "annotator")


def unpriced(model: str) -> str | None:
    """Why a Claude model cannot be annotated with a cost ledger, or None when its price is known."""
    from curate.anthropic_api.prices import price

    try:
        price(model)
    except CurateError as exc:
        return str(exc)
    return None


class Step(AuditStage):
    name, section, ORDER, PROVIDES = "annotate", "annotators", 30, ("annotation",)

    @classmethod
    def check(cls, section: list, config: dict) -> list[tuple[str, str]]:
        problems, seen = [], {}
        for i, a in enumerate(section):
            backend, name = model_spec.parse(a["annotator"], "annotator")
            if a.get("batch") and backend != "anthropic":
                problems.append((f"annotators[{i}].batch", "the Message Batches API is for anthropic: annotators only"))
            if backend == "anthropic" and (why := unpriced(name)):
                problems.append((f"annotators[{i}].annotator", why))
            cost = a.get("max_cost")
            if isinstance(cost, float) and not math.isfinite(cost):  # YAML's .nan and .inf pass the schema
                problems.append((f"annotators[{i}].max_cost", f"{cost} is not an amount of US dollars; give a finite number"))
            if (spec := canonical(a["annotator"])) in seen:
                problems.append((f"annotators[{i}].annotator", f"{a['annotator']!r} is listed twice (also "
                                                               f"annotators[{seen[spec]}]); give it one entry with all its rounds"))
            seen.setdefault(spec, i)
        return problems

    @classmethod
    def from_config(cls, section) -> list[Run]:
        return [Run(cls, entry.key, Annotate.from_config(entry, round=r, annotator=canonical(entry["annotator"])))
                for entry in section.each() for r in entry["rounds"]]

    @classmethod
    def provides(cls, run: Run, plan) -> set[tuple]:
        return Annotate.provides(run.options)

    @classmethod
    def environment(cls, run: Run) -> list[tuple[str, str]]:
        """Claude's key, checked as a run checks it before its first request."""
        from curate.anthropic_api.client import make_client

        if not run.options.annotator.startswith("anthropic:"):
            return []
        try:
            make_client()
        except CurateError as exc:
            return [(f"{run.key}.annotator", str(exc))]
        return []

    @classmethod
    def problems(cls, run: Run, plan) -> list[tuple[str, str]]:
        """With the input files: a local model must be found."""
        from curate.audit.needs import Unknown, unresolvable

        backend, name = model_spec.parse(run.options.annotator, "annotator")
        if backend != "local" or not plan.files:
            return []
        why = unresolvable(name, "model")
        if isinstance(why, Unknown):
            plan.unchecked.append((f"{run.key}.annotator {name!r}", why))
            return []
        return [(f"{run.key}.annotator", f"model cannot be found: {why}")] if why else []

    @classmethod
    def describe(cls, runs: list[Run]) -> list[str]:
        out, keys = [], list(dict.fromkeys(run.key for run in runs))
        for key in keys:
            rounds = [run.options.round for run in runs if run.key == key]
            o = next(run.options for run in runs if run.key == key)
            extras = ["batch API"] * o.batch + [f"concurrency {o.concurrency}"] + \
                     ([f"max ${o.max_cost:g}/round"] if o.max_cost is not None else [])
            out.append(line("annotate", f"{o.annotator} round{'s' * (len(rounds) > 1)} "
                                        f"{', '.join(map(str, rounds))} ({', '.join(extras)})"))
        return out

    @classmethod
    def dry_run(cls, runs: list[Run], plan) -> list[str]:
        """Each Claude round's first request as it would be sent, and the most the round could
        cost, from the requests' bytes (no key, no network); a local annotator pays nothing."""
        items, out = plan.item_list, []
        for run in runs:
            o = run.options
            backend, model = model_spec.parse(o.annotator, "annotator")
            head = f"{o.annotator} round {o.round}"
            todo = (items[:o.limit] if o.limit else items) if items else None
            if not todo:
                out.append(line("annotate", f"{head}: the items are known only once the ingest has read the Hub "
                                            "dataset: no request or cost to show"))
            elif backend != "anthropic":
                out.append(line("annotate", f"{head}: {len(todo)} items on this machine, nothing to pay"))
            else:
                out += cls.requests(o, model, todo)
        return out

    @classmethod
    def requests(cls, o, model: str, todo: list[dict]) -> list[str]:
        """One Claude round's ceilings and its first request, system prompt and item, as sent."""
        from dataclasses import replace

        from annotate.claude import request_params
        from annotate.run import cost_ceilings

        c = cost_ceilings(model, todo, o.round, replace(o, quiet=True))
        capped = f"; max_cost stops it at ${o.max_cost:g}" if o.max_cost is not None else ""
        params = request_params(model, todo[0], o.round)
        prompt = [f"system: {block['text']}" for block in params["system"]] + [
            f"{m['role']}: {m['content']}" for m in params["messages"]]
        return [line("annotate", f"{o.annotator} round {o.round}: {len(todo)} requests"
                                 f"{' through the Message Batches API' if o.batch else ''}, input at most "
                                 f"{c['input_tokens']} tokens, output at most {c['max_output_tokens']}; at most "
                                 f"${c['usd_first_answers']:.4f} if every first reply is usable, "
                                 f"${c['usd_upper_bound']:.4f} with every re-ask{capped}"),
                " " * 11 + f"the request for {todo[0]['item_id']} (each item's is alike; tools: "
                           f"{', '.join(t['name'] for t in params['tools'])}):"] + [
            " " * 13 + "| " + text for part in prompt for text in part.splitlines()]

    @classmethod
    def summary(cls, runs: list[Run], outcomes: list[Outcome], config) -> list[str]:
        mine = [o for o in outcomes if o.stage.startswith(cls.name)]
        if not mine:
            return []
        cost = sum(float((o.data.get("cost") or {}).get("usd") or 0) for o in mine)
        return [line("cost", f"${cost:.4f} in this run (annotation ledger; local annotators cost nothing)")]

    @classmethod
    def run(cls, run: Run, config) -> list[Outcome]:
        start, o = time.perf_counter(), run.options
        s = Annotate(config.workspace, o).run()
        new = s["valid"] + s["invalid"] + s["refused"]
        status = "stopped" if s.get("stopped") else ("ran" if new else "skipped")
        stopped = (s.get("stopped") or "").replace("--max-cost", f"{run.key}.max_cost")  # the config's key
        detail = (f"{o.annotator} round {o.round}: {new} new ({s['valid']} valid, {s['invalid']} invalid, "
                  f"{s['refused']} refused), {s['skipped']} already done" + (f"; stopped: {stopped}" if stopped else ""))
        return [Outcome(f"annotate r{o.round}", status, detail, s, time.perf_counter() - start)]
