"""Asking a model for answers, shared by `curate annotate` and `curate generate`: the state of one
run (``job``), the one cost ledger (``ledger``) and the Claude runner (``claude``); a local model's
answers are stored as they come, each stage in its own loop. Each stage keeps only what is its
own: its prompts, its records, its request keys."""
