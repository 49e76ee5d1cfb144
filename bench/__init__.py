"""Benchmarks (`make bench`): the fleet renderer, its exporter, and the drivers that measure the pack."""
