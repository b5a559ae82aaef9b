"""Declarative filtering: ordered stages from a rules file -> per-item decisions and a stage table
(the `curate filter` run: ``curate.filter.run.Filter``)."""
