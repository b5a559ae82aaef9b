"""Audit analyses: pure functions over items, scores and annotations, and the report built
from them (``curate.analyses.report.Analyze``, CLI ``curate analyze``)."""
