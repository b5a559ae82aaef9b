"""Duplicate items: within a benchmark's split, across its splits, and across benchmarks.

``detect`` finds the pairs from text alone (pure); ``collections`` reads the items to compare
(the workspace, its benchmark's other splits, other benchmarks); ``store`` keeps the result in
the workspace, where the report, the filter and the review queues read it.
"""
