"""The one clock every stored record is stamped with: UTC, ISO 8601, whole seconds.

Its own module so that the lowest layers (``curate.core.lock`` names when a lock was taken) can stamp
times without importing the workspace store.
"""
from __future__ import annotations

from datetime import datetime, timezone


def now() -> str:
    """The current UTC time, e.g. ``2026-11-25T04:01:47+00:00``."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
