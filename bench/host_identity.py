"""What naming hosts at scrape saves: the served groups with the host-map join against
``node.host_identity: scrape``, against the floor, in one run; then the same per scrape shard.

A fleet of 10,000 GPUs is scraped live by one Prometheus. Its series are stored as a scrape config that
names each target's host leaves them (the target label ``hostname`` beside dcgm-exporter's own
``Hostname``), which both rule sets read: the join resolves the host map from those labels, the scrape
mode reads ``hostname`` as is, also with the host CPU rate recorded every minute (``scrape_cpu``), with
``rate_window_fallback`` at 1m (``scrape_1m``: what a fleet scraped every 15 s can set) and with all of
these and ``dcgm.generations`` pinned (``scrape_tuned``). The rule
files are swapped by SIGHUP in ``ORDER`` (``bench.passes``), the floor measured twice among them. Then
two Prometheus servers, each scraping half the fleet's targets as two scrape shards would, evaluate the
rules ``sharding.shards: 2`` puts on a shard, and the floor, side by side (``SHARD_ORDER``). Run as
``python -m bench.host_identity`` (``make bench-host-identity``); it adds its figures to
docs/benchmarks.json under ``host_identity``, which the report renders.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from gpu_execution_pack import catalog
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.rules.files import SHARD, rule_files

from bench.common import entry_parser, log
from bench.document import add_figures
from bench.exporter import shards as exporter_targets
from bench.fleet import GENERATION, FleetExposition, fleet_scenario
from bench.fleet_rules import floor_rules
from bench.host_map_ab import EXECUTIONS, GPUS, served_groups
from bench.passes import measure_passes
from harness.prometheus import Prometheus

AT_SCRAPE = {"node": {"host_identity": "scrape"}}
# The host CPU rate recorded every minute in a group of its own (rate() over the fallback window).
CPU_EACH_MINUTE = {"node": AT_SCRAPE["node"] | {"cpu_rate_interval": "1m"}}
# The fleet scrapes every 15 s: a 1m fallback window still holds four samples of each counter, and the
# per-CPU idle rate (the served groups' most expensive rule) reads a quarter of the 4m default's.
SHORT_FALLBACK = AT_SCRAPE | {"rate_window_fallback": "1m"}
SHARDS = 2
CONFIGS = {
    "join": {},
    "scrape": AT_SCRAPE,
    "scrape_cpu": CPU_EACH_MINUTE,
    "scrape_1m": SHORT_FALLBACK,
    # Everything a fleet like this one can set: also the CPU rate each minute, dcgm.generations pinned.
    "scrape_tuned": SHORT_FALLBACK | CPU_EACH_MINUTE | {"dcgm": {"generations": [GENERATION]}},
    "shard": AT_SCRAPE | {"sharding": {"shards": SHARDS}},
}
ORDER = ("join", "scrape", "scrape_cpu", "scrape_1m", "scrape_tuned", "floor") * 2
SHARD_ORDER = ("shard", "floor") * 2


def served(name: str) -> dict:
    """The served groups of rule set ``name`` (a shard's share of them for ``shard``), as one rule file."""
    cfg = config_from_mapping(CONFIGS[name], f"bench.host_identity {name}")
    placement = SHARD if cfg.sharding.shards else ""
    return served_groups(list(rule_files(cfg, Path("rules"), placement=placement).values()))


def recorded_gpus(server: Prometheus) -> int:
    """How many GPU entries the served groups just recorded (their utilisation series)."""
    result = server.query(f"count({catalog.GPU_UTILIZATION.name})", time.time())
    return int(float(result[0]["value"][1])) if result else 0


class Recorder:
    """After each pass: how many GPUs each server's served groups recorded, and every rule's last
    evaluation time (the floor's too), per rule set and server."""

    def __init__(self, servers: int):
        self.gpus: list[dict[str, set[int]]] = [{} for _ in range(servers)]
        self.seconds: list[dict[str, dict[str, list[float]]]] = [{} for _ in range(servers)]

    def __call__(self, name: str, index: int, server: Prometheus, cost: dict | None = None) -> None:
        if name != "floor":
            self.gpus[index].setdefault(name, set()).add(recorded_gpus(server))
        for rule, seconds in server.rule_seconds().items():
            self.seconds[index].setdefault(name, {}).setdefault(rule, []).append(seconds)

    def rule_seconds(self, index: int) -> dict[str, dict[str, float]]:
        """Server ``index``'s median evaluation time of each rule, per rule set."""
        return {k: {r: statistics.median(v) for r, v in rules.items()} for k, rules in self.seconds[index].items()}


def one_count(counts: dict[str, set[int]], what: str) -> int:
    """The one GPU count every rule set recorded in every pass: a cheaper way that recorded fewer GPUs
    would look cheaper for that alone."""
    values = {n for v in counts.values() for n in v}
    if len(values) != 1 or 0 in values:
        raise RuntimeError(f"{what} recorded different GPU counts: {counts}")
    return values.pop()


def measure() -> dict:
    """The served groups' share of the time with the join and with hosts named at scrape, the floor's,
    and the same per shard of two."""
    at_scrape = config_from_mapping(AT_SCRAPE, "bench.host_identity")  # the scrape names each target's host
    fleet = FleetExposition(fleet_scenario(GPUS, EXECUTIONS, minutes=120), int(time.time()), at_scrape)
    targets = range(len(exporter_targets(fleet)))
    parts = [[k for k in targets if k % SHARDS == i] for i in range(SHARDS)]
    with tempfile.TemporaryDirectory() as tmp:
        files = {name: Path(tmp) / f"{name}.rules.yml" for name in CONFIGS}
        for name, path in files.items():
            path.write_text(json.dumps(served(name)))
        files["floor"] = Path(tmp) / "floor.rules.yml"
        floor = floor_rules(files["floor"])
        log(f"{GPUS} GPUs live, one Prometheus: {', '.join(ORDER)}")
        one = Recorder(1)
        [shares] = measure_passes(fleet, files, ORDER, one)
        log(f"{GPUS} GPUs live, {SHARDS} shards side by side: {', '.join(SHARD_ORDER)}")
        per_shard = Recorder(SHARDS)
        shard_shares = measure_passes(fleet, files, SHARD_ORDER, per_shard, parts)
    total = one_count(one.gpus[0], "the join and the scrape")
    by_shard = [one_count(per_shard.gpus[i], f"shard {i}") for i in range(SHARDS)]
    if sum(by_shard) != total:
        raise RuntimeError(f"the shards recorded {by_shard} GPUs, one Prometheus {total}")
    return {
        "gpus": GPUS,
        "cpus_per_host": fleet.s.hosts[0].cpus,
        "recorded_gpus": total,
        "shares": shares,
        "median": {k: statistics.median(v) for k, v in shares.items()},
        "rule_seconds": one.rule_seconds(0),
        "floor_rules": floor,
        "shards": [
            {
                "targets": len(parts[i]),
                "recorded_gpus": by_shard[i],
                "shares": shard_shares[i],
                "median": {k: statistics.median(v) for k, v in shard_shares[i].items()},
                "rule_seconds": per_shard.rule_seconds(i),
            }
            for i in range(SHARDS)
        ],
    }


def main(argv: list[str] | None = None) -> int:
    """``make bench-host-identity``: measure, put the figures in docs/benchmarks.json, rewrite the report."""
    entry_parser("bench.host_identity", __doc__).parse_args(argv)
    figures = add_figures("host_identity", measure())
    log(f"host identity: {figures['median']}; per shard: {[s['median'] for s in figures['shards']]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
