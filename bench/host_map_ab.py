"""What the host map costs: the served groups before it (commit 049b8c1) against today's, in one run.

A fleet of 10,000 GPUs is scraped live by one Prometheus; the rule files are swapped by SIGHUP
between the served groups as they were before host identity (A), as they are now (B), and the
floor of bare selectors, in the order A B A B floor (``bench.passes``). Run as ``python -m
bench.host_map_ab`` (``make bench-host-map``); it adds its figures to docs/benchmarks.json under
``host_map_ab``, which the report renders.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from bench.common import REPO, SERVED_GROUPS, entry_parser, log
from bench.document import add_figures
from bench.fleet import FleetExposition, fleet_scenario
from bench.fleet_rules import floor_rules
from bench.passes import measure_passes

BEFORE = "049b8c1"  # the last commit before host identity
GPUS, EXECUTIONS = 10000, 1000


def served_groups(texts: list[str]) -> dict:
    """The served groups (at rule_interval) of some rule files, as one rule file."""
    groups = [g for text in texts for g in yaml.safe_load(text)["groups"] if g["name"] in SERVED_GROUPS]
    return {"groups": groups}


def rule_files_at(commit: str | None) -> list[str]:
    """The per-execution rule files as committed at ``commit``, or as in the work tree (``None``)."""
    names = ("execution-gpu.rules.yml", "execution-node.rules.yml")
    if commit is None:
        return [(REPO / "rules" / n).read_text() for n in names]
    return [
        subprocess.run(
            ["git", "show", f"{commit}:rules/{n}"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout
        for n in names
    ]


def measure() -> dict:
    """The served groups' share of the time, before the host map and now, and the floor's, with their medians."""
    fleet = FleetExposition(fleet_scenario(GPUS, EXECUTIONS, minutes=120), int(time.time()))
    with tempfile.TemporaryDirectory() as tmp:
        files = {name: Path(tmp) / f"{name}.rules.yml" for name in ("before", "now", "floor")}
        files["before"].write_text(json.dumps(served_groups(rule_files_at(BEFORE))))
        files["now"].write_text(json.dumps(served_groups(rule_files_at(None))))
        floor_rules(files["floor"])
        log(f"{GPUS} GPUs live, served groups before the host map and now")
        [shares] = measure_passes(fleet, files, ("before", "now", "before", "now", "floor"))
    return {
        "gpus": GPUS,
        "cpus_per_host": fleet.s.hosts[0].cpus,
        "before_commit": BEFORE,
        "shares": shares,
        "median": {k: statistics.median(v) for k, v in shares.items()},
    }


def main(argv: list[str] | None = None) -> int:
    """``make bench-host-map``: measure, put the figures in docs/benchmarks.json, rewrite the report."""
    entry_parser("bench.host_map_ab", __doc__).parse_args(argv)
    figures = add_figures("host_map_ab", measure())
    log(f"host map A/B: {figures['median']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
