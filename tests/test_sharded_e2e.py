"""Sharded scraping end to end: two scrape shards on the generated snippets and shard rules, remote-writing
to a central Prometheus that evaluates the generated ruler rules, and the endpoint on the central one.

Every host has its own loopback address (127.0.0.0/8 all reaches lo), so the shards' hashmod on the
host part of the address splits the fleet as it would split real hosts. Each host also runs a stand-in for
ROCm device-metrics-exporter that publishes no GPU (the fleet is NVIDIA's): what it shows is the scrape,
each shard scraping it with its host's node_exporter.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml
from gpu_execution_pack import build, catalog
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.output import to_yaml, write_all
from gpu_execution_pack.rules.files import PLACEMENT, RULER, SHARD, rule_files
from gpu_execution_pack.rules.sharding import DIR, RULER_RULES_DIR, scrape_path, shard_dir
from gpu_execution_pack.scenario import oracle
from gpu_execution_pack.scenario.model import Execution, Gpu, Host, Scenario

from bench.exporter import QuietServer
from bench.fleet import FLEET_ENERGY_WATTS, FleetExposition
from harness.prometheus import Prometheus, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.sharded, pytest.mark.usefixtures("promtool_available")]

SHARDS = 2
GPUS_PER_HOST = 2
SPANNING = "span-0001"
KEY = "test-key"
DEADLINE = 90.0
RULER_DEADLINE = 20.0  # for the ruler's 1 s rules to follow the remote-written series they read
# The central server's lookback (5 min by default) and the heartbeats' freshness (2 min by default), short
# so that what a stopped shard leaves shows; the freshness is below the lookback by more than an interval.
LOOKBACK = 10
FRESHNESS = 4
# How long after a heartbeat expires the ruler has evaluated again, and its stale marker is queryable.
SLACK = 3
COUNT = catalog.EXECUTION_GPU_COUNT


def hashmod(value: str, modulus: int) -> int:
    """Prometheus' hashmod relabelling, restated: the last 8 bytes of the value's MD5, big-endian, modulo."""
    return int.from_bytes(hashlib.md5(value.encode()).digest()[8:], "big") % modulus


def pick_addresses() -> dict[str, str]:
    """Four hosts' loopback addresses, two hashing to each shard: host name -> address."""
    by_shard: dict[int, list[str]] = {i: [] for i in range(SHARDS)}
    for last in range(11, 250):
        address = f"127.0.0.{last}"
        if len(by_shard[hashmod(address, SHARDS)]) < 2:
            by_shard[hashmod(address, SHARDS)].append(address)
    # h0, h2 on shard 0; h1, h3 on shard 1.
    return {f"h{2 * k + i}": by_shard[i][k] for k in range(2) for i in range(SHARDS)}


def scenario() -> Scenario:
    """One idle execution on h0 and h1 (one host per shard), a busy one on h2."""
    hosts = tuple(Host(f"h{i}") for i in range(4))
    gpus = {h.name: tuple(Gpu(h.name, k) for k in range(GPUS_PER_HOST)) for h in hosts}
    idle = Execution(SPANNING, gpus["h0"] + gpus["h1"], ("idle",) * 40)
    busy = Execution("local-0001", gpus["h2"], ("compute",) * 20)
    return Scenario("sharded", "", hosts, (idle, busy), unowned_gpus=gpus["h3"], minutes=200)


JOBS = ("dcgm-exporter", "device-metrics-exporter", "node-exporter")


class Exporters:
    """A dcgm-exporter, a device-metrics-exporter stand-in (an empty exposition) and a node_exporter per host,
    each on the host's own loopback address."""

    def __init__(self, fleet: FleetExposition, addresses: dict[str, str], ports: dict[str, int] | None = None):
        """``ports``: each kind's port on every address (static discovery lists hosts, one port per exporter);
        else any free one."""
        self.servers: list[QuietServer] = []
        self.targets: dict[str, list[str]] = {"dcgm": [], "amd": [], "node": []}
        for host, address in addresses.items():
            for kind, text in (("dcgm", fleet.dcgm_text), ("amd", no_gpu), ("node", fleet.node_text)):
                bound = (address, (ports or {}).get(kind, 0))
                server = QuietServer(bound, handler(lambda t, text=text, host=host: text(t, frozenset({host}))))
                self.servers.append(server)
                self.targets[kind].append(f"{address}:{server.server_address[1]}")

    def __enter__(self) -> Exporters:
        for server in self.servers:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()


def no_gpu(t: float, hosts: frozenset[str]) -> str:
    """device-metrics-exporter's exposition on a host without AMD GPUs, as the stand-in publishes it: none."""
    return ""


def handler(render: Callable[[float], str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = render(time.time()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def pack_config(
    tmp_path: Path, host_identity: str = "join", central: str = "http://127.0.0.1:9090", **sharding: object
) -> Config:
    """1 s evaluations, the underuse alert after 2 s, file discovery from tmp_path, short-lived heartbeats,
    remote write to the ``central`` Prometheus; ``sharding``: more keys of that section."""
    return config_from_mapping(
        {
            # The host maps every second too: a new target's first map entry, a minute later at the default
            # interval, would take most of every deadline here (tests/test_host_map_interval.py tests that wait).
            "node": {"host_identity": host_identity, "host_map_interval": ""},
            "sharding": {
                **sharding,
                "shards": SHARDS,
                "remote_write_url": f"{central}/api/v1/write",
                "heartbeat_freshness": f"{FRESHNESS}s",
                "dcgm_file_sd": str(tmp_path / "targets" / "dcgm.yml"),
                "amd_file_sd": str(tmp_path / "targets" / "amd.yml"),
                "node_file_sd": str(tmp_path / "targets" / "node.yml"),
            },
            "rule_interval": "1s",
            "derived_rule_interval": "",
            "alerts": {"gpu_underutilized": {"for": "2s"}},
            "output": {"rules_dir": str(tmp_path / "rules")},
        }
    )


Breakage = Callable[[dict[Path, str], Path], dict[Path, str]]


@contextmanager
def sharded_fleet(
    tmp_path: Path, broken: Breakage | None = None, host_identity: str = "join", variant: str = "file-sd"
) -> Iterator[tuple[Prometheus, list[Prometheus]]]:
    """The central Prometheus and the shards, scraping the exporters with the generated files (``broken``'ed)
    of discovery ``variant`` (file-sd or static)."""
    central = Prometheus(
        tmp_path / "central", flags=("--web.enable-remote-write-receiver", f"--query.lookback-delta={LOOKBACK}s")
    )
    central.port = free_port()
    addresses = pick_addresses()
    ports, listed = None, {}
    if variant == "static":  # every host listed, each exporter kind at one port on all of them
        ports = {"dcgm": free_port(), "amd": free_port(), "node": free_port()}
        hosts = list(addresses.values())
        listed = {"hosts": hosts, "amd_hosts": hosts} | {f"{kind}_port": port for kind, port in ports.items()}
    cfg = pack_config(tmp_path, host_identity, central.url, **listed)
    rules = tmp_path / "rules"
    files = {p: t for p, t in build.rule_outputs(cfg).items() if "sharded" in p.parts}
    files = broken(files, rules) if broken else files
    write_all(files)
    ruler_rules = sorted(str(p) for p in files if p.parent.name == "ruler")
    fleet = FleetExposition(scenario(), time.time() - 600)  # as the exporters publish it: no scrape labels
    with ExitStack() as stack:
        exporters = stack.enter_context(Exporters(fleet, addresses, ports))
        (tmp_path / "targets").mkdir()
        for kind, targets in exporters.targets.items():
            (tmp_path / "targets" / f"{kind}.yml").write_text(to_yaml([{"targets": targets}]))
        central.config_text = to_yaml({"global": {"evaluation_interval": "1s"}, "rule_files": ruler_rules})
        stack.callback(central.stop)
        central.start()
        shards = []
        for i in range(SHARDS):
            shard = Prometheus(tmp_path / f"shard-{i}")
            # Each shard runs its generated prometheus.yml as is, but for the test's pace. The harness writes
            # it elsewhere, so its rule files (relative to the generated file) are given in full.
            config = yaml.safe_load(files[scrape_path(rules, i, variant)])
            config["global"] |= {"scrape_interval": "1s", "evaluation_interval": "1s"}
            config["rule_files"] = [str(shard_dir(rules, i) / f) for f in config["rule_files"]]
            config["remote_write"][0]["queue_config"] = {"batch_send_deadline": "1s"}
            shard.config_text = to_yaml(config)
            stack.callback(shard.stop)
            shard.start()
            shards.append(shard)
        yield central, shards


def eventually(server: Prometheus, expr: str, ready: Callable[[list[dict]], bool], seconds: float = DEADLINE) -> list:
    """The instant result of ``expr`` once ``ready`` says so, or the last one after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        result = server.query(expr, time.time())
        if ready(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.5)


def identities(result: list[dict]) -> list[tuple]:
    """Each series' labels without the shard's external label: what must be unique."""
    return [tuple(sorted((k, v) for k, v in r["metric"].items() if k != "shard")) for r in result]


def problems(central: Prometheus, cfg: Config) -> Iterator[str]:
    """What is wrong with the spanning execution on the central Prometheus, each as soon as it is seen: nothing
    when the sharded pack works. A broken split's test stops at the first (``problems_within``) rather than wait
    out every check's deadline."""
    gpus = GPUS_PER_HOST * 2
    # Remote write delivers each shard's series with its own lag: wait until both shards' GPUs have arrived,
    # then a little for the ruler, which evaluates every second, to count them (a count that never comes,
    # as where the rollups run on the shards, is then seen in seconds, not at the deadline).
    eventually(central, f'{catalog.GPU_UTILIZATION.name}{{execution_id="{SPANNING}"}}', lambda r: len(r) >= gpus)
    count = eventually(
        central,
        f'{COUNT.name}{{execution_id="{SPANNING}"}}',
        lambda r: sum(float(x["value"][1]) for x in r) >= gpus,
        seconds=RULER_DEADLINE,
    )
    if [float(r["value"][1]) for r in count] != [gpus]:
        yield f"{COUNT.name} is {[r['value'][1] for r in count]}, not [{gpus}]"
    for series in catalog.API_SERIES:
        result = central.query(f'{series.name}{{execution_id="{SPANNING}"}}', time.time())
        if len(set(identities(result))) != len(result):
            yield f"{series.name}: {len(result)} series, some twice: {identities(result)}"
    for series, want in ((catalog.GPU_UTILIZATION, gpus), (catalog.GPU_POWER, gpus), (catalog.NODE_RAM_TOTAL, 2)):
        got = eventually(central, f'{series.name}{{execution_id="{SPANNING}"}}', lambda r, n=want: len(r) >= n)
        if len(got) != want:
            yield f"{series.name}: {len(got)} series, not {want}"
    energy = eventually(central, f'{catalog.GPU_ENERGY.name}{{execution_id="{SPANNING}"}}', lambda r: len(r) >= gpus)
    if len(energy) != gpus:
        yield f"{catalog.GPU_ENERGY.name}: {len(energy)} series, not {gpus}"
    for r in energy:  # joules: the exporter's millijoule counter at 400 W, on the model's 15 s grid
        grid = (float(r["value"][1]) - oracle.ENERGY_AT_START_MILLIJOULES / 1000) / (FLEET_ENERGY_WATTS * 15)
        if abs(grid - round(grid)) > 1e-6 or not 0 <= grid <= 200 * 4:
            yield f"{catalog.GPU_ENERGY.name} {r['metric'].get('UUID')}: {r['value'][1]} J is off the counter"
    alert = f'ALERTS{{alertname="GpuExecutionGpuUnderutilized",alertstate="firing",execution_id="{SPANNING}"}}'
    firing = eventually(central, alert, lambda r: bool(r), seconds=30)
    if len(firing) != 1:
        yield f"GpuExecutionGpuUnderutilized fires {len(firing)} times for {SPANNING}, not once"


def problems_within(central: Prometheus, cfg: Config, seconds: float = 45.0) -> list[str]:
    """The first of ``problems`` once there is one, or [] after ``seconds``: what a broken split does shows
    only once both shards' series have reached the central server, which on a loaded machine may be a while."""
    deadline = time.monotonic() + seconds
    while not (found := next(problems(central, cfg), None)) and time.monotonic() < deadline:
        time.sleep(1)
    return [found] if found else []


def test_the_sharded_pack_serves_an_execution_spanning_shards(tmp_path: Path):
    from gpu_execution_pack.api.app import PATH, create_app
    from starlette.testclient import TestClient

    cfg = pack_config(tmp_path)
    with sharded_fleet(tmp_path) as (central, shards):
        # Each shard scrapes every exporter of its own hosts, and only those (the restated hashmod).
        addresses = pick_addresses()
        for i, shard in enumerate(shards):
            up = eventually(shard, "up", lambda r: len(r) == 2 * len(JOBS) and all(x["value"][1] == "1" for x in r))
            got = sorted((r["metric"]["job"], r["metric"]["instance"].rsplit(":", 1)[0]) for r in up)
            mine = [a for a in addresses.values() if hashmod(a, SHARDS) == i]
            assert got == sorted((job, a) for a in mine for job in JOBS), f"shard {i}"
            assert all(r["value"][1] == "1" for r in up), up
        assert list(problems(central, cfg)) == []
        api = dataclasses.replace(cfg.api, prometheus_url=central.url)
        with TestClient(create_app(dataclasses.replace(cfg, api=api), {KEY: "*"})) as client:
            response = client.get(
                PATH.format(execution_id=SPANNING), params={"step": "1s"}, headers={"Authorization": f"Bearer {KEY}"}
            )
        assert response.status_code == 200, response.text
        body = response.json()
        entries = body["series"][catalog.GPU_UTILIZATION.api_name]["entries"]
        assert sorted(e["labels"]["UUID"] for e in entries) == sorted(g.uuid for g in scenario().executions[0].gpus)
        # One shard stops. Its GPUs' last samples still count until the lookback passes, but its heartbeat
        # expires first: the count stays right, then has no sample; never the other shard's GPUs alone.
        seen = stop_shard_1(central, shards)
        assert all(values in ([], [GPUS_PER_HOST * 2.0]) for _, values in seen), seen
        assert all(values == [] for t, values in seen if t > FRESHNESS + SLACK), seen
        assert any(values for t, values in seen if t < FRESHNESS - 1), f"the count vanished at once: {seen}"


def stop_shard_1(central: Prometheus, shards: list[Prometheus]) -> list[tuple[float, list[float]]]:
    """Stop shard 1, then read the spanning execution's GPU count every half second until well past the
    lookback: (seconds since the stop, its values) each time."""
    shards[1].stop()
    stopped, seen = time.monotonic(), []
    while time.monotonic() < stopped + 2.5 * LOOKBACK:
        result = central.query(f'{COUNT.name}{{execution_id="{SPANNING}"}}', time.time())
        seen.append((round(time.monotonic() - stopped, 1), [float(r["value"][1]) for r in result]))
        time.sleep(0.5)
    return seen


def unguarded(files: dict[Path, str], rules: Path) -> dict[Path, str]:
    """The ruler's rules without the heartbeat guard."""
    ruler = rules / DIR / RULER_RULES_DIR
    plain = rule_files(pack_config(rules.parent), ruler, placement=RULER)
    assert set(plain) == {p for p in files if p.parent == ruler} and any(files[p] != t for p, t in plain.items())
    return files | plain


@pytest.mark.single_version
def test_without_the_guard_a_stopped_shard_lowers_the_count(tmp_path: Path):
    """What the guard prevents: once the lookback has passed, the other shard's GPUs alone are counted."""
    with sharded_fleet(tmp_path, unguarded) as (central, shards):
        assert list(problems(central, pack_config(tmp_path))) == []
        seen = stop_shard_1(central, shards)
        late = {v for t, values in seen if t > 2 * LOOKBACK for v in values}
        assert late == {float(GPUS_PER_HOST)}, seen


def drop_hashmod_of_shard_1(files: dict[Path, str], rules: Path) -> dict[Path, str]:
    """Shard 1 scrapes every host: the scrape jobs without their relabelling."""
    path = scrape_path(rules, 1, "file-sd")
    doc = yaml.safe_load(files[path])
    for job in doc["scrape_configs"]:
        job.pop("relabel_configs")
    return files | {path: to_yaml(doc)}


def rollups_on_the_shards(files: dict[Path, str], rules: Path) -> dict[Path, str]:
    """The per-execution group evaluated on each shard instead of the ruler."""
    moved = {p: t for p, t in files.items() if p.name == "execution.rules.yml"}
    assert [p.parent.name for p in moved] == ["ruler"] and PLACEMENT["gpu-execution-pack.execution"] == RULER != SHARD
    ((path, text),) = moved.items()
    return {p: t for p, t in files.items() if p != path} | {path.parent.parent / "shards" / path.name: text}


@pytest.mark.single_version
@pytest.mark.parametrize("broken", [drop_hashmod_of_shard_1, rollups_on_the_shards])
def test_a_broken_split_is_caught(tmp_path: Path, broken: Breakage):
    with sharded_fleet(tmp_path, broken) as (central, _):
        assert problems_within(central, pack_config(tmp_path)), f"{broken.__name__} went unnoticed"


# --- the host named at scrape (node.host_identity: scrape) -------------------------------------------


@pytest.mark.parametrize("variant", ["file-sd", "static"])
def test_hosts_named_at_scrape_serve_the_spanning_execution(tmp_path: Path, variant: str):
    """The snippets' relabelling names each target by the host part of its address; the rules, which join
    no host map, record the spanning execution's GPUs and host RAM under those names, once each. The static
    jobs list every host at one port per exporter, and each shard keeps its own (all three exporters of each)."""
    cfg = pack_config(tmp_path, "scrape")
    addresses = pick_addresses()
    with sharded_fleet(tmp_path, host_identity="scrape", variant=variant) as (central, shards):
        for i, shard in enumerate(shards):
            up = eventually(shard, "up", lambda r: len(r) == 2 * len(JOBS) and all(x["value"][1] == "1" for x in r))
            got = sorted((r["metric"]["job"], r["metric"]["instance"].rsplit(":", 1)[0]) for r in up)
            mine = [a for a in addresses.values() if hashmod(a, SHARDS) == i]
            assert got == sorted((job, a) for a in mine for job in JOBS), f"shard {i}"
            assert all(r["value"][1] == "1" for r in up), up
        assert list(problems(central, cfg)) == []
        for series, hosts in (
            (catalog.GPU_UTILIZATION, ("h0", "h0", "h1", "h1")),
            (catalog.NODE_RAM_TOTAL, ("h0", "h1")),
        ):
            result = central.query(f'{series.name}{{execution_id="{SPANNING}"}}', time.time())
            names = sorted(r["metric"][catalog.HOST_LABEL] for r in result)
            assert names == [addresses[h] for h in hosts], series.name


def no_host_names(files: dict[Path, str], rules: Path) -> dict[Path, str]:
    """Both shards' scrape jobs without the relabelling that names the host: the exporters' own labels only."""
    changed = {}
    for i in range(SHARDS):
        path = scrape_path(rules, i, "file-sd")
        doc = yaml.safe_load(files[path])
        for job in doc["scrape_configs"]:
            named = [r for r in job["relabel_configs"] if r.get("target_label") == catalog.HOST_LABEL]
            assert len(named) == 1, job["job_name"]
            job["relabel_configs"].remove(named[0])
        changed[path] = to_yaml(doc)
    return files | changed


def test_hosts_named_at_scrape_need_the_relabelling(tmp_path: Path):
    """Without it (dcgm-exporter 4.8 publishes Hostname, node_exporter nothing) every host reads as one."""
    with sharded_fleet(tmp_path, no_host_names, host_identity="scrape") as (central, _):
        assert problems_within(central, pack_config(tmp_path, "scrape")), "the rules found hosts no scrape named"
