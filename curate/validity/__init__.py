"""Item validity over stored scores: the response matrix, IRT, item statistics, suspects."""
