"""The synthetic fleet behind the rule-cost benchmark."""

from __future__ import annotations

import re
from collections import Counter

from tests.fleet_exporter import GPUS_PER_HOST, dcgm_text, fleet, node_text


def test_a_fleet_has_the_asked_gpus_and_executions_of_mixed_sizes():
    gpus = fleet(10_000, 1_000)
    assert len(gpus) == 10_000 and max(g.host for g in gpus) == 10_000 // GPUS_PER_HOST - 1
    sizes = Counter(g.execution for g in gpus if g.execution)
    assert 900 <= len(sizes) <= 1_000
    assert min(sizes.values()) == 1 and max(sizes.values()) == 64
    spanning = {e for e in sizes if len({g.host for g in gpus if g.execution == e}) > 1}
    assert spanning  # some executions span hosts
    hosts = Counter(g.host for g in gpus if g.execution)
    shared = [h for h in hosts if len({g.execution for g in gpus if g.host == h and g.execution}) > 1]
    assert shared  # and some hosts hold several executions


def test_the_exposition_names_each_host_as_its_own_target():
    gpus = fleet(16, 2)
    text = dcgm_text(gpus, now=0)
    assert len(re.findall(r"^DCGM_FI_DEV_GPU_UTIL\{", text, re.M)) == 16
    assert set(re.findall(r'instance="(h\d+):9400"', text)) == {"h00000", "h00001"}
    assert 'node_uname_info{instance="h00001:9100",nodename="h00001"} 1' in node_text(2, now=0)
