"""``make bench``, fleet shapes: the built-in defaults and doctor's config against the floor, on each shape.

Issue 39's two fleets, each of 10,000 GPUs (1,250 hosts, one dcgm-exporter and one node_exporter
target each, served in shards as ``bench/exporter.py`` does) scraped live by one Prometheus: hosts of
128 CPUs x 8 modes (``bench.fleet.MANY_CPUS``, the fleet of the other parts) and hosts of 32 CPUs x 2
modes with dcgm-exporter's profiling fields enabled (``FEW_CPUS``). Every target carries the target
label ``hostname`` (a scrape config that names each target's host), and the series their host.

For each shape in turn, one Prometheus starts with the served groups of the defaults; after the
warm-up (``bench.passes``) the real doctor runs against it (``gpu-execution-pack doctor --write-config``,
the command a user runs) and the served groups of the config it wrote are generated; then the defaults,
doctor's config and the floor (``bench.fleet_rules.floor_rules``) are measured in turn, ``ORDER``, each
pass's served-group share of the time as ``bench.passes`` measures it. The ratios against the floor of
the same run are the figures; docs/benchmarks.md judges them against the issue's targets.

Run as part of ``make bench`` (``bench/run.py``), or alone as ``python -m bench.shapes``, which adds its
figures to docs/benchmarks.json under ``shapes`` and rewrites the report.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from gpu_execution_pack.config import Config, config_from_mapping, load_config
from gpu_execution_pack.rules.files import rule_files

from bench.common import REPO, entry_parser, log, scaled
from bench.document import add_figures
from bench.fleet import FEW_CPUS, MANY_CPUS, FleetExposition, Shape, fleet_scenario
from bench.fleet_rules import floor_rules
from bench.host_identity import AT_SCRAPE, Recorder, one_count
from bench.host_map_ab import served_groups
from bench.passes import measure_passes
from harness.prometheus import Prometheus

SHAPES = (MANY_CPUS, FEW_CPUS)
GPUS, EXECUTIONS = scaled((10000, 1000), (64, 8))
# Interleaved, so drift over the run shows in each set's two passes alike.
ORDER = ("defaults", "doctor", "floor") * 2
# doctor reads a live Prometheus of 10,000 GPUs: its queries over 2 million series take a while.
DOCTOR_TIMEOUT_S = 600


def served(cfg: Config) -> dict:
    """The served groups (at rule_interval) of the rules ``cfg`` generates, as one rule file."""
    return served_groups(list(rule_files(cfg, Path("rules")).values()))


class Doctor:
    """After the warm-up: ``gpu-execution-pack doctor --write-config`` against the live server, and the served
    groups of the config it wrote, in the rule file of the passes named ``doctor``."""

    def __init__(self, config: Path, rules: Path):
        self.config, self.rules = config, rules
        self.written: dict[str, Any] = {}
        self.checks: dict[str, str] = {}
        self.exit_status = -1

    def __call__(self, servers: list[Prometheus]) -> None:
        [server] = servers
        log(f"doctor --write-config against {server.url}")
        command = [sys.executable, "-m", "gpu_execution_pack", "doctor", "--prometheus", server.url, "--json"]
        run = subprocess.run(
            [*command, "--write-config", str(self.config)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=DOCTOR_TIMEOUT_S,
        )
        # Exit 1 is a failed check (the served groups alone are loaded, not the pack's whole rules): the
        # config is written all the same. Anything else is doctor failing.
        if run.returncode not in (0, 1) or not self.config.exists():
            raise RuntimeError(f"doctor exited {run.returncode}: {run.stderr.strip()[-2000:]}")
        self.exit_status = run.returncode
        self.checks = {c["check"]: c["status"] for c in json.loads(run.stdout)["checks"]}
        self.written = yaml.safe_load(self.config.read_text()) or {}
        self.rules.write_text(json.dumps(served(load_config(self.config))))
        log(f"doctor wrote {json.dumps(self.written, sort_keys=True)}")


class Passes(Recorder):
    """Recorder's GPU counts and rule times, and each pass's figures (``rule_cost``) by rule set."""

    def __init__(self) -> None:
        super().__init__(1)
        self.costs: dict[str, list[dict]] = {}

    def __call__(self, name: str, index: int, server: Prometheus, cost: dict | None = None) -> None:
        super().__call__(name, index, server, cost)
        if cost is not None:
            self.costs.setdefault(name, []).append({k: cost[k] for k in PASS_FIGURES})


# What each pass keeps of rule_cost's figures (its groups' times are in rule_seconds).
PASS_FIGURES = ("share", "missed", "failed_scrapes", "cpu_cores", "head_series", "rss_bytes")


def measure_shape(shape: Shape) -> dict:
    """One shape's figures: each rule set's passes, their medians, and what doctor found and wrote."""
    named = config_from_mapping(AT_SCRAPE, "bench.shapes")  # the scrape names each target's host
    scenario = fleet_scenario(GPUS, EXECUTIONS, minutes=120, cpus=shape.cpus)
    fleet = FleetExposition(scenario, int(time.time()), named, shape)
    with tempfile.TemporaryDirectory() as tmp:
        files = {name: Path(tmp) / f"{name}.rules.yml" for name in dict.fromkeys(ORDER)}
        files["defaults"].write_text(json.dumps(served(Config())))
        floor = floor_rules(files["floor"])
        doctor = Doctor(Path(tmp) / "doctor.yml", files["doctor"])
        passes = Passes()
        log(f"{GPUS} GPUs of {shape.name} live, one Prometheus: {', '.join(ORDER)}")
        [shares] = measure_passes(fleet, files, ORDER, passes, warmed=doctor, host_label=True)
    return {
        "shape": shape.name,
        "gpus": GPUS,
        "hosts": len(scenario.hosts),
        "cpus_per_host": shape.cpus,
        "cpu_modes": shape.cpu_modes,
        "profiling": shape.profiling,
        "recorded_gpus": one_count(passes.gpus[0], f"the defaults and doctor's config on {shape.name}"),
        "doctor_config": doctor.written,
        "doctor_checks": doctor.checks,
        "doctor_exit": doctor.exit_status,
        "shares": shares,
        "median": {k: statistics.median(v) for k, v in shares.items()},
        "passes": passes.costs,
        "rule_seconds": passes.rule_seconds(0),
        "floor_rules": floor,
    }


def measure() -> list[dict]:
    """Each shape's figures, one after another (one Prometheus at a time on this machine)."""
    return [measure_shape(shape) for shape in SHAPES]


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.shapes``: measure, put the figures in docs/benchmarks.json, rewrite the report."""
    entry_parser("bench.shapes", __doc__).parse_args(argv)
    for shape in add_figures("shapes", measure()):
        log(f"{shape['shape']}: {shape['median']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
