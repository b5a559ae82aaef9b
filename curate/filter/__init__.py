"""Declarative filtering: ordered stages from a rules file -> per-item decisions and a stage table."""
__all__ = ["run_filter"]


def __getattr__(name):
    """``run_filter`` is imported on first use: the engine needs pandas (0.5 s to import), and the
    CLI imports this package for every command."""
    if name == "run_filter":
        from curate.filter.engine import run_filter
        return run_filter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
