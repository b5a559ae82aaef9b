"""The self-check: before a scoring run stores anything, a few of its units are scored again by
the model's own plain forward (``scoring.reference``), and the run stops when the two differ.

The probe that picks a runner (``scoring.forward.runner_for``) uses short synthetic rows; this
check uses the run's own rows, so what the probe cannot see (a sliding window shorter than the
real rows, a long-context rotary rule) is caught before a wrong number is stored. Which units are
checked is decided here: the first ``items`` of the plan (the longest rows) that fit within
``--batch-tokens``, since the plain forward holds a whole row's attention and logits at once.
"""
from __future__ import annotations

from curate.core.errors import CurateError
from scoring import reference
from scoring.forward import architecture, runner_for, score_requests


def self_check(model, planned, dtype: str, *, items: int, batch_tokens: int, pad_id: int, names,
               score=score_requests) -> dict:
    """Check the first ``items`` units of ``planned`` that fit within ``batch_tokens`` (``names(unit)``
    says which item a unit is, for the error) as ``score`` scores them (the engine's
    ``score_requests``, or what the run stores with: the local annotator's
    ``scoring.shared_prefix.score_shared``). Returns what the run records; when ``items`` were
    asked for and no unit fits, a ``note`` says the check was not run rather than skipping it
    without a word."""
    fitting = [u for u in planned if u.max_row <= batch_tokens]
    checked = compare(model, fitting[:items], dtype, pad_id=pad_id, names=names, score=score)
    if items and not fitting:
        checked["note"] = (f"not run: every row is longer than --batch-tokens {batch_tokens}, and the plain "
                           "forward it compares with would hold a whole row at once")
    return checked


def compare(model, units, dtype: str, *, pad_id: int, names, score=score_requests) -> dict:
    """Score ``units`` by the engine and by the plain reference, and stop with a CurateError naming
    the architecture and both numbers when they differ by more than the dtype's tolerance.
    Returns items, largest difference, dtype, tolerances and runner, and the largest difference
    among the numbers compared with the tolerance for that number (``check_line`` prints them)."""
    requests = [r for u in units for r in u.requests]
    labels = [f"{names(u)} request {k}" for u in units for k in range(len(u.requests))]
    ours = score(model, requests, pad_id=pad_id)
    theirs = reference.score(model, requests)
    line = reference.worst_difference(requests, ours, theirs, dtype, labels)
    if line:
        raise CurateError(f"self-check failed: {architecture(model)} in {dtype} through the {runner_for(model)} runner, "
                          f"{line}; nothing was stored")
    compared, allowed = reference.largest_compared(requests, ours, theirs, dtype)
    return {"items": len(units), "max_abs_diff": reference.largest_difference(ours, theirs), "dtype": dtype,
            "tolerance_per_token": reference.TOLERANCE[dtype],
            "tolerance_relative": reference.RELATIVE[dtype], "runner": runner_for(model),
            "largest_compared": compared, "tolerance_there": allowed}


def check_line(check: dict, what: str) -> str:
    """The line the commands print for a check that passed (one that failed stopped the run):
    the largest compared difference, within the dtype's tolerance for that number."""
    return (f"self-check: {check['items']} {what} also scored by the model's own forward: passed, largest "
            f"difference {check['largest_compared']:.1e} within the {check['dtype']} tolerance of "
            f"{check['tolerance_there']:.1e} for that number")
