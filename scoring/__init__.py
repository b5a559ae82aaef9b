"""The log-likelihood engine: encoding (``encode``), the forward pass (``engine``), the run loop
(``run``) and the score store (``store``)."""

#: The version of the numbers this engine computes. It is part of every stored score's cache key:
#: bump it with any change that can alter a stored value (a scoring fix, a new encoding rule), so
#: scores computed before the change are recomputed, never reused.
ENGINE_VERSION = 3  # 3: logits from the model's own head code, its attention rules (sliding windows) kept
