"""``gpu-execution-pack demo``: a small fleet from the scenario library in a real Prometheus, with live exporters
and the endpoint, to try the pack without a GPU.

- ``prometheus``: a Prometheus process on a loopback port, backfilled with raw series (OpenMetrics) and the
  pack's recording rules (also what the tests' and bench's harness starts);
- ``fleet``: which scenarios make the demo's day, where each sits in it, and the running job;
- ``exporters``: the running job's exporters, small HTTP servers Prometheus scrapes;
- ``run``: the command itself: set up, print the ready line, stop every process it started.
"""
