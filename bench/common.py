"""What the benchmark's parts share: the repository, the figures file, the progress line, and the
settings that a measurement uses and the text of docs/benchmarks.md states alike.

It imports no other module of bench/: the measurements, the report (``bench.document``) and the
entry points (``bench.run``, ``bench.api``, ``bench.host_map_ab``) all stand on it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any, TypeVar

from gpu_execution_pack.rules import recording

REPO = Path(__file__).resolve().parent.parent
# BENCH_SMALL=1: the whole of `make bench` on a tiny fleet with short phases (minutes, not an hour), to see
# every code path run; its figures and report go to build/bench-small, never over docs/.
SMALL = os.environ.get("BENCH_SMALL", "") == "1"
OUT = REPO / "build" / "bench-small" if SMALL else REPO / "docs"
RESULTS = OUT / "benchmarks.json"  # the figures docs/benchmarks.md is written from
T = TypeVar("T")
# The served groups, whose cost the targets judge: those at rule_interval, the host maps (at
# node.host_map_interval) and the host CPU rate's own (at node.cpu_rate_interval where set).
SERVED_GROUPS = (
    recording.HOSTS_GROUP,
    recording.HOST_RATES_GROUP,
    recording.EXECUTION_GPU_GROUP,
    recording.EXECUTION_NODE_GROUP,
)


def scaled(full: T, small: T) -> T:
    """A setting of the full run, or its small-scale stand-in under BENCH_SMALL=1."""
    return small if SMALL else full


# `make rules dashboards` is timed this many times; the report gives the median.
GENERATE_RUNS = 3
# The endpoint's 30-day request (bench/api.py, ``measure_long``): its length, the pause between the
# unauthenticated requests sent beside it, and the latency those must stay under.
LONG_DAYS = 30
PROBE_PAUSE_SECONDS = 0.01
PROBE_P99_TARGET_SECONDS = 0.05


def entry_parser(module: str, doc: str | None) -> argparse.ArgumentParser:
    """The command line of ``python -m <module>``, described by the first paragraph of its docstring.

    Even an entry point with no options takes ``--help``: it answers at once instead of measuring.
    """
    description = (doc or "").split("\n\n", 1)[0]
    return argparse.ArgumentParser(prog=f"python -m {module}", description=description)


def log(message: str) -> None:
    """One progress line, with the time of day: a run takes minutes."""
    print(f"bench: {time.strftime('%H:%M:%S')} {message}", flush=True)


def read_results() -> dict[str, Any]:
    """The figures of the last run (docs/benchmarks.json; at small scale its own, or else docs' as a start)."""
    path = RESULTS if RESULTS.exists() else REPO / "docs" / RESULTS.name
    return json.loads(path.read_text())


def save_results(results: dict[str, Any]) -> None:
    """Write the figures to docs/benchmarks.json (keys sorted, so a rerun diffs by figure)."""
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
