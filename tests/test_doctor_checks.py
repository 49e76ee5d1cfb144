"""The doctor's checks on deployments built by hand, for what the real servers of tests/test_doctor.py do not
stage cheaply: a store without dcgm-exporter, the pack's rules not loaded (what they record cannot be judged,
rather than passed or blamed on the attribution), a server younger than the coverage step, and the scrape check
naming the target it fails on."""

from __future__ import annotations

import dataclasses

from gpu_execution_pack import __version__, catalog
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.doctor import advice, checks
from gpu_execution_pack.doctor.probe import Deployment, LoadedGroup, Target
from gpu_execution_pack.doctor.text import render
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.rules.groups import AlertRule, RecordingRule

NVIDIA_48 = frozenset({"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP", "node_uname_info"})


def deployment(cfg: Config, *, names: frozenset[str] = NVIDIA_48, loaded: bool = True, **facts) -> Deployment:
    """Four GPUs reporting, all held, on a deployment with (``loaded``) or without the pack's groups for ``cfg``."""
    groups = tuple(LoadedGroup(g.name, f"{g.file}.rules.yml", 15.0, 0.1, (), True) for g in all_groups(cfg))
    base = Deployment(
        metric_names=names,
        groups=groups if loaded else (),
        targets=(Target("dcgm-exporter", {"job": "dcgm-exporter", "instance": "gpu-01:9400"}, 15.0),),
        retention="15d",
        cluster_values={},
        gpus=4,
        attributed_gpus=4 if loaded else 0,
        collisions=(),
        max_cpus_per_host=32,
        gpu_time={"": (96.0, 96.0)},
    )
    return dataclasses.replace(base, **facts)


def item(check: str, cfg: Config, d: Deployment) -> checks.Item:
    return next(i for i in checks.checklist(cfg, d) if i.check == check)


def test_without_dcgm_exporter_the_optional_fields_are_not_listed_as_missing():
    """No dcgm-exporter metric in the store (an AMD fleet, or none): nothing to say of dcgm-exporter's optional
    fields; with one, the profiling fields it does not collect by default are named."""
    amd = config_from_mapping({"vendors": ["amd"]})
    for cfg, names in ((Config(), frozenset({"node_uname_info"})), (amd, NVIDIA_48)):
        found = item("optional fields", cfg, deployment(cfg, names=names))
        assert (found.status, found.found) == ("info", "no dcgm-exporter metrics read: nothing to check")
    nvidia = item("optional fields", Config(), deployment(Config()))
    assert nvidia.found.startswith("not collected: ") and "DCGM_FI_PROF_" in nvidia.found


def test_without_the_packs_rules_what_they_record_is_not_judged():
    """Attribution, attributed GPU-time and host-name collisions read series the pack's groups record: with those
    groups not loaded they are info naming the group, not a pass (no collision recorded) or a warn blaming
    attribution.mode (no GPU recorded as held)."""
    cfg = Config()
    d = deployment(cfg, loaded=False, gpu_time={"": (96.0, 0.0)})
    for check, records in (
        ("attribution", catalog.GPU_PRESENCE),
        ("attributed GPU-time", catalog.GPU_PRESENCE),
        ("host names", catalog.NODE_HOST_COLLISIONS),
    ):
        found = item(check, cfg, d)
        assert found.status == "info", found
        assert f"which records {records.name}, is not loaded here" in found.found, found
        assert "gpu-execution-pack." in found.found
    assert item("evaluation time", cfg, d).found == "no pack group is loaded here (see rule groups)"
    # Loaded, the same facts are judged.
    assert item("attribution", cfg, deployment(cfg, attributed_gpus=0)).status == "warn"
    assert item("host names", cfg, deployment(cfg)).status == "pass"


def test_a_server_younger_than_the_coverage_step_says_so():
    """GPUs report now but no 5m step of the last day holds one: not "no GPU reported over the last day"."""
    found = item("attributed GPU-time", Config(), deployment(Config(), gpu_time={}))
    assert found.status == "info" and found.found.startswith("no GPU-time counted yet"), found
    idle = item("attributed GPU-time", Config(), deployment(Config(), gpus=0, gpu_time={}))
    assert idle.found == "no GPU reported over the last day"


def test_a_scrape_too_slow_for_the_fallback_window_names_its_target_and_the_window_as_a_duration():
    """The default rate_window_fallback (4m) holds two samples of a 2m scrape, not of a 5m one: 10m would."""
    slow = Target("node", {"job": "node", "instance": "gpu-07:9100"}, 300.0)
    found = item("scrape intervals", Config(), deployment(Config(), targets=(*deployment(Config()).targets, slow)))
    assert found.status == "fail"
    assert found.found.startswith("node (gpu-07:9100) is scraped every 5m: rate_window_fallback 4m"), found
    assert found.fix == "set rate_window_fallback to at least 10m"
    two_minutes = dataclasses.replace(slow, interval_seconds=120.0)
    assert item("scrape intervals", Config(), deployment(Config(), targets=(two_minutes,))).status != "fail"


def test_node_exporters_metrics_are_no_sign_of_dcgm_exporter():
    """node_exporter's metrics are read by every generation's rules: they must not make an AMD fleet (or a store
    of hosts alone) look like one with dcgm-exporter, nor make doctor advise vendors it does not have."""
    node = frozenset({"node_uname_info", "node_cpu_seconds_total", "node_memory_MemTotal_bytes"})
    hosts_only = item("vendors", Config(), deployment(Config(), names=node))
    assert (hosts_only.status, hosts_only.found) == ("fail", "no GPU exporter's metrics in this Prometheus")
    amd_fleet = deployment(Config(), names=node | {"amd_gpu_gfx_activity", "amd_gpu_used_vram"})
    assert checks.vendors_found(Config(), amd_fleet) == ("amd",)
    assert item("vendors", Config(), amd_fleet).fix.startswith("set vendors: [amd] ")
    assert item("dcgm generations", Config(), amd_fleet).found == "no dcgm-exporter metrics read: nothing to check"


def test_only_the_targets_the_rules_read_are_judged_on_their_scrape_interval():
    """Prometheus scraping itself every 5m empties no rate of the rules': with the jobs that publish GPU presence
    or host CPU known, only their targets count; none of them active (federated series) is said, not failed."""
    gpus = Target("dcgm-exporter", {"job": "dcgm-exporter", "instance": "gpu-01:9400"}, 15.0)
    itself = Target("prometheus", {"job": "prometheus", "instance": "localhost:9090"}, 300.0)
    read = deployment(Config(), targets=(gpus, itself), read_jobs=frozenset({"dcgm-exporter", "node"}))
    assert item("scrape intervals", Config(), read).status == "pass"
    unknown = dataclasses.replace(read, read_jobs=None)  # not asked: every target counts, as before
    assert item("scrape intervals", Config(), unknown).status == "fail"
    federated = dataclasses.replace(read, targets=(itself,))
    found = item("scrape intervals", Config(), federated)
    assert found.status == "info" and "cannot be told" in found.found, found


def test_the_fallback_window_doctor_writes_holds_four_of_the_slowest_read_scrapes():
    """Every 15 s: rate_window's own 1m (a quarter of the default 4m's samples for the host CPU rate to read);
    every 30 s: 2m; a job the rules do not read (Prometheus itself every 5m) does not count; every 2m: 8m, longer
    than the default; every 1m: the default already, nothing written. The written config passes the scrape check."""
    gpus = Target("dcgm-exporter", {"job": "dcgm-exporter", "instance": "gpu-01:9400"}, 15.0)
    itself = Target("prometheus", {"job": "prometheus", "instance": "localhost:9090"}, 300.0)
    read_jobs = frozenset({"dcgm-exporter", "node"})
    for every, said, expected in ((15.0, "15s", "1m"), (30.0, "30s", "2m"), (120.0, "2m", "8m"), (60.0, "1m", None)):
        d = deployment(
            Config(), targets=(dataclasses.replace(gpus, interval_seconds=every), itself), read_jobs=read_jobs
        )
        change = advice.changes(Config(), d).get("rate_window_fallback")
        if expected is None:
            assert change is None, (every, change)
            continue
        assert change == (
            expected,
            f"the slowest scrape the rules read is every {said} (dcgm-exporter)",
        )
        written = config_from_mapping({"rate_window_fallback": expected}, "doctor.yml")
        assert item("scrape intervals", written, d).status != "fail", every
    # rate_window longer than four scrapes: the fallback is never shorter than it (one window, not two).
    slow_window = config_from_mapping({"rate_window": "2m"}, "pack.yml")
    assert advice.changes(slow_window, deployment(slow_window, read_jobs=read_jobs))["rate_window_fallback"][0] == "2m"


def test_shared_gpus_warn_only_where_a_shared_nodes_series_never_name_the_replica():
    cfg, shared = Config(), ("gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-05")
    told = checks.check_shared_gpus(cfg, deployment(cfg))
    assert (told.status, told.found.startswith("cannot be told: no kube_node_status_capacity")) == ("info", True)
    none = checks.check_shared_gpus(cfg, deployment(cfg, shared_gpu_nodes=()))
    assert none.status == "pass"
    labelled_all = checks.check_shared_gpus(cfg, deployment(cfg, shared_gpu_nodes=shared[:2]))
    assert (labelled_all.status, labelled_all.found) == (
        "pass",
        "2 nodes share their GPUs (nvidia.com/gpu advertised over the GPUs reported); their series carry vgpu: "
        "they name every holder",
    )
    item = checks.check_shared_gpus(cfg, deployment(cfg, shared_gpu_nodes=shared, unlabelled_shared_nodes=shared))
    assert item.status == "warn"
    assert "on 5 (gpu-01, gpu-02, gpu-03, gpu-04, ...) no GPU series carries vgpu" in item.found
    mapped = Config(attribution=dataclasses.replace(cfg.attribution, mode="mapping"))
    by_mapping = checks.check_shared_gpus(
        mapped, deployment(mapped, shared_gpu_nodes=shared, unlabelled_shared_nodes=shared)
    )
    assert by_mapping.status == "pass" and "a mapping metric names every holder" in by_mapping.found


def loaded_as_written(cfg: Config, alerts: dict[str, tuple[str, ...]] | None = None) -> tuple[LoadedGroup, ...]:
    """The pack's groups for ``cfg`` as Prometheus serves them from this pack's files: versioned recording groups,
    and each alert group's alerts (``alerts`` gives other names for a group, as an older file would hold)."""
    out = []
    for g in all_groups(cfg):
        records = any(isinstance(r, RecordingRule) for r in g.rules)
        names = tuple(sorted(r.alert for r in g.rules if isinstance(r, AlertRule)))
        versions = (__version__,) if records else ()
        shown = (alerts or {}).get(g.name, names)
        out.append(LoadedGroup(g.name, f"{g.file}.rules.yml", 15.0, 0.1, versions, records, shown))
    return tuple(out)


def test_an_alerts_file_of_this_pack_and_config_passes_the_rules_version():
    cfg = Config()
    assert item("rules version", cfg, deployment(cfg, groups=loaded_as_written(cfg))).status == "pass"


def test_an_alerts_file_holding_other_alerts_than_this_pack_writes_is_named_with_them():
    # An alerts file carries no version rule: an old one (an alert since renamed, one since added) is told by its
    # alerts' names, which Prometheus lists.
    cfg = Config()
    group = next(g for g in all_groups(cfg) if any(isinstance(r, AlertRule) for r in g.rules))
    written = sorted(r.alert for r in group.rules if isinstance(r, AlertRule))
    old = (*written[1:], "GpuExecutionPackOldAlert")
    found = item("rules version", cfg, deployment(cfg, groups=loaded_as_written(cfg, {group.name: old})))
    assert found.status == "warn" and found.fix.startswith("generate the rules with this pack")
    assert f"{group.file}.rules.yml holds other alerts than this pack writes" in found.found
    assert f"without {written[0]}" in found.found and "with GpuExecutionPackOldAlert" in found.found


def test_the_optional_fields_are_named_as_the_fleets_exporters_publish_them_and_the_fix_is_shown():
    """A dcgm-exporter 4.8 fleet read by the defaults (every generation): the missing maximum SM clock is
    DCGM_FI_DEV_MAX_SM_CLOCK there, not 4.10's _HERTZ name; and the text checklist shows an info's fix too."""
    found = item("optional fields", Config(), deployment(Config()))
    assert "DCGM_FI_DEV_MAX_SM_CLOCK (feeds" in found.found, found
    assert "DCGM_FI_DEV_MAX_SM_CLOCK_HERTZ" not in found.found, found
    text = render([found], "http://prometheus:9090")
    assert "INFO" in text and f"-> {found.fix}" in text, text


NAN = float("nan")


def test_iteration_counters_prometheus_answers_as_nan_are_unknown_not_nan_of_nan():
    """A group's missed and scheduled iterations read as NaN were listed as missed, "nan of nan": now unknown,
    named, and no missed iteration is claimed for them; another group's real misses still fail."""
    group, other = "gpu-execution-pack.execution-gpu", "gpu-execution-pack.execution"
    found = item("missed iterations", Config(), deployment(Config(), iterations={group: (NAN, NAN), other: (0, 40)}))
    assert (found.status, found.found) == (
        "info",
        f"no missed iteration in 1 pack groups; missed iterations unknown (Prometheus returned NaN) for {group}",
    )
    alone = item("missed iterations", Config(), deployment(Config(), iterations={group: (0.0, NAN)}))
    assert alone.status == "info" and "unknown (Prometheus returned NaN)" in alone.found, alone
    failing = item("missed iterations", Config(), deployment(Config(), iterations={group: (NAN, 9), other: (3, 40)}))
    assert failing.status == "fail" and f"{other} 3 of 40" in failing.found, failing
    for told in (found, alone, failing):
        assert "nan" not in told.found.replace("NaN", ""), told
    text = render([found, alone, failing], "http://prometheus:9090")
    assert "nan of nan" not in text and "unknown (Prometheus returned NaN)" in text


def test_gpu_time_prometheus_answers_as_nan_is_unknown_not_nan_percent():
    found = item("attributed GPU-time", Config(), deployment(Config(), gpu_time={"": (NAN, NAN)}))
    assert (found.status, found.found) == (
        "info",
        "over the last day, GPU-time held by an execution: the store unknown (Prometheus returned NaN)",
    )


def test_a_fleet_before_4_0_is_told_its_exporters_do_not_collect_the_engine_activity():
    """dcgm-exporter 3.3.6-3.4.2's default counters (its etc/default-counters.csv, the fields the pack reads): no
    profiling field and no reserved memory, which became default counters in 4.0.0 and 4.4.0. The catalog called
    DCGM_FI_PROF_GR_ENGINE_ACTIVE a default counter of every release, so doctor never named it missing there."""
    names = frozenset(
        {
            "DCGM_FI_DEV_SM_CLOCK",
            "DCGM_FI_DEV_MEM_CLOCK",
            "DCGM_FI_DEV_GPU_TEMP",
            "DCGM_FI_DEV_POWER_USAGE",
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
            "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
            "DCGM_FI_DEV_GPU_UTIL",
            "DCGM_FI_DEV_XID_ERRORS",
            "DCGM_FI_DEV_FB_FREE",
            "DCGM_FI_DEV_FB_USED",
            "node_uname_info",
        }
    )
    found = item("optional fields", Config(), deployment(Config(), names=names))
    for field in (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_DEV_FB_RESERVED",
    ):
        assert f"{field} (feeds" in found.found, (field, found.found)
    # A 4.8.x fleet that publishes them is not told so.
    newer = names | {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE"}
    found = item("optional fields", Config(), deployment(Config(), names=newer | {"DCGM_FI_PROF_PCIE_RX_BYTES"}))
    assert "GR_ENGINE" not in found.found and "TENSOR_ACTIVE" not in found.found, found.found


def test_dcgm_exporters_old_uuid_label_is_a_warning_whatever_the_config_reads():
    """dcgm-exporter under --use-old-namespace spells every GPU's UUID label uuid (its gpu_collector.go), pod
    mapping or none: the rules tell GPUs apart by UUID, so a config that reads no pod label was told "info,
    unread here" while every GPU of the host read as one device."""
    cfg = config_from_mapping({"attribution": {"mode": "label"}, "api": {"tenant_label": "team"}})
    found = item("pod labels", cfg, deployment(cfg, old_pod_label_targets=("gpu-01:9400",)))
    assert found.status == "warn", found
    assert "carry uuid, pod_name" in found.found and "have no UUID" in found.found, found
    assert "uuid to UUID" in found.fix, found


def test_hosts_named_at_scrape_fail_where_a_targets_series_carry_no_host_name():
    """Under node.host_identity: scrape the rules read the target label hostname as is: a target whose GPU or host
    CPU series lack it is recorded with an empty host (its GPUs joined to no host). Named, with the fix; under join
    nothing is asked of the targets. doctor suggests scrape only where every target and series carries the label."""
    scrape = config_from_mapping({"node": {"host_identity": "scrape"}})
    named = (Target("node", {"job": "node", "instance": "gpu-01:9100", "hostname": "gpu-01"}, 15.0),)
    unnamed = deployment(scrape, targets=named, unnamed_host_targets=("gpu-02:9100", "gpu-02:9400"))
    found = item("host identity", scrape, unnamed)
    assert found.status == "fail", found
    assert "2 targets (gpu-02:9100, gpu-02:9400) carry no hostname" in found.found
    assert "node.host_identity: join" in found.fix and "target label hostname" in found.fix
    assert item("host identity", scrape, deployment(scrape, targets=named)).status == "pass"
    assert item("host identity", Config(), unnamed).status == "pass"  # join: the rules find the host
    assert "node.host_identity" in advice.changes(Config(), deployment(Config(), targets=named))
    told = advice.changes(Config(), deployment(Config(), targets=named, unnamed_host_targets=("gpu-02:9100",)))
    assert "node.host_identity" not in told


def test_a_device_metrics_exporter_job_the_exporter_down_alert_does_not_watch_is_named_with_the_fix():
    """amd.targets' default (job=~".*(amd|rocm|device-metrics).*") selects no target of AMD's example job
    gpu_metrics: its exporters could go down without GpuExecutionDcgmExporterDown firing. The dcgm-exporter job beside
    it is watched, and is not named; a selector for the job passes, and a fleet without amd is not asked."""
    fleet = config_from_mapping({"vendors": ["nvidia", "amd"]})
    facts = {
        "dcgm_jobs": ("dcgm-exporter",),
        "dcgm_target_jobs": ("dcgm-exporter",),
        "amd_jobs": ("gpu_metrics",),
        "amd_target_jobs": (),
    }
    found = item("exporter targets", fleet, deployment(fleet, **facts))
    assert found.status == "warn", found
    assert found.found.startswith("no up series of job gpu_metrics, which publishes device-metrics-exporter's"), found
    assert "dcgm-exporter's" not in found.found and "cannot fire" in found.found, found
    assert found.fix.startswith('set amd.targets to select them, e.g. job="gpu_metrics"'), found
    watched = config_from_mapping({"vendors": ["nvidia", "amd"], "amd": {"targets": 'job="gpu_metrics"'}})
    ok = item("exporter targets", watched, deployment(watched, **(facts | {"amd_target_jobs": ("gpu_metrics",)})))
    assert ok.status == "pass" and 'amd.targets (job="gpu_metrics") selects the targets of gpu_metrics' in ok.found
    nvidia = item("exporter targets", Config(), deployment(Config(), **(facts | {"amd_target_jobs": None})))
    assert nvidia.status == "pass" and "amd" not in nvidia.found, nvidia
