"""The Anthropic Messages API as annotation and generation both use it: the client, its retries and
errors, the byte bounds of a request's tokens (``client``), the one model and price table
(``prices``), and the spend cap with its ledger (``spend``). What is particular to a stage (the
annotation request and its re-asks, the generation request and its reminder) stays in
``annotate/claude.py`` and ``generate/claude.py``."""
