"""One config running every stage: the config, its plan, the run."""
