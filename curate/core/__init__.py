"""The foundation: errors, files, locks, time, shared statistics, stage options, the one registry."""
