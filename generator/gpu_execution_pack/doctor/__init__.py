"""``gpu-execution-pack doctor``: a live deployment read against the config (``probe`` gathers the facts,
``checks`` judges them, ``advice`` writes the config the deployment should have)."""
