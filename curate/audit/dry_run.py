"""`curate audit --dry-run`: what the audit would do, send and cost, with no key and no network.

The config is checked as `check-config` checks it, with the Hub taken as offline and no server
asked (what needs them is listed as not checked), and without the keys a run reads from the
environment (a real run needs them: the dry run names them). Then the plan's lines, and each
stage's own (``AuditStage.dry_run``): for a Claude annotator, each round's first request as it
would be sent and the most the round could cost, from the requests' bytes (the same ceilings
`curate annotate --dry-run` gives without a key). Nothing is run, sent or written.
"""
from __future__ import annotations

from contextlib import contextmanager

from curate.audit.config import AuditConfig, describe
from curate.audit.plan import Check, Plan, before_spending
from curate.audit.stages import line


@contextmanager
def hub_offline():
    """The Hugging Face Hub taken as offline (``HF_HUB_OFFLINE``) within the block."""
    from huggingface_hub import constants

    was, constants.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE, True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = was


def dry_run(config: AuditConfig) -> tuple[list[str], Check, list[tuple[str, str]]]:
    """(the lines to show, the check's problems and unchecked parts, the keys a real run needs
    and the environment lacks) of ``config``."""
    with hub_offline():
        check = before_spending(config, environment=False, online=False)
        plan = Plan(config, online=False)
        lines = describe(config) + [line("dry run", "nothing is run, sent or written; the Hub and servers are not "
                                                    "asked")]
        lines += [text for stage, runs in config.stages() for text in stage.dry_run(runs, plan)]
    keys = list(dict.fromkeys(p for run in config.runs for p in run.stage.environment(run)))
    return lines, check, keys
