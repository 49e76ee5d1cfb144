"""What naming hosts at scrape saves: the served groups with the host-map join against
``node.host_identity: scrape``, against the floor, in one run.

A fleet of 10,000 GPUs is scraped live by one Prometheus. Its series are stored as a scrape config that
names each target's host leaves them (the target label ``hostname`` beside dcgm-exporter's own
``Hostname``), which both rule sets read: the join resolves the host map from those labels, the scrape
mode reads ``hostname`` as is, also with ``rate_window_fallback`` at 1m (``scrape_1m``: what a fleet
scraped every 15 s can set). The rule files are swapped by SIGHUP in ``ORDER``, each measured for a
minute after half a minute to settle. Run as ``python -m bench.host_identity``
(``make bench-host-identity``); it adds its figures to docs/benchmarks.json under ``host_identity``,
which the report renders.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.rules.files import rule_files

from bench.common import entry_parser, log, read_results, save_results
from bench.document import write
from bench.exporter import FleetExporter, scrape_config
from bench.fleet import FleetExposition, fleet_scenario
from bench.fleet_rules import MEASURE_S, floor_rules, rule_cost
from bench.host_map_ab import EXECUTIONS, GPUS, SETTLE_S, served_groups
from harness.prometheus import Prometheus, free_port

AT_SCRAPE = config_from_mapping({"node": {"host_identity": "scrape"}}, "bench.host_identity")
# The fleet scrapes every 15 s: a 1m fallback window still holds four samples of each counter, and the
# per-CPU idle rate (the served groups' most expensive rule) reads a quarter of the 4m default's.
SHORT_FALLBACK = config_from_mapping(
    {"node": {"host_identity": "scrape"}, "rate_window_fallback": "1m"}, "bench.host_identity"
)
ORDER = ("join", "scrape", "scrape_1m", "join", "scrape", "scrape_1m", "floor")


def served(cfg: Config) -> dict:
    """The served groups ``cfg`` generates, as one rule file."""
    return served_groups(list(rule_files(cfg, Path("rules")).values()))


def recorded_gpus(server: Prometheus) -> int:
    """How many GPU entries the served groups just recorded (their utilisation series)."""
    result = server.query(f"count({catalog.GPU_UTILIZATION.name})", time.time())
    return int(float(result[0]["value"][1])) if result else 0


def measure() -> dict:
    """The served groups' share of the time with the join and with hosts named at scrape, and the floor's."""
    fleet = FleetExposition(fleet_scenario(GPUS, EXECUTIONS, minutes=120), int(time.time()), AT_SCRAPE)
    shares: dict[str, list[float]] = {name: [] for name in dict.fromkeys(ORDER)}
    recorded: dict[str, set[int]] = {}
    per_rule: dict[str, dict[str, list[float]]] = {}  # each rule's last evaluation time after each pass
    with tempfile.TemporaryDirectory() as tmp:
        files = {name: Path(tmp) / f"{name}.rules.yml" for name in shares}
        files["join"].write_text(json.dumps(served(Config())))
        files["scrape"].write_text(json.dumps(served(AT_SCRAPE)))
        files["scrape_1m"].write_text(json.dumps(served(SHORT_FALLBACK)))
        floor_rules(files["floor"])
        server = Prometheus(Path(tmp) / "prometheus")
        exporter_port = free_port()
        server.port = free_port()
        server.config_text = scrape_config(fleet, exporter_port, server.port, str(files["join"]))
        with FleetExporter(fleet, exporter_port):
            server.start()
            try:
                log(f"{GPUS} GPUs live: warming up")
                time.sleep(60)
                for variant in ORDER:
                    server.config_text = scrape_config(fleet, exporter_port, server.port, str(files[variant]))
                    server.reload()
                    log(f"{GPUS} GPUs: served groups {variant}, {SETTLE_S} s to settle, {MEASURE_S} s measured")
                    time.sleep(SETTLE_S)
                    shares[variant].append(rule_cost(server, str(files[variant]))["share"])
                    if variant != "floor":
                        recorded.setdefault(variant, set()).add(recorded_gpus(server))
                        for rule, seconds in server.rule_seconds().items():
                            per_rule.setdefault(variant, {}).setdefault(rule, []).append(seconds)
            finally:
                server.stop()
    # Both ways must record the same GPUs, or the cheaper one may just record less.
    counts = {frozenset(v) for v in recorded.values()}
    if len(counts) != 1 or len(recorded["join"]) != 1 or 0 in recorded["join"]:
        raise RuntimeError(f"the join and the scrape recorded different GPU counts: {recorded}")
    return {
        "gpus": GPUS,
        "cpus_per_host": fleet.s.hosts[0].cpus,
        "recorded_gpus": recorded["join"].pop(),
        "shares": shares,
        "median": {k: statistics.median(v) for k, v in shares.items()},
        "rule_seconds": {k: {r: statistics.median(v) for r, v in rules.items()} for k, rules in per_rule.items()},
    }


def main(argv: list[str] | None = None) -> int:
    """``make bench-host-identity``: measure, put the figures in docs/benchmarks.json, rewrite the report."""
    entry_parser("bench.host_identity", __doc__).parse_args(argv)
    results = read_results()
    results["host_identity"] = measure()
    save_results(results)
    write(results)
    log(f"host identity: {results['host_identity']['median']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
