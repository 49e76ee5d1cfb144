"""Synthetic DCGM and node_exporter data: scenarios, their expected values, their rendering."""
