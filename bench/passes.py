"""Rule sets measured in turn on one live fleet: the loop ``bench.host_map_ab`` and ``bench.host_identity`` share.

A fleet is scraped live by one Prometheus, or by several at once that each scrape a part of its
targets (scrape shards). After a warm-up long enough to fill every range the rules read, the rule
files are swapped by SIGHUP in a given order; each set settles for half a minute and is then
measured for ``MEASURE_S`` (``bench.fleet_rules.rule_cost``). The servers of one pass are measured
at the same time, as shards run side by side.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import log, scaled
from bench.exporter import FleetExporter, scrape_config
from bench.fleet import FleetExposition
from bench.fleet_rules import MEASURE_S, rule_cost
from harness.prometheus import Prometheus, free_port

SETTLE_S = scaled(30, 5)
# The default rate_window_fallback (4m) plus a minute: every range a served rule reads is full before
# the first pass. With a minute only, the first pass of a rule set read a quarter of its 4m windows
# and cost less than the second.
WARMUP_S = scaled(300, 30)

# Called after each measured pass with the rule set's name, the server's index, the server and the pass's
# figures (``rule_cost``: the share, missed iterations, failed scrapes, Prometheus' CPU).
AfterPass = Callable[[str, int, Prometheus, dict], None]
# Called once after the warm-up, before the first pass, with the live servers: it may write rule files the
# passes read (``bench.shapes`` writes doctor's from what doctor finds on the live server).
AfterWarmup = Callable[[list[Prometheus]], None]


def measure_passes(
    fleet: FleetExposition,
    files: dict[str, Path],
    order: Sequence[str],
    after: AfterPass | None = None,
    parts: Sequence[Sequence[int] | None] = (None,),
    warmed: AfterWarmup | None = None,
    host_label: bool = False,
) -> list[dict[str, list[float]]]:
    """Each server's share of the time spent in each rule set's groups, one figure per pass of ``order``.

    ``files`` names each rule set's file (the first pass's must exist before the servers start, the others'
    by the end of ``warmed``); ``parts`` gives one server per entry, scraping those of the fleet exporter's
    targets (``None``: all of them); ``host_label``: every target carries the target label ``hostname``.
    """
    shares: list[dict[str, list[float]]] = [{name: [] for name in dict.fromkeys(order)} for _ in parts]
    exporter_port = free_port()
    with tempfile.TemporaryDirectory() as tmp, FleetExporter(fleet, exporter_port):
        servers = [Prometheus(Path(tmp) / f"prometheus-{i}") for i in range(len(parts))]
        for server in servers:
            server.port = free_port()

        def configure(name: str) -> None:
            for server, part in zip(servers, parts, strict=True):
                server.config_text = scrape_config(
                    fleet, exporter_port, server.port, str(files[name]), part, host_label=host_label
                )

        configure(order[0])
        try:
            for server in servers:
                server.start()
            log(f"{len(servers)} Prometheus live: {WARMUP_S} s to warm up")
            time.sleep(WARMUP_S)
            if warmed is not None:
                warmed(servers)
            with ThreadPoolExecutor(len(servers)) as pool:
                for name in order:
                    configure(name)
                    for server in servers:
                        server.reload()
                    log(f"rules {name}: {SETTLE_S} s to settle, {MEASURE_S} s measured")
                    time.sleep(SETTLE_S)
                    costs = list(pool.map(rule_cost, servers, [str(files[name])] * len(servers)))
                    for index, (server, cost) in enumerate(zip(servers, costs, strict=True)):
                        shares[index][name].append(cost["share"])
                        if after is not None:
                            after(name, index, server, cost)
        finally:
            for server in servers:
                server.stop()
    return shares
