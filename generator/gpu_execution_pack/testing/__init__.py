"""The real-process harnesses the tests and ``make bench`` share.

``prometheus``: a real Prometheus on a loopback port, backfilled with a scenario's raw series and
the pack's recorded series. This package is the top layer: it may import any other module of the
package, and none of them imports it.
"""
