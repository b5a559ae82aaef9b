"""The local runner of annotation and generation: what a local model answers, stored as it comes
(each answer, or each batch of them, in one transaction), so a killed run resumes losing at most
what was in flight."""
from __future__ import annotations

from typing import Callable, Iterable

from curate.asking.job import Job


def run_local(job: Job, answers: Iterable[tuple], store: Callable) -> None:
    """``store(*answer)`` stores each of ``answers`` (the local model's, as it produces them) and
    counts it on ``job``."""
    for answer in answers:
        store(*answer)
