"""What one annotation or generation run knows while it runs: its counts for the progress bar and
the summary, what it spent, and why it stopped or slowed (``--max-cost``)."""
from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field

from tqdm import tqdm

from curate.anthropic_api import spend


@dataclass
class Job:
    """One run's state. ``statuses``: the record statuses the progress line counts (annotation:
    valid, invalid, refused; generation: strict, lenient, unparsed); ``batches``: the Message
    Batches API, where the cap holds items, not requests."""
    ws: object
    run_id: str
    statuses: tuple[str, ...]
    bar: tqdm | None = None
    counts: Counter = field(default_factory=Counter)
    spent: float = 0.0
    retries: int = 0
    stopped: str | None = None
    over_budget: str | None = None           # why --max-cost kept the next request back
    last_error: str | None = None
    held: spend.Held | None = None           # how --max-cost holds the run back now (None: it does not)
    batches: bool = False
    told: bool = False                       # why the cap slows the run was said

    @property
    def halted(self) -> bool:
        return self.stopped is not None or self.over_budget is not None

    def done(self, statuses: list[str]) -> None:
        """Records stored with these statuses."""
        self.counts.update(statuses)
        self.tick(len(statuses))

    def fail(self, message: str) -> None:
        """A unit whose transient errors outlasted the retries: still pending."""
        self.counts["failed"] += 1
        self.last_error = message
        self.tick(1)

    def tick(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)
            self.show()

    def show(self, retrying: int | None = None) -> None:
        """Counts, retries and spend on the progress bar; ``retrying``: retries made so far."""
        if retrying is not None:
            self.retries = retrying
        if self.bar is not None:
            self.bar.set_postfix(**{s: self.counts[s] for s in self.statuses}, failed=self.counts["failed"],
                                 **({"retries": self.retries} if self.retries else {}),
                                 **({"usd": f"{self.spent:.4f}"} if self.spent else {}),
                                 **({"cap": self.held.progress(self.batches)} if self.held else {}), refresh=False)

    def hold(self, held: spend.Held | None) -> None:
        """The cap holds the run back (``held``) or lets it go again (None): on the progress line,
        and the first time in a line of its own saying why the run slows down."""
        self.held = held
        if self.bar is None or self.bar.disable:
            return
        if held is not None and not self.told:
            self.told = True
            self.bar.write(held.why(self.batches), file=sys.stderr)
        self.show()
        self.bar.refresh()
