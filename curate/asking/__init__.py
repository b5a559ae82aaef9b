"""Asking a model for answers, shared by `curate annotate` and `curate generate`: the state of one
run (``job``), the one cost ledger (``ledger``), the Claude runner (``claude``) and the local
runner (``local``). Each stage keeps only what is its own: its prompts, its records, its request
keys."""
