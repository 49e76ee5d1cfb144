"""``make bench``, part two: what the rules cost a live Prometheus at 1,000 and 10,000 GPUs.

A synthetic fleet (tests/fleet_exporter.py) is scraped every 15 s by a real Prometheus that
evaluates the generated rules every 15 s. After a warm-up, the rule groups' evaluation time is
read as Prometheus reports it (prometheus_rule_group_last_duration_seconds), with missed
iterations, head series and resident memory; the same fleet without the rules gives the
baseline.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fleet_exporter import FleetExporter, fleet  # noqa: E402
from tests.prometheus_harness import Prometheus, free_port  # noqa: E402

INTERVAL = 15
WARMUP_S = 60  # the alerts' for durations and windows still fill after this; evaluation cost is steady by then
MEASURE_S = 60
SIZES = ((1000, 100), (10000, 1000))  # (GPUs, executions)


def config(exporter_port: int, self_port: int, rules: bool) -> str:
    rule_files = f"rule_files:\n  - {REPO / 'rules'}/*.rules.yml\n" if rules else ""
    return f"""global:
  scrape_interval: {INTERVAL}s
  evaluation_interval: {INTERVAL}s
{rule_files}scrape_configs:
  - job_name: dcgm-exporter
    honor_labels: true
    metrics_path: /dcgm
    static_configs: [{{targets: ["127.0.0.1:{exporter_port}"]}}]
  - job_name: node
    honor_labels: true
    metrics_path: /node
    static_configs: [{{targets: ["127.0.0.1:{exporter_port}"]}}]
  - job_name: prometheus
    static_configs: [{{targets: ["127.0.0.1:{self_port}"]}}]
"""


def run(gpus: int, executions: int, rules: bool) -> dict[str, float]:
    """One live measurement: rule cost per interval (median of samples), misses, head series, memory."""
    with tempfile.TemporaryDirectory() as tmp:
        exporter_port = free_port()
        server = Prometheus(Path(tmp), port=free_port())
        server.config_text = config(exporter_port, server.port, rules)
        placed = fleet(gpus, executions)
        with FleetExporter(placed, exporter_port):
            server.start()
            try:
                time.sleep(WARMUP_S)
                before = server.own_metrics()
                totals, groups = [], {}
                deadline = time.monotonic() + MEASURE_S
                while time.monotonic() < deadline:
                    time.sleep(INTERVAL)
                    per_group = server.own_metrics("rule_group")
                    durations = {
                        k.split(";")[-1]: v
                        for k, v in per_group.items()
                        if k.startswith("prometheus_rule_group_last_duration_seconds/")
                    }
                    totals.append(sum(durations.values()))
                    for group, seconds in durations.items():
                        groups.setdefault(group, []).append(seconds)
                after = server.own_metrics()
            finally:
                server.stop()
    return {
        "executions": len({g.execution for g in placed if g.execution}),
        "held": sum(1 for g in placed if g.execution),
        "rule_seconds": statistics.median(totals) if totals else 0.0,
        "groups": {g: statistics.median(v) for g, v in sorted(groups.items())},
        "missed": after.get("prometheus_rule_group_iterations_missed_total", 0.0)
        - before.get("prometheus_rule_group_iterations_missed_total", 0.0),
        "head_series": after.get("prometheus_tsdb_head_series", 0.0),
        "rss_bytes": after.get("process_resident_memory_bytes", 0.0),
    }


def report() -> list[str]:
    """The rule-cost section of docs/benchmarks.md, measured now."""
    rows, breakdown = [], {}
    for gpus, executions in SIZES:
        print(f"bench: {gpus} GPUs live, without the rules", flush=True)
        bare = run(gpus, executions, rules=False)
        print(f"bench: {gpus} GPUs live, with the rules", flush=True)
        ruled = run(gpus, executions, rules=True)
        rows.append((gpus, ruled, bare))
        breakdown[gpus] = ruled["groups"]
    lines = [
        "",
        "## What the rules cost a live Prometheus",
        "",
        f"Method: a synthetic fleet ({', '.join(f'{g:,} GPUs' for g, _ in SIZES)} on hosts of 8; executions of 1 to",
        "64 GPUs placed on consecutive GPUs, some spanning hosts, some sharing one; dcgm-exporter 4.8",
        "and node_exporter formats, values changing with time) is scraped every 15 s by a real",
        "Prometheus that evaluates the generated rules every 15 s (built-in defaults, all three",
        f"exporter generations). After {WARMUP_S} s of warm-up, the summed",
        "`prometheus_rule_group_last_duration_seconds` is sampled every interval for",
        f"{MEASURE_S} s; the table gives its median as a share of the interval. The same fleet",
        "without the rules is the baseline for head series and memory.",
        "",
        "| GPUs (held) | executions | rule time per interval | share of 15 s | missed iterations "
        "| head series with / without rules | series added per execution | RSS with / without rules |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for gpus, r, b in rows:
        added = (r["head_series"] - b["head_series"]) / max(r["executions"], 1)
        lines.append(
            f"| {gpus:,} ({r['held']:,}) | {r['executions']:,} | {r['rule_seconds']:.2f} s | "
            f"{100 * r['rule_seconds'] / INTERVAL:.1f} % | {r['missed']:.0f} | "
            f"{r['head_series']:,.0f} / {b['head_series']:,.0f} | {added:.0f} | "
            f"{r['rss_bytes'] / 2**20:.0f} / {b['rss_bytes'] / 2**20:.0f} MiB |"
        )
    largest = SIZES[-1][0]
    lines += ["", f"Per group at {largest:,} GPUs (median evaluation time):", "", "| group | seconds |", "|---|---|"]
    lines += [f"| `{g}` | {s:.3f} |" for g, s in breakdown[largest].items()]
    return lines


if __name__ == "__main__":
    print("\n".join(report()))
