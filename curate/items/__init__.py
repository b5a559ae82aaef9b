"""Items and sources: the canonical item, reading benchmarks, the workspace, ingest, duplicates."""
