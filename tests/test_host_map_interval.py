"""The host maps at node.host_map_interval, less often than the per-GPU series, on a live Prometheus.

promtool's unit tests evaluate every group at the test file's interval whatever the group's own, so only a real
server shows what the slower maps do: a target that appears is recorded from the map's next evaluation after its
first scrape, never before, and the targets the map already names keep every evaluation meanwhile. Here the
per-GPU groups run every second and the maps every 10 s; the same holds for 15 s and 1m.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
import yaml
from gpu_execution_pack import catalog
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.rules.files import rule_files

from harness.alertmanager import Loopback
from harness.prometheus import Prometheus, loopback_scrape_config

from .test_alertmanager import GPUS, HOST, HOST_2, Exporter

pytestmark = [pytest.mark.e2e]

MAP_SECONDS = 10
# Evaluations start at an offset into their interval and wait for the scrape: a second of slack each.
SLACK_SECONDS = 3
DEADLINE_SECONDS = 60


def eventually(what: str, probe: Callable[[], bool], timeout: float = DEADLINE_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout:g}s")
        time.sleep(0.25)


def serve(servers: contextlib.ExitStack, exporter: Exporter, hosts: tuple, cfg: Config, tmp_path: Path) -> tuple:
    """A loopback server answering for each of ``hosts``' exporters from ``exporter`` (stopped with ``servers``),
    and a directory of the rule files for ``cfg``: (server, directory)."""
    loop = Loopback().start()
    servers.callback(loop.stop)
    for host in hosts:
        loop.routes[f"/dcgm/{host.name}"] = partial(exporter.dcgm_text, host)
        loop.routes[f"/node/{host.name}"] = partial(exporter.node_text, host)
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    for path, text in rule_files(cfg, rules_dir).items():
        path.write_text(text)
    return loop, rules_dir


def test_a_new_target_is_recorded_from_the_maps_next_evaluation_and_the_others_keep_every_one(tmp_path: Path):
    cfg = config_from_mapping(
        {"rule_interval": "1s", "derived_rule_interval": "1s", "node": {"host_map_interval": f"{MAP_SECONDS}s"}}
    )
    [hosts] = [
        g
        for text in rule_files(cfg, tmp_path).values()
        for g in yaml.safe_load(text)["groups"]
        if g["name"] == "gpu-execution-pack.hosts"
    ]
    assert hosts["interval"] == f"{MAP_SECONDS}s"
    exporter = Exporter(cfg)
    util = catalog.GPU_UTILIZATION.name
    with contextlib.ExitStack() as servers:
        loop, rules_dir = serve(servers, exporter, (HOST, HOST_2), cfg, tmp_path)
        address = loop.url.removeprefix("http://")

        def config(hosts: tuple) -> str:
            return loopback_scrape_config(address, (h.name for h in hosts), rules_dir)

        prometheus = Prometheus(tmp_path / "prometheus")
        prometheus.config_text = config((HOST,))
        servers.callback(prometheus.stop)
        prometheus.start()

        def gpus_of(host: str) -> int:
            return len(prometheus.query(f'{util}{{hostname="{host}"}}', time.time()))

        on_first = sum(g.host == HOST.name for g in GPUS)
        eventually(f"per-GPU series of {HOST.name}", lambda: gpus_of(HOST.name) == on_first)
        prometheus.config_text = config((HOST, HOST_2))
        prometheus.reload()
        added = time.time()
        eventually(f"per-GPU series of {HOST_2.name}", lambda: gpus_of(HOST_2.name) == len(GPUS) - on_first)
        now = time.time()

        def first(expr: str) -> float:
            """The time of the first sample of ``expr`` since the target was added (a range selector's raw samples)."""
            found = prometheus.query(f"{expr}[{int(now - added) + 5}s]", now)
            assert found, f"no {expr} since the target was added"
            return min(float(t) for series in found for t, _ in series["values"])

        scraped = first(f'DCGM_FI_DEV_GPU_UTIL{{instance="{HOST_2.name}:9400"}}')
        mapped = first(f'{catalog.GPU_EXPORTER_HOST.name}{{instance="{HOST_2.name}:9400"}}')
        recorded = first(f'{util}{{hostname="{HOST_2.name}"}}')
        # Not before the map names the target: a GPU series without its host would be a series of another name.
        assert mapped <= recorded <= mapped + SLACK_SECONDS, (scraped, mapped, recorded)
        # The map's next evaluation after the first scrape, at most its interval later.
        assert scraped <= mapped <= scraped + MAP_SECONDS + SLACK_SECONDS, (scraped, mapped, recorded)
        # The first host's GPUs were recorded at every evaluation meanwhile: the slower map names them throughout.
        window = int(now - added)
        counts = prometheus.query(f'count_over_time({util}{{hostname="{HOST.name}"}}[{window}s])', now)
        assert len(counts) == on_first
        assert all(float(c["value"][1]) >= window - SLACK_SECONDS for c in counts), (window, counts)
