"""Whether the plan has what a run needs, one kind of fact at a time, and the message naming a gap.

A need (``curate.audit.stages.Need``) of a kind below is checked as that kind reads; any other
kind (a stage added later) is met by the same fact held or provided. Models and tokenizers are
needs of their own: they must be found (``unresolvable``); where only the Hub could say and it
cannot be reached, the plan lists them as not checked (``Unknown``) instead of as problems.
"""
from __future__ import annotations

from pathlib import Path


class Unknown(str):
    """Why whether a model can be found is not known from here (the Hub cannot be reached)."""


def gap(need, plan) -> tuple[str, str] | None:
    """(config key, message) when nothing holds or provides ``need``; None when something does."""
    key = need.key or plan.provider(need.kind) or need.fallback
    check = CHECKS.get(need.kind)
    if check is not None:
        message = check(need, plan)
    else:
        named = f"{need.kind} {', '.join(map(str, need.what))}" if need.what else need.kind
        message = None if (need.kind, *need.what) in plan.supply.facts else \
            f"{need.reader} read {named}, which the workspace does not hold and no planned stage provides"
    return (key, message) if message else None


def _annotation(need, plan) -> str | None:
    annotator, rounds = need.what
    have = plan.supply.annotations
    if any((annotator, r) in have for r in rounds):
        return None
    named = " or ".join(f"round {r}" for r in rounds)
    listing = ", ".join(f"{a} round {r}" for a, r in sorted(have)) or "none"
    return f"{need.reader} read {annotator}'s {named} records, which no planned annotator provides (planned: {listing})"


def _scores(need, plan) -> str | None:
    model, mode, norm, formulation, fewshot = score_need(need.what, plan.supply)
    have = plan.supply.scores
    if norm in have.get((model, mode, formulation, fewshot), {}):
        return None
    default = plan.default_formulation
    form = "" if formulation == default else f" in the {formulation} formulation"
    shots = f"{fewshot}-shot " if fewshot else ""
    return (f"{need.reader} read {mode}-mode {shots}{norm} scores{form} of model {model!r}, which no planned stage "
            f"provides ({_scores_listing(have, model, default)})")


def _generations(need, plan) -> str | None:
    if need.what in plan.supply.generations:
        return None
    return (f"{need.reader} read {need.what[0]!r}'s generated answers in {need.what[1]} mode, which the workspace "
            f"does not hold and an audit does not make (run `curate generate` first)")


def _answers(need, plan) -> str | None:
    """None when the workspace holds the model's answers, an import stores them, or an import's
    models are not known before the ingest (then the audit checks right after it)."""
    supply = plan.supply
    if need.what[0] in supply.answers or supply.answers_unknown:
        return None
    return (f"{need.reader} read the stored answers of {need.what[0]!r}, which the workspace does not hold and no "
            f"planned answers import provides ({_answers_listing(supply)})")


def _tokenizer(need, plan) -> str | None:
    why = unresolvable(need.what[0], "tokenizer")
    if isinstance(why, Unknown):
        plan.unchecked.append((f"{need.key or need.fallback} {need.what[0]!r}", why))
        return None
    return f"{need.reader} count tokens with {need.what[0]!r}, which cannot be found: {why}" if why else None


CHECKS = {"annotation": _annotation, "scores": _scores, "generations": _generations, "answers": _answers,
          "tokenizer": _tokenizer}


def score_need(what: tuple, supply) -> tuple:
    """(model, mode, normalization, formulation, shot count) of a scores need: a kind that names
    no shot count reads 0-shot scores; item validity (``ByRule``) the shot count its rule picks
    from what the plan supplies, as it will from what the workspace then holds."""
    from curate.validity.item_options import ByRule
    from curate.validity.item_table import pick_fewshot

    model, mode, norm, formulation, *rest = what
    fewshot = rest[0] if rest else 0
    if isinstance(fewshot, ByRule):
        fewshot = pick_fewshot(supply.shot_models(fewshot.models, mode, formulation))
    return model, mode, norm, formulation, fewshot


def _answers_listing(supply) -> str:
    """Which models' answers each import stores and the workspace holds."""
    by_source: dict[str, list[str]] = {}
    for model, source in supply.answers.items():
        by_source.setdefault(source, []).append(model)
    held = by_source.pop("the workspace", [])
    if not by_source and not held:
        return "nothing holds or imports answers"
    parts = [f"{source} imports {', '.join(map(repr, sorted(models)))}" for source, models in sorted(by_source.items())]
    return "; ".join(parts + [f"the workspace holds {', '.join(map(repr, sorted(held))) if held else 'none'}"])


def _scores_listing(have: dict, model: str, default: str) -> str:
    modes = {mode + ("" if form == default else f" {form}") + (f" {k}-shot" if k else ""): sorted(norms)
             for (m, mode, form, k), norms in have.items() if m == model}
    if not modes:
        return f"nothing scores or imports {model!r}"
    return f"{model!r} will have " + "; ".join(f"{mode}: {', '.join(n)}" for mode, n in sorted(modes.items()))


# --- models and tokenizers that must be found -------------------------------------------------

def unresolvable(name: str, use: str) -> str | None:
    """Why the model or tokenizer ``name`` cannot be found (None when it can): a built-in name,
    a local folder or GGUF file, or a Hub id already in the local cache or, when the Hub is
    reachable, on the Hub; ``Unknown`` when only the Hub could say and it cannot be reached."""
    from curate.core.errors import CurateError
    from scoring.models import BUILTINS, builtin_gguf

    if name in BUILTINS:
        try:
            builtin_gguf(name)
        except CurateError as exc:
            return str(exc)
        return None
    path = Path(name).expanduser()
    if path.exists() or path.suffix == ".gguf" or path.is_absolute() or name.startswith((".", "~")):
        if path.is_file() and path.suffix == ".gguf":
            return None
        if path.is_dir():
            wanted = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
            if use == "tokenizer" and not any((path / f).is_file() for f in wanted):
                return f"the folder {path} holds no tokenizer files ({', '.join(wanted)})"
            if use == "model" and not (path / "config.json").is_file():
                return f"the folder {path} holds no config.json"
            return None
        return f"no such file or folder: {path}"
    return _hub_problem(name)


def _hub_problem(repo_id: str) -> str | None:
    from huggingface_hub import HfApi, constants, try_to_load_from_cache
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        if any(isinstance(try_to_load_from_cache(repo_id, f), str) for f in ("config.json", "tokenizer_config.json")):
            return None
    except Exception as exc:  # not even a valid repo id
        return f"not a built-in name, a local path or a Hub model id ({type(exc).__name__})"
    if constants.HF_HUB_OFFLINE:
        return "a Hub id that is not in the local Hugging Face cache, and the Hub is offline (HF_HUB_OFFLINE)"
    try:
        HfApi().model_info(repo_id, timeout=10)
    except GatedRepoError:
        return f"{repo_id} is gated on the Hub and no token given here has access to it"
    except RepositoryNotFoundError:
        return f"the Hub has no model {repo_id} (or it is private, and no token here has access)"
    except Exception as exc:  # no network, a proxy, a server error: not known from here
        first = str(exc).splitlines()[0] if str(exc) else ""
        return Unknown(f"the Hub cannot be reached: {type(exc).__name__}: {first}")
    return None
