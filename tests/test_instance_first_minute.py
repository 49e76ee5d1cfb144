"""A MIG instance created between two evaluations of the hosts group, on a live Prometheus: billed and its power
counted from its first recorded sample, not from the hosts group's next evaluation.

Each instance's share of its GPU (catalog.GPU_INSTANCE_SHARE) was recorded in the hosts group, at
node.host_map_interval, so a new instance's rows went unbilled and without attributed power until that group's next
evaluation (up to a minute by default). promtool's unit tests evaluate every group at every step, so only a real
server shows such a gap between groups. Here the per-GPU, derived and cost groups run every second and the hosts
group every 6 s; an A100's 3g.40gb instance is held from the start, and its 4g.40gb instance is created (and held by
another execution) just after a hosts-group evaluation, and read until the hosts group has run again.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.rules.recording import HOSTS_GROUP
from gpu_execution_pack.scenario import model
from gpu_execution_pack.scenario.render import Renderer

from harness.prometheus import Prometheus, loopback_scrape_config

from .test_alertmanager import Exporter, GpuState, HostState
from .test_host_map_interval import eventually, serve

pytestmark = [pytest.mark.e2e]

MAP_SECONDS = 6  # several per-GPU evaluations (every second) between two of the hosts group's
HOST = model.Host("mig-node")  # dcgm-exporter 4.8, as test_alertmanager's Exporter publishes
A100 = "NVIDIA A100-SXM4-80GB"
HELD = model.Gpu(HOST.name, 0, A100, mig_instance="1", mig_profile="3g.40gb", mem_total_mib=40960)
CREATED = model.Gpu(HOST.name, 0, A100, mig_instance="2", mig_profile="4g.40gb", mem_total_mib=40960)
FIRST, SECOND = model.Execution("mig-first", (HELD,)), model.Execution("mig-second", (CREATED,), namespace="vision")
SCENARIO = model.Scenario("instance created", "an instance created beside a held one", (HOST,), (FIRST, SECOND))
POWER_WATTS = 500.0  # the board's, which dcgm-exporter repeats on every instance (GpuState's default)
# The created instance's compute slices over those of both instances: 4 of the A100's 7.
CREATED_SHARE = 4 / (4 + 3)


def hosts_evaluated(prometheus: Prometheus) -> str:
    """The hosts group's last evaluation time, as Prometheus' rules API reports it."""
    groups = prometheus._data("rules", {}, 30)["groups"]
    return next(g["lastEvaluation"] for g in groups if g["name"] == HOSTS_GROUP)


def test_an_instance_created_between_hosts_evaluations_is_billed_and_powered_from_its_first_sample(tmp_path: Path):
    cfg = config_from_mapping(
        {"rule_interval": "1s", "derived_rule_interval": "1s", "node": {"host_map_interval": f"{MAP_SECONDS}s"}}
    )
    exporter = Exporter(cfg)
    exporter.renderer = Renderer(SCENARIO, cfg)
    exporter.gpus = {HELD: GpuState(power=POWER_WATTS, since=time.time())}
    exporter.hosts = {HOST.name: HostState(since=time.time())}
    with contextlib.ExitStack() as servers:
        loop, rules_dir = serve(servers, exporter, (HOST,), cfg, tmp_path)
        prometheus = Prometheus(tmp_path / "prometheus")
        prometheus.config_text = loopback_scrape_config(loop.url.removeprefix("http://"), (HOST.name,), rules_dir)
        servers.callback(prometheus.stop)
        prometheus.start()

        def series(name: str, execution: model.Execution) -> list[dict]:
            return prometheus.query(f'{name}{{{catalog.EXECUTION_LABEL}="{execution.id}"}}', time.time())

        attributed, billed = catalog.GPU_POWER_ATTRIBUTED.name, catalog.MODEL_GPU_COUNT.name
        eventually(f"{attributed} of {FIRST.id}", lambda: bool(series(attributed, FIRST)), 90)
        # Just after a hosts-group evaluation: the created instance's first rows come most of an interval before
        # the group records its share.
        last = hosts_evaluated(prometheus)
        eventually("a hosts-group evaluation", lambda: hosts_evaluated(prometheus) != last, MAP_SECONDS + 5)
        created = time.time()
        with exporter.lock:
            exporter.gpus[CREATED] = GpuState(power=POWER_WATTS, since=created)
        share_of_created = f'{catalog.GPU_INSTANCE_SHARE.name}{{{catalog.MIG_INSTANCE_LABEL}="{CREATED.mig_instance}"}}'
        # Past the hosts group's next evaluation, and a few more of the others: what a share recorded there would
        # have left unbilled is all in the window read below.
        last = hosts_evaluated(prometheus)
        eventually("the next hosts-group evaluation", lambda: hosts_evaluated(prometheus) != last, MAP_SECONDS + 10)
        eventually(
            "the created instance's recorded share",
            lambda: bool(prometheus.query(share_of_created, time.time())),
            MAP_SECONDS + 10,
        )
        time.sleep(3)
        now = time.time()
        window = f"[{int(now - created) + 2}s]"

        def samples(expr: str) -> list[tuple[float, float]]:
            """The raw samples of ``expr`` (one series) since the instance was created."""
            found = prometheus.query(expr + window, now)
            assert len(found) == 1, (expr, found)
            return [(float(t), float(v)) for t, v in found[0]["values"]]

        def of_second(name: str) -> str:
            return f'{name}{{{catalog.EXECUTION_LABEL}="{SECOND.id}"}}'

        recorded_from = samples(share_of_created)[0][0]
        held = samples(of_second(catalog.GPU_SHARE.name))
        # Held for most of the hosts group's interval before that group next ran: the time this test is about.
        assert held[-1][0] - held[0][0] > MAP_SECONDS / 2, held
        # The instance's share recorded at the evaluation that recorded its first rows, not the hosts group's next.
        assert recorded_from <= held[0][0], (recorded_from, held[0])
        # Its power counted in its share of the GPU at every evaluation it was held, from the first (the same group
        # records both).
        power = samples(of_second(attributed))
        assert [t for t, _ in power] == [t for t, _ in held]
        assert all(v == pytest.approx(POWER_WATTS * CREATED_SHARE) for _, v in power), power
        # The GPU's two instances count its power once between them at each of those evaluations: the held one is
        # not left at the whole GPU's share it had alone.
        first = dict(samples(f'{attributed}{{{catalog.EXECUTION_LABEL}="{FIRST.id}"}}'))
        assert all(first[t] + v == pytest.approx(POWER_WATTS) for t, v in power), (first, power)
        # Billed in its share of a GPU from the cost group's first evaluation after its first rows.
        count = samples(of_second(billed))
        assert count[0][0] <= held[0][0] + 2, (count[0], held[0])
        assert all(v == pytest.approx(CREATED_SHARE) for _, v in count), count
