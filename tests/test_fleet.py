"""The fleet harness: the synthetic fleet, its exposition, and a real Prometheus scraping it live."""

from __future__ import annotations

import itertools
import re
import time
from collections import Counter
from pathlib import Path

import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.output import write_all
from gpu_execution_pack.promql.durations import parse_duration_seconds
from gpu_execution_pack.rules.files import all_groups, rule_files
from gpu_execution_pack.scenario.model import STEP_SECONDS
from gpu_execution_pack.scenario.oracle import raw_for
from gpu_execution_pack.scenario.phases import PHASES

from bench import exporter as fleet_exporter
from bench import fleet as bench_fleet
from bench.exporter import FleetExporter, scrape_config, shards
from bench.fleet import MIG_EVERY, FleetExposition, fleet_scenario
from bench.fleet_rules import fetch_queries, measured_execution
from bench.host_identity import one_count
from harness.prometheus import Prometheus, free_port

REPO = Path(__file__).resolve().parent.parent


def sample(text: str, metric: str, **labels: str) -> float:
    """The value of the one line of ``metric`` carrying ``labels`` in an exposition."""
    found = [
        line
        for line in text.splitlines()
        if line.startswith(metric + "{") and all(f'{k}="{v}"' in line for k, v in labels.items())
    ]
    assert len(found) == 1, (metric, labels, found[:3])
    return float(found[0].rsplit(" ", 1)[1])


def test_a_fleet_has_the_asked_gpus_and_executions_of_mixed_sizes():
    s = fleet_scenario(10_000, 1_000, minutes=60)
    hosts = {g.host for g in s.all_gpus()}
    assert len(s.hosts) == len(hosts) == 1_250
    physical = {g.device_key for g in s.all_gpus()}
    assert len(physical) == 10_000
    mig = [g for g in s.all_gpus() if g.mig_instance]
    assert len({g.host for g in mig}) == 1_250 // MIG_EVERY and len(mig) == 2 * 8 * (1_250 // MIG_EVERY)
    sizes = Counter(len(e.gpus) for e in s.executions)
    assert 900 <= len(s.executions) <= 1_000 and min(sizes) == 1 and max(sizes) == 64
    assert any(len({g.host for g in e.gpus}) > 1 for e in s.executions)  # some span hosts
    owners_per_host = Counter(h for e in s.executions for h in {g.host for g in e.gpus})
    assert max(owners_per_host.values()) > 1  # some hosts hold several executions
    assert s.unowned_gpus  # and some GPUs nobody holds
    assert any(g.mig_instance for e in s.executions for g in e.gpus)  # MIG instances are held too
    assert all(e.end_minute >= 60 for e in s.executions)  # every execution runs the whole window


def test_the_exposition_publishes_the_phase_values_of_the_model():
    s = fleet_scenario(256, 40, minutes=120)
    fleet = FleetExposition(s, start=1_000_000)
    whole = next(e for e in s.executions if not e.gpus[0].mig_instance)
    gpu, minute = whole.gpus[0], 17.25
    elapsed = 0
    for name in whole.phases:  # the phase at ``minute``, counted out here rather than asked of the model
        if minute < elapsed + PHASES[name].minutes:
            phase = PHASES[name]
            break
        elapsed += PHASES[name].minutes
    dcgm = fleet.dcgm_text(1_000_000 + minute * 60)
    labels = {"UUID": gpu.uuid, "execution_id": whole.id}
    assert sample(dcgm, "DCGM_FI_DEV_GPU_UTIL", **labels) == phase.gpu.util_percent + whole.util_offset(gpu)
    assert sample(dcgm, "DCGM_FI_DEV_MEM_CLOCK", **labels) == phase.gpu.mem_clock_mhz
    used = sample(dcgm, "DCGM_FI_DEV_FB_USED", **labels)
    assert used + sample(dcgm, "DCGM_FI_DEV_FB_FREE", **labels) == 81920  # MiB usable on an H100 80GB
    # On a MIG instance GPU_UTIL reads 0 and the engine activity carries the utilisation.
    mig = next(e for e in s.executions if e.gpus[0].mig_instance)
    mig_phase = mig.phase_at(minute)
    assert mig_phase is not None
    labels = {"UUID": mig.gpus[0].uuid, "GPU_I_ID": mig.gpus[0].mig_instance}
    assert sample(dcgm, "DCGM_FI_DEV_GPU_UTIL", **labels) == 0
    engine = (mig_phase.gpu.util_percent + mig.util_offset(mig.gpus[0])) / 100
    assert sample(dcgm, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", **labels) == engine
    # One line per GPU entry and metric; every family under its TYPE line.
    assert len(re.findall(r"^DCGM_FI_DEV_SM_CLOCK\{", dcgm, re.M)) == len(s.all_gpus())
    assert dcgm.count("# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n") == 1


def families(text: str) -> dict[str, str]:
    """Each metric family's TYPE in an exposition."""
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


def test_every_gpu_entry_publishes_every_field_of_the_releases_default_counters():
    s = fleet_scenario(64, 6, minutes=60, cpus=4)
    dcgm = FleetExposition(s, 1_000_000).dcgm_text(1_000_000 + 600)
    # Every field the release's counters file names, with its type, and the power limit beside them.
    want = dict(bench_fleet.DEFAULT_COUNTERS) | {"DCGM_FI_DEV_ENFORCED_POWER_LIMIT": "gauge"}
    assert families(dcgm) == want
    for name in want:
        assert len(re.findall(rf"^{name}\{{", dcgm, re.M)) == len(s.all_gpus()), name
    # The catalog's default fields of the generation are in the file, typed alike: a catalog that
    # named a field the release does not publish by default, or read a counter as a gauge, fails here.
    for key in bench_fleet.DCGM_SIGNALS:
        raw = raw_for(key, bench_fleet.GENERATION)
        assert raw is not None
        if raw.default_collected:
            assert want[raw.name] == raw.type, raw.name
    # Labels real output carries on every entry.
    first = next(line for line in dcgm.splitlines() if line.startswith("DCGM_FI_DEV_GPU_TEMP{"))
    for label in ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"):
        assert f'{label}="' in first, label


def test_each_host_publishes_what_a_default_node_exporter_does():
    cpus = 16
    s = fleet_scenario(16, 2, minutes=60, cpus=cpus)
    start, t = 1_000_000, 1_000_000 + 900
    fleet = FleetExposition(s, start)
    node = fleet.node_text(t)
    host = s.hosts[0].name
    lines = [line for line in node.splitlines() if f'instance="{host}:9100"' in line]
    cpu = [line for line in lines if line.startswith("node_cpu_seconds_total{")]
    assert len(cpu) == 8 * cpus  # 8 modes per logical CPU
    # Each CPU's modes add up to the seconds elapsed since the counters started (at the last step).
    for c in (0, cpus - 1):
        total = sum(float(line.rsplit(" ", 1)[1]) for line in cpu if f'cpu="{c}"' in line)
        assert total == pytest.approx(t - start)
    names = {line.split("{", 1)[0] for line in lines}
    for family in ("node_memory_MemTotal_bytes", "node_memory_Cached_bytes", "node_filesystem_avail_bytes"):
        assert family in names
    assert families(node)["node_network_receive_bytes_total"] == "counter" and "node_network_up" in names
    assert len([n for n in lines if n.startswith("node_filesystem_size_bytes{")]) == len(bench_fleet.FILESYSTEMS)
    assert fleet.host_series(s.hosts[0]) == len(lines)
    # Fields the catalog reads are never overwritten by the fleet's constants.
    read = {raw_for(k, bench_fleet.GENERATION).name for k in bench_fleet.DCGM_SIGNALS}
    assert not read & set(bench_fleet.OTHER_FIELDS)


def test_live_cpu_counters_agree_with_the_backfilled_ones_and_only_grow():
    s = fleet_scenario(64, 6, minutes=120)
    start = 1_000_000
    live, history = FleetExposition(s, start), FleetExposition(s, start)
    execution = s.executions[0]
    host = execution.gpus[0].host
    om = history.openmetrics(start, start + 3600, execution.id)
    counters = [
        float(line.rsplit(" ", 2)[1])
        for line in om.splitlines()
        if line.startswith(f'node_cpu_seconds_total{{instance="{host}:9100",job="node",cpu="0"')
    ]
    assert len(counters) == 3600 // STEP_SECONDS
    assert all(b >= a for a, b in itertools.pairwise(counters)) and counters[-1] > counters[0]
    for k in (10, 11, 200):  # scraped out of order of the history, and skipping ahead
        node = live.node_text(start + k * STEP_SECONDS)
        assert sample(node, "node_cpu_seconds_total", instance=f"{host}:9100", cpu="0", mode="idle") == counters[k]


def test_openmetrics_holds_one_execution_series_by_series_in_time_order():
    s = fleet_scenario(64, 6, minutes=120)
    execution = next(e for e in s.executions if len(e.gpus) > 1)
    om = FleetExposition(s, 1_000_000).openmetrics(1_000_000, 1_000_000 + 600, execution.id)
    assert om.endswith("# EOF\n")
    lines = om.splitlines()[:-1]
    assert {m for line in lines for m in re.findall(r'execution_id="([^"]+)"', line)} == {execution.id}
    assert {m for line in lines for m in re.findall(r'UUID="([^"]+)"', line)} == {g.uuid for g in execution.gpus}
    last: dict[str, int] = {}
    order: list[str] = []
    for line in lines:
        series, _, stamp = line.rpartition(" ")
        series = series.rpartition(" ")[0]
        assert int(stamp) > last.get(series, 0)
        if series not in last:
            order.append(series)
        last[series] = int(stamp)
    assert len(order) == len(last)  # no series comes back after another began
    assert Counter(int(line.rpartition(" ")[2]) for line in lines).keys() == set(range(1_000_000, 1_000_600, 15))


def eventually(server: Prometheus, expr: str, count: int, seconds: float = 60) -> list[dict]:
    """The instant result of ``expr`` once it has ``count`` series (or whatever it has after ``seconds``)."""
    deadline, result = time.monotonic() + seconds, []
    while time.monotonic() < deadline and len(result) < count:
        time.sleep(1)
        result = server.query(expr, time.time())
    return result


def values_at(server: Prometheus, expr: str, at: float) -> dict[tuple, float]:
    """An instant query's values by label set, the metric name left out."""
    return {
        tuple(sorted((k, v) for k, v in r["metric"].items() if k != "__name__")): float(r["value"][1])
        for r in server.query(expr, at)
    }


def test_openmetrics_of_the_whole_fleet_holds_every_gpu_and_host():
    s = fleet_scenario(24, 4, minutes=30)
    om = FleetExposition(s, 1_000_000).openmetrics(1_000_000, 1_000_060)
    lines = om.splitlines()[:-1]
    gpu_lines = [line for line in lines if line.startswith("DCGM_FI_DEV_GPU_TEMP{")]
    assert len(gpu_lines) == len(s.all_gpus()) * 4  # 4 samples a minute
    assert {re.search(r'nodename="([^"]+)"', line)[1] for line in lines if "node_uname_info" in line} == {
        h.name for h in s.hosts
    }


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_prometheus_holds_the_history_scrapes_the_fleet_live_records_and_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The harness end to end: history backfilled, the fleet scraped live with the rules, then stopped.

    Also checks the benchmark's raw path: the raw expressions give what the recorded series hold.
    """
    cfg = Config()
    now = int(time.time()) // STEP_SECONDS * STEP_SECONDS
    start = now - 3600
    # 17 hosts, so the 16th is partitioned into MIG instances.
    s = fleet_scenario(17 * 8, 30, minutes=120)
    fleet = FleetExposition(s, start)
    execution = measured_execution(s)
    monkeypatch.setattr(fleet_exporter, "HOSTS_PER_SHARD", 8)  # 17 hosts in 3 scrape targets
    server = Prometheus(tmp_path)
    try:
        server.load_openmetrics(fleet.openmetrics(start, now, execution.id), all_groups(cfg), start, now)
        queries = fetch_queries(cfg, execution)
        at = now - 20 * 60 + 14.9  # after the recorded sample of a grid step, before the next raw one
        for recorded, raw in zip(queries.recorded, queries.raw, strict=True):
            want, got = values_at(server, recorded, at), values_at(server, raw, at)
            assert len(want) == (8 if recorded.startswith("execution_gpu:") else 1)
            assert want.keys() == got.keys(), recorded
            if "cpu" not in recorded:  # rate() extrapolates to its window, which the recorded sample saw earlier
                assert [got[k] for k in want] == pytest.approx(list(want.values()), rel=1e-9), recorded
            assert server.query_range(recorded, start, now, STEP_SECONDS), recorded
        server.stop()

        exporter_port = free_port()
        server.config_text = scrape_config(
            fleet, exporter_port, server.port, f"{REPO / 'rules'}/*.rules.yml", interval=5
        )
        with FleetExporter(fleet, exporter_port):
            server.start()
            process = server.process
            live = next(e for e in s.executions if e.gpus[0].mig_instance)
            # The live targets are new to the host map: their GPUs are recorded from its next evaluation.
            wait = 60 + parse_duration_seconds(cfg.node.host_map_interval)
            got = eventually(
                server, f'{catalog.GPU_UTILIZATION.name}{{execution_id="{live.id}"}}', len(live.gpus), wait
            )
            assert {r["metric"]["GPU_I_ID"] for r in got} == {g.mig_instance for g in live.gpus}
            # Each instance's utilisation is one of its phases' (plus its offset), read from GR_ENGINE_ACTIVE.
            phases = {PHASES[p].gpu.util_percent for p in live.phases}
            for r in got:
                gpu = next(g for g in live.gpus if g.mig_instance == r["metric"]["GPU_I_ID"])
                assert round(float(r["value"][1]) * 100 - live.util_offset(gpu), 6) in phases
            # Host series join the one live target's node_uname_info per host: they too wait on the host map's
            # next evaluation (a minute was too short once, on Prometheus 3 on a loaded CI machine).
            hosts = eventually(server, f'{catalog.NODE_RAM_TOTAL.name}{{execution_id="{live.id}"}}', 1, wait)
            assert {r["metric"]["hostname"] for r in hosts} == {g.host for g in live.gpus}
            assert server.query("count(count by (nodename) (node_uname_info))", time.time())[0]["value"][1] == "17"
            # Every dcgm shard is its own scrape target, and each answered.
            up = eventually(server, 'up{job="dcgm-exporter"}', 3)  # the third shard may not be scraped yet
            assert sorted(float(r["value"][1]) for r in up) == [1.0] * 3
    finally:
        server.stop()
    assert process.poll() is not None


def test_a_scrape_shard_of_the_bench_scrapes_its_part_of_the_fleet_and_both_parts_all_of_it():
    """bench.host_identity's shards: each Prometheus lists only its part of the exporter's targets."""
    fleet = FleetExposition(fleet_scenario(512, 40, minutes=10), 1_000_000)
    targets = len(shards(fleet))
    assert targets == 2

    def listed(config: str) -> set[str]:
        return set(re.findall(r"__metrics_path__: (/dcgm/\d+)", config))

    every = listed(scrape_config(fleet, 9400, 9090, ""))
    parts = [listed(scrape_config(fleet, 9400, 9090, "", parts=[k])) for k in range(targets)]
    assert every == {"/dcgm/0", "/dcgm/1"} and parts == [{"/dcgm/0"}, {"/dcgm/1"}]


def test_the_host_identity_bench_refuses_ways_that_recorded_different_gpu_counts():
    assert one_count({"join": {9565}, "scrape": {9565}}, "ways") == 9565
    for counts in ({"join": {9565}, "scrape": {9000}}, {"join": {9565, 9000}}, {"join": {0}}):
        with pytest.raises(RuntimeError, match="different GPU counts"):
            one_count(counts, "ways")


@pytest.mark.e2e
def test_the_host_cpu_rate_at_its_own_interval_runs_so_on_a_real_prometheus_and_leaves_no_gap(tmp_path: Path):
    """``node.cpu_rate_interval`` where promtool cannot tell (it evaluates every group at every step): a
    real Prometheus runs the rate's group at its interval (3 s, the served groups every second), and the
    per-execution host CPU series, averaging the rates recorded within 6 s, has a sample at every
    evaluation of its group, however the two groups' evaluations fall, and agrees with the raw counters."""
    # The host maps with the served groups: at their default minute, the group's first evaluation may come up to a
    # minute after Prometheus starts (its offset in the interval), and no host series is recorded before it.
    node = {"cpu_rate_interval": "3s", "host_map_interval": ""}
    cfg = config_from_mapping({"rule_interval": "1s", "derived_rule_interval": "", "node": node}, "test")
    rules = tmp_path / "rules"
    write_all(rule_files(cfg, rules))
    s = fleet_scenario(16, 4, minutes=120)
    fleet = FleetExposition(s, int(time.time()) - 30 * 60)
    live = s.executions[0]
    server, port = Prometheus(tmp_path / "prometheus"), free_port()
    server.config_text = scrape_config(fleet, port, free_port(), f"{rules}/*.rules.yml", interval=1)
    try:
        with FleetExporter(fleet, port):
            server.start()
            cpu = f'{catalog.NODE_CPU_UTILIZATION.name}{{execution_id="{live.id}"}}'
            ram = f'{catalog.NODE_RAM_USED.name}{{execution_id="{live.id}"}}'  # same group, same evaluations
            hosts = len({g.host for g in live.gpus})
            assert len(eventually(server, cpu, hosts, seconds=60)) == hosts
            time.sleep(20)
            at = time.time()
            group = f"{rules}/execution-gpu.rules.yml;gpu-execution-pack.host_rates"
            assert server.own_metrics("rule_group")[f"prometheus_rule_group_interval_seconds/{group}"] == 3
            # Every evaluation of the host group in the last 15 s wrote the CPU series beside the RAM one.
            counted = {k: values_at(server, f"count_over_time({e}[15s])", at) for k, e in (("cpu", cpu), ("ram", ram))}
            assert counted["cpu"] == counted["ram"] and len(counted["cpu"]) == hosts
            assert min(counted["cpu"].values()) >= 10  # evaluated about every second
            # The rate itself, every 3 s: about five samples in 15 s.
            rates = values_at(server, f"count_over_time({catalog.NODE_CPU_IDLE_RATE_OVER_INTERVAL.name}[15s])", at)
            assert rates and all(4 <= n <= 6 for n in rates.values()), rates
            assert not server.query(catalog.NODE_CPU_IDLE_RATE.name, at)
            # What it records is the raw counters' idle rate over its window.
            recorded = values_at(server, catalog.NODE_CPU_IDLE_RATE_OVER_INTERVAL.name, at)
            evaluated = values_at(server, f"timestamp({catalog.NODE_CPU_IDLE_RATE_OVER_INTERVAL.name})", at)
            assert recorded and recorded.keys() == evaluated.keys()
            for target, value in recorded.items():
                instance = dict(target)["instance"]
                idle = f'node_cpu_seconds_total{{mode="idle", instance="{instance}"}}'
                [raw] = values_at(server, f"avg(rate({idle}[4m]))", evaluated[target]).values()
                assert value == pytest.approx(raw, abs=0.02), target
    finally:
        server.stop()


def test_the_light_shape_publishes_two_cpu_modes_per_cpu_and_the_profiling_fields():
    """bench.shapes' second fleet: 32 CPUs publishing idle and user only, and dcgm-exporter's profiling fields."""
    shape = bench_fleet.FEW_CPUS
    s = fleet_scenario(16, 2, minutes=60, cpus=shape.cpus)
    start, t = 1_000_000, 1_000_000 + 900
    fleet = FleetExposition(s, start, shape=shape)
    host = s.hosts[0].name
    cpu = [
        line
        for line in fleet.node_text(t).splitlines()
        if line.startswith("node_cpu_seconds_total{") and f'instance="{host}:9100"' in line
    ]
    assert len(cpu) == 2 * 32 and {re.search(r'mode="(\w+)"', line)[1] for line in cpu} == {"idle", "user"}
    dcgm = fleet.dcgm_text(t)
    published = families(dcgm)
    # SM activity and occupancy (which the rules read) and the three pipes, on every GPU entry, besides
    # every default field.
    for name in ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_PIPE_FP64_ACTIVE"):
        assert published.get(name) == "gauge", name
        assert len(re.findall(rf"^{name}\{{", dcgm, re.M)) == len(s.all_gpus()), name
    assert set(bench_fleet.DEFAULT_COUNTERS) <= set(published.items())
    assert raw_for("sm_active", bench_fleet.GENERATION).name in published
    # The default shape publishes none of them.
    assert "DCGM_FI_PROF_SM_ACTIVE" not in families(FleetExposition(s, start).dcgm_text(t))


def test_with_host_label_every_target_of_the_bench_carries_hostname():
    """What doctor needs to see before it advises node.host_identity: scrape (every target, Prometheus' own too)."""
    fleet = FleetExposition(fleet_scenario(512, 40, minutes=10), 1_000_000)
    plain = scrape_config(fleet, 9400, 9090, "")
    named = scrape_config(fleet, 9400, 9090, "", host_label=True)
    targets = named.count("targets:")
    assert targets == 2 * len(shards(fleet)) + 1 and named.count("hostname:") == targets
    assert "hostname" not in plain
