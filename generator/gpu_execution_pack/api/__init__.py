"""The HTTP layer: the metrics and report routes, bearer auth, encoding and streaming; what they read is ``query/``."""
