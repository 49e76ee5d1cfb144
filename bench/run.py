"""``make bench``: measures, then rewrites docs/benchmarks.md and its plot, docs/benchmarks-fetch.png.

Parts: the wall time of ``make rules dashboards``; the metrics endpoint under concurrent clients
(bench/api.py, about 5 minutes); issue 39's two fleet shapes at 10,000 GPUs, the served groups of the
built-in defaults and of the config doctor writes against the floor (bench/shapes.py, about 15 minutes
each); the fleet at 1,000 and 10,000 GPUs: rule cost, series, memory and the hour's fetch, recorded
against raw against the floor (bench/fleet_rules.py, about 20 minutes). Within an hour on 2 cores.
Figures are medians of one run on this machine; they go to docs/benchmarks.json, and
bench/document.py writes the report from them. ``make bench-host-identity`` (hosts named at scrape,
its tuned variants and scrape shards) and ``make bench-host-map`` are their own runs; the report keeps
their last figures.

Run from the repository root: ``python -m bench.run`` (``--fleet``: the fleet part alone;
``--render``: the report again from the last figures, measuring nothing). BENCH_SMALL=1 runs it all on
a tiny fleet with short phases, its figures and report in build/bench-small (``bench.common.SMALL``).
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time

from bench import api as bench_api
from bench import fleet_rules as bench_fleet
from bench import shapes as bench_shapes
from bench.common import GENERATE_RUNS, REPO, entry_parser, log, read_results, save_results
from bench.document import DOC, PLOT, write


def generate_seconds() -> float:
    """Median wall time of ``make rules dashboards`` with the venv in place."""
    times = []
    for _ in range(GENERATE_RUNS):
        t = time.perf_counter()
        subprocess.run(["make", "-s", "rules", "dashboards"], cwd=REPO, check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def measure(results: dict) -> dict:
    """Every part's figures, from one run, each saved to docs/benchmarks.json as it is measured (a part
    that fails leaves those before it); the fleet shapes before the fleet part, whose raw fetch is the
    step most likely to run long."""
    t0 = time.monotonic()
    log("timing `make rules dashboards`")
    results |= {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "prometheus": subprocess.run(["prometheus", "--version"], capture_output=True, text=True).stdout.splitlines()[
            0
        ],
        "generate_seconds": generate_seconds(),
    }
    for part, run in (
        ("api", bench_api.measure),
        ("shapes", bench_shapes.measure),
        ("fleet", bench_fleet.measure),
    ):
        results[part] = run()
        save_results(results)
        log(f"{part} measured, {time.monotonic() - t0:.0f} s since the start")
    log(f"measured in {time.monotonic() - t0:.0f} s")
    return results


def main(argv: list[str]) -> int:
    """Measure and write the report; with ``--render``, rewrite it from the last run's figures."""
    parser = entry_parser("bench.run", __doc__)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--render", action="store_true", help="measure nothing: write the report from the figures")
    what.add_argument("--fleet", action="store_true", help="measure the fleet part alone, keep the other figures")
    args = parser.parse_args(argv)
    if args.render:
        results = read_results()
    elif args.fleet:  # the fleet part alone; the other figures stay as they are
        results = read_results() | {"fleet": bench_fleet.measure()}
        save_results(results)
    else:  # each part's figures replace the last run's as it is measured (`make bench-host-map`'s are its own)
        results = measure(read_results())
    write(results)
    log(f"wrote {DOC.relative_to(REPO)} and {PLOT.relative_to(REPO)}")
    api = results["api"]
    return 0 if all(r[-1] == 0 for rows in [api["bare"], *api["endpoint"].values()] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
