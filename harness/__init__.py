"""The real-process harnesses that the tests and ``make bench`` share (not part of the installed package).

- ``prometheus``: a real Prometheus on a loopback port, backfilled with a scenario's raw series and
  the pack's recorded series, or scraping live targets;
- ``alertmanager``: a real Alertmanager with a webhook receiver, for the routing and inhibition tests;
- ``upstreams``: small misbehaving HTTP upstreams (slow, broken, cut) in front of a real Prometheus,
  for the endpoint's fault tests.

They import the package; the package never imports them (tests/test_prometheus_harness.py checks).
"""
