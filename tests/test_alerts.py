"""Alert rules: the conventions lint, the runbook, and the coverage and teeth of the promtool alert tests."""

from __future__ import annotations

import copy
import dataclasses
import re
from functools import cache
from pathlib import Path

import pytest
import yaml
from gpu_execution_pack import catalog, cli, testsuites
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.docs import runbook
from gpu_execution_pack.promql import Call, aggregate, all_of, any_of, selector, transform
from gpu_execution_pack.rules import alerts
from gpu_execution_pack.rules import lint as alert_lint
from gpu_execution_pack.rules.alerts import AlertBuilder
from gpu_execution_pack.scenario import library, phases
from gpu_execution_pack.scenario.alerting import predict_linear
from gpu_execution_pack.scenario.humanize import go_value, humanize, humanize_percentage
from gpu_execution_pack.testsuites.alerts import alert_suite

from .conftest import REPO, named, suite_failures

ALERT_NAMES = {
    "GpuExecutionGpuMemoryHigh",
    "GpuExecutionGpuMemoryFillingUp",
    "GpuExecutionHostMemoryHigh",
    "GpuExecutionHostMemoryFillingUp",
    "GpuExecutionPowerThrottling",
    "GpuExecutionThermalThrottling",
    "GpuExecutionGpuUnderutilized",
    "GpuExecutionGpuStalled",
    "GpuExecutionTelemetryMissing",
    "GpuExecutionDcgmExporterDown",
    "GpuExecutionXidError",
    "GpuExecutionHostNameCollision",  # issue 24: two machines claim one host name
}

GOOD_RULE = {
    "alert": "GpuExecutionExample",
    "expr": f"{catalog.EXECUTION_GPU_UTILIZATION_AVG.name} < 0.1",
    "for": "5m",
    "labels": {"severity": "warning"},
    "annotations": {
        "summary": "Something is wrong with an execution.",
        "description": "Execution {{ $labels.execution_id }} is at {{ $value | humanizePercentage }}.",
        "runbook_url": "docs/runbook.md#gpuexecutionexample",
    },
}
ANCHORS = {"gpuexecutionexample"}


def committed_alerts() -> list[dict]:
    doc = yaml.safe_load((REPO / "rules/alerts.rules.yml").read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


# --- The lint ---------------------------------------------------------------------------------


def test_the_shipped_alerts_are_the_ones_the_issue_asks_for_and_follow_the_conventions():
    assert {r["alert"] for r in committed_alerts()} == ALERT_NAMES
    files = sorted((REPO / "rules").rglob("*.rules.yml"))
    assert alert_lint.lint(((p, p.read_text()) for p in files), (REPO / "docs/runbook.md").read_text()) == []


def test_the_alert_definitions_name_every_rule_in_order_with_its_configured_severity():
    # Routing reads names and severities from the definitions, without building the rules.
    cfg = config_from_mapping(
        {"alerts": {"telemetry_missing": {"severity": "critical"}, "gpu_stalled": {"severity": "info"}}}
    )
    rules = alerts.alert_rules(cfg)
    assert [r.alert for r in rules] == [a.name for a in alerts.ALERTS]
    assert [r.severity for r in rules] == [a.severity(cfg) for a in alerts.ALERTS]
    assert (alerts.TELEMETRY_MISSING.severity(cfg), alerts.GPU_STALLED.severity(cfg)) == ("critical", "info")


def test_the_alerts_marked_gpu_measurements_are_those_read_from_one_gpus_recorded_series():
    # TelemetryMissing (the absence itself) and XidError (a cause) read per-GPU series too, but silence
    # does not make them unreliable.
    per_gpu = {s.name for s in catalog.ALL_SERIES if s.labels == catalog.GPU_LABELS}
    reads_a_gpu = {r.alert for r in alerts.alert_rules(Config()) if r.tree.metric_names() & per_gpu}
    marked = {a.name for a in alerts.ALERTS if a.gpu_measurement}
    assert marked == reads_a_gpu - {alerts.TELEMETRY_MISSING.name, alerts.XID_ERRORS.name}


def test_the_stalled_alert_reads_recorded_utilisation_and_engine_activity_with_the_configured_keys():
    """The issue's condition (GPU_UTIL >= 80 % while the graphics engine is under 10 %, for 15m, a
    warning) on the recorded per-GPU series, its numbers those of alerts.gpu_stalled."""
    cfg = Config().alerts.gpu_stalled
    assert (cfg.util_threshold, cfg.engine_threshold, cfg.for_, cfg.severity) == (0.8, 0.1, "15m", "warning")
    [rule] = [r for r in committed_alerts() if r["alert"] == "GpuExecutionGpuStalled"]
    assert (rule["for"], rule["labels"]) == (cfg.for_, {"severity": cfg.severity})
    util, engine = catalog.GPU_UTILIZATION.name, catalog.GPU_GRAPHICS_ENGINE_ACTIVE.name
    assert rule["expr"].split() == [util, ">=", "0.8", "and", engine, "<", "0.1"]
    description = rule["annotations"]["description"]
    assert "{{ $labels.execution_id }}" in description and "{{ $labels.UUID }}" in description
    assert "for 15m" in description and "(threshold 10%)" in description


def test_a_well_formed_alert_passes_the_lint():
    assert alert_lint.lint_alert(GOOD_RULE, ANCHORS) == []


def broken(path: str, value: object = None) -> dict:
    """GOOD_RULE with the key at ``path`` (a.b) set to ``value``, or removed if value is None."""
    rule = copy.deepcopy(GOOD_RULE)
    *parents, key = path.split(".")
    node = rule
    for p in parents:
        node = node[p]
    if value is None:
        del node[key]
    else:
        node[key] = value
    return rule


@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        ("annotations.runbook_url", None, "annotations.runbook_url is missing"),
        ("annotations.summary", "Execution {{ $labels.execution_id }} is slow.", "annotations.summary is templated"),
        ("annotations.summary", "GPU at $value.", "annotations.summary is templated"),
        ("annotations.description", "Something is wrong.", "annotations.description is not templated"),
        ("annotations.description", None, "annotations.description is missing"),
        ("labels.severity", None, "labels.severity is None; accepted: critical, warning, info"),
        ("labels.severity", "page", "labels.severity is 'page'"),
        ("labels.value", "{{ $value }}", "labels.value is templated"),
        ("annotations.runbook_url", "docs/runbook.md#other", "must end with #gpuexecutionexample"),
        ("alert", "gpuExecutionLowercase", "name must be CamelCase and start with GpuExecution"),
        ("alert", "GpuExecution" + "VeryLong" * 4, "characters; keep it within 40"),
    ],
)
def test_the_lint_rejects_each_broken_convention(path: str, value: object, problem: str):
    problems = alert_lint.lint_alert(broken(path, value), ANCHORS)
    assert any(problem in p for p in problems), problems


def test_the_lint_rejects_a_runbook_url_to_a_missing_section():
    problems = alert_lint.lint_alert(GOOD_RULE, anchors=set())
    assert problems == ["annotations.runbook_url points at #gpuexecutionexample, which the runbook has no section for"]


def test_the_lint_rejects_a_group_over_20_rules():
    rules = [{**GOOD_RULE, "alert": f"GpuExecutionExample{i}"} for i in range(21)]
    text = yaml.safe_dump({"groups": [{"name": "big", "rules": rules}]})
    assert any("21 rules; keep a group within 20" in p for p in alert_lint.lint_rule_file("x.rules.yml", text, set()))


def test_make_check_fails_on_an_alert_with_a_templated_summary(tmp_path: Path, monkeypatch, capsys):
    original = AlertBuilder.xid_errors

    def templated(self):
        rule = original(self)
        return dataclasses.replace(rule, summary="Xid {{ $value }} on a GPU.")

    monkeypatch.setattr(AlertBuilder, "xid_errors", templated)
    config = tmp_path / "pack.yml"
    config.write_text(yaml.safe_dump({"alerts": {"runbook_url": "https://runbooks.example.org/gpu.md"}}))
    for command in ("generate", "dashboards", "docs"):
        assert cli.main([command, "--config", str(config)]) == 0
    assert cli.main(["check", "--config", str(config)]) == 1
    err = capsys.readouterr().err
    assert "GpuExecutionXidError: annotations.summary is templated" in err


# --- The runbook ------------------------------------------------------------------------------


def test_the_runbook_has_one_complete_section_per_alert():
    text = (REPO / "docs/runbook.md").read_text()
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    by_name = {s.splitlines()[0].strip(): s for s in sections}
    assert set(by_name) == ALERT_NAMES
    for name, body in by_name.items():
        for part in ("**Means**", "**Confirm**", "**Do**"):
            assert part in body, (name, part)
    for rule in committed_alerts():
        url = rule["annotations"]["runbook_url"]
        assert url == f"docs/runbook.md#{rule['alert'].lower()}"


def test_the_runbook_states_the_configured_thresholds():
    text = (REPO / "docs/runbook.md").read_text()
    assert "at least 95 % of a GPU's usable framebuffer for 2m" in text
    assert "averaged under 15 % utilisation for 30m" in text
    assert "for 15m a GPU of the execution has had kernels resident at least 80 %" in text
    assert "active less than 10 % of" in text and "alerts.gpu_stalled.engine_threshold" in text
    assert "{{" not in text and "{%" not in text


def test_the_stalled_runbook_says_how_to_confirm_a_hang_and_when_it_is_a_false_positive():
    text = (REPO / "docs/runbook.md").read_text()
    section = text.split("## GpuExecutionGpuStalled", 1)[1].split("\n## ", 1)[0]
    for needed in ("py-spy dump", "NCCL_DEBUG=INFO", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "dead", "timeout"):
        assert needed in section, needed
    # The false positive and its key; the field it needs, by every name the configured exporters use.
    assert "latency-bound" in section and "`alerts.gpu_stalled.engine_threshold`" in section
    for raw in catalog.SIGNALS["gr_engine_active"].raws_for(Config().dcgm.generations):
        assert raw.name in section
    assert "dcgmi profile --pause" in section and "dcgm-exporter 4.0" in section
    assert catalog.GPU_STALLED.name in section


# --- The promtool alert tests -----------------------------------------------------------------


@cache
def alert_tests() -> list[dict]:
    """The alert suite of the built-in defaults, as `gpu-execution-pack test` builds it."""
    return alert_suite(Config(), library.alert_suite())


def seconds(duration: str) -> int:
    return sum(int(n) * {"m": 60, "s": 1, "h": 3600}[u] for n, u in re.findall(r"(\d+)([hms])", duration))


def test_every_alert_is_tested_quiet_then_firing_then_quiet_again():
    """For each alert, some instance is absent before it fires, fires, and is absent again afterwards."""
    covered = set()
    for test in alert_tests():
        for name in ALERT_NAMES:
            checks = sorted((seconds(c["eval_time"]), c) for c in test["alert_rule_test"] if c["alertname"] == name)
            firing: dict[str, list[int]] = {}
            for t, c in checks:
                for a in c["exp_alerts"]:
                    firing.setdefault(repr(sorted(a["exp_labels"].items())), []).append(t)
            for key, times in firing.items():
                quiet = [
                    t for t, c in checks if all(repr(sorted(a["exp_labels"].items())) != key for a in c["exp_alerts"])
                ]
                if any(t < min(times) for t in quiet) and any(t > max(times) for t in quiet):
                    covered.add(name)
    assert covered == ALERT_NAMES


def test_firing_checks_pin_full_labels_and_rendered_annotations():
    count = 0
    for test in alert_tests():
        for check in test["alert_rule_test"]:
            for alert in check["exp_alerts"]:
                count += 1
                assert alert["exp_labels"]["severity"] in ("warning", "info")
                # The two alerts about exporters and host names are about a target or a name, not an execution.
                if check["alertname"] == "GpuExecutionHostNameCollision":
                    assert alert["exp_labels"]["hostname"]
                elif check["alertname"] != "GpuExecutionDcgmExporterDown":
                    assert alert["exp_labels"]["execution_id"]
                assert set(alert["exp_annotations"]) == {"summary", "description", "runbook_url"}
                assert "{{" not in alert["exp_annotations"]["description"]
    assert count > 50


def test_the_edge_cases_the_issue_lists_are_scenarios():
    names = {t["name"] for t in alert_tests()}
    assert {
        "GPU memory leak ending in a crash",
        "GPUs held but barely used",
        "host RAM filling up",
        "mig",
        "no power limit and no reasons: power throttling quiet",
        "no power limit: reasons bitmask decides",
        "a hung collective",
        "MIG with activity fields only",
        "hung without profiling fields",
        "FP32 on tensor-core GPUs",
    } <= names


def stalled_alerts(test: dict) -> list[tuple[int, dict]]:
    """(seconds, alert) of every GpuStalled the test expects to fire."""
    return [
        (seconds(c["eval_time"]), a)
        for c in test["alert_rule_test"]
        if c["alertname"] == "GpuExecutionGpuStalled"
        for a in c["exp_alerts"]
    ]


def test_the_stalled_alert_fires_for_the_hung_jobs_gpus_only():
    """hung-0024 hangs for 30 minutes beside tensor-0025: each of its GPUs fires once the hang has
    lasted alerts.gpu_stalled.for, naming its utilisation and engine activity; nothing else stalls."""
    scenario = library.hung_collective()
    hung = next(e for e in scenario.executions if e.id == "hung-0024")
    hang = hung.phases.index("hung")
    start, end = hung.phase_starts[hang] * 60, hung.phase_starts[hang + 1] * 60
    load = phases.PHASES["hung"].gpu
    utils = {g.uuid: (load.util_percent + hung.util_offset(g)) / 100 for g in hung.gpus}
    fired: dict[str, list[int]] = {}
    for test in alert_tests():
        for t, alert in stalled_alerts(test):
            labels = alert["exp_labels"]
            assert (test["name"], labels["execution_id"]) == (scenario.name, hung.id), alert
            fired.setdefault(labels["UUID"], []).append(t)
            description = alert["exp_annotations"]["description"]
            assert f"kernels resident {humanize_percentage(utils[labels['UUID']])} of the time for 15m" in description
            assert f"graphics engine active only {load.engine_active_percent:g}% (threshold 10%)" in description
            assert labels["severity"] == "warning"
    assert set(fired) == set(utils)
    for times in fired.values():
        assert start + seconds(Config().alerts.gpu_stalled.for_) <= min(times) and max(times) < end


def test_the_stalled_alert_is_checked_quiet_where_nothing_tells_a_stall():
    """MIG (utilisation is the engine activity), an exporter without profiling fields and an FP32 job
    (busy engines, idle tensor pipes): checked, never firing."""
    for name in (
        "mig",
        "MIG with activity fields only",
        "hung without profiling fields",
        "MIG-enabled H100s: no framebuffer fields",
        "FP32 on tensor-core GPUs",
    ):
        test = next(t for t in alert_tests() if t["name"] == name)
        checks = [c for c in test["alert_rule_test"] if c["alertname"] == "GpuExecutionGpuStalled"]
        assert len(checks) >= 3 and not stalled_alerts(test), name


def test_the_oom_alert_fires_before_the_crash():
    test = next(t for t in alert_tests() if t["name"] == "GPU memory leak ending in a crash")
    crash = 25 * 60  # loading 5m + leak 15m + oom 5m, then the series end
    for name in ("GpuExecutionGpuMemoryHigh", "GpuExecutionGpuMemoryFillingUp"):
        fired = [
            seconds(c["eval_time"])
            for c in test["alert_rule_test"]
            if c["alertname"] == name and any(a["exp_labels"]["execution_id"] == "leak-0006" for a in c["exp_alerts"])
        ]
        assert fired and min(fired) < crash, name
        # The healthy job beside it on the same host is never named.
        assert not any(
            a["exp_labels"]["execution_id"] == "steady-0007" for c in test["alert_rule_test"] for a in c["exp_alerts"]
        )


def test_the_waste_alert_says_whether_the_cpu_is_saturated():
    test = next(t for t in alert_tests() if t["name"] == "GPUs held but barely used")
    descriptions = {
        a["exp_labels"]["execution_id"]: a["exp_annotations"]["description"]
        for c in test["alert_rule_test"]
        if c["alertname"] == "GpuExecutionGpuUnderutilized"
        for a in c["exp_alerts"]
    }
    assert set(descriptions) == {"stall-0016", "cpubound-0017"}  # not warmup-0018, which only idled while loading
    assert "Its host CPU is not saturated (37.5%)" in descriptions["stall-0016"]
    assert "Its host CPU is saturated (100%)" in descriptions["cpubound-0017"]


def _run_alert_suite(tmp_path: Path, execution: str) -> str:
    """The alert suite's failures on the scenario holding ``execution``, the one the mutation breaks."""
    out = suite_failures(
        testsuites.default_variants()[:1], tmp_path, only="default-alerts", executions=frozenset({execution})
    )
    assert out, "the suite passed on broken alerts"
    return out


@pytest.mark.single_version
@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_predicting_exhaustion_without_the_level_guard_fails_the_tests(tmp_path: Path, monkeypatch):
    original = AlertBuilder.predicted_exhaustion

    def unguarded(self, a, ratio, used, total, words):
        expr, clause = original(self, a, ratio, used, total, words)
        level = ratio.select()
        return transform(
            expr, lambda n: level if isinstance(n, Call) and n.function == "min_over_time" else None
        ), clause

    monkeypatch.setattr(AlertBuilder, "predicted_exhaustion", unguarded)
    out = _run_alert_suite(tmp_path, "train-0002")
    # A fresh job's step from loading to its working set now reads as a leak.
    assert "alertname: GpuExecutionGpuMemoryFillingUp" in out and re.search(named('execution_id="', "train-0002"), out)


@pytest.mark.single_version
@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_alerting_on_the_sticky_xid_gauge_fails_the_tests(tmp_path: Path, monkeypatch):
    original = AlertBuilder.xid_errors

    def sticky(self):
        rule = original(self)
        return dataclasses.replace(rule, tree=catalog.GPU_LAST_XID.select().gt(0))

    monkeypatch.setattr(AlertBuilder, "xid_errors", sticky)
    out = _run_alert_suite(tmp_path, "xid-0021")
    assert "alertname: GpuExecutionXidError" in out and re.search(
        named('UUID="GPU-', "h16-0001"), out
    )  # the Xid from before the job


@pytest.mark.single_version
@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_power_at_the_limit_without_clock_confirmation_fails_the_tests(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(alerts, "POWER_REASON_BITS", {})  # also drops the reasons-only fallback
    out = _run_alert_suite(tmp_path, "nolimit-0013")
    assert "alertname: GpuExecutionPowerThrottling" in out and "nolimit-0013" in out


@pytest.mark.single_version
@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_a_gpu_reporting_without_framebuffer_fields_is_not_missing(tmp_path: Path, monkeypatch):
    # MIG-enabled H100s publish no DCGM_FI_DEV_FB_* (see catalog.PRESENCE_SIGNALS): read as the only sign
    # of a reporting GPU, the framebuffer use would call h100mig1's GPUs missing for as long as they run.
    def framebuffer_only(self):
        raws = [r.name for r in catalog.SIGNALS["fb_used"].raws_for(self.cfg.dcgm.generations)]
        return aggregate("group", (catalog.UUID_LABEL,), any_of([selector(name) for name in raws], stacked=False))

    monkeypatch.setattr(AlertBuilder, "reporting", framebuffer_only)
    out = _run_alert_suite(tmp_path, "h100mig1-job")
    assert "alertname: GpuExecutionTelemetryMissing" in out and re.search(named('execution_id="', "h100mig1-job"), out)


@pytest.mark.single_version
@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_a_stall_told_without_engine_activity_fails_the_tests(tmp_path: Path, monkeypatch):
    # "Utilisation high unless the engines are busy" reads a GPU without engine activity (an exporter
    # before 4.0, a profiling lock) as stalled: locked-0033 would page while it computes.
    def unless_busy(self):
        a = self.a.gpu_stalled
        busy = catalog.GPU_GRAPHICS_ENGINE_ACTIVE.select().ge(a.engine_threshold)
        return catalog.GPU_UTILIZATION.select().ge(a.util_threshold).unless(busy)

    monkeypatch.setattr(AlertBuilder, "stalled_condition", unless_busy)
    out = _run_alert_suite(tmp_path, "locked-0033")
    assert "alertname: GpuExecutionGpuStalled" in out and re.search(named('execution_id="', "locked-0033"), out)


@pytest.mark.single_version
@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_a_stall_read_from_the_tensor_pipes_fails_the_tests(tmp_path: Path, monkeypatch):
    # Idle tensor pipes are FP32 work, not a stall: fp32-0026 keeps its engines at 88 %.
    def tensor_idle(self):
        a = self.a.gpu_stalled
        idle = catalog.GPU_TENSOR_ACTIVE.select().lt(a.engine_threshold)
        return all_of([catalog.GPU_UTILIZATION.select().ge(a.util_threshold), idle])

    monkeypatch.setattr(AlertBuilder, "stalled_condition", tensor_idle)
    out = _run_alert_suite(tmp_path, "fp32-0026")
    assert "alertname: GpuExecutionGpuStalled" in out and re.search(named('execution_id="', "fp32-0026"), out)


# --- The oracle's ports of Prometheus functions ----------------------------------------------


def test_predict_linear_port_matches_a_hand_computed_fit():
    # 1 unit per second over two minutes; predicted 60 s ahead of minute 2: 180.
    samples = [(0.0, 0.0), (1.0, 60.0), (2.0, 120.0)]
    assert predict_linear(samples, 2.0, 60) == 180.0
    assert predict_linear(samples[:1], 0.0, 60) is None  # Prometheus needs two samples


def test_humanize_ports_print_like_prometheus():
    assert humanize(1_410_000_000) == "1.41G"
    assert humanize(88) == "88"
    assert humanize(0.5) == "500m"
    assert humanize_percentage(699.5 / 700) == "99.93%"
    assert humanize_percentage(0.375) == "37.5%"
    assert go_value(79.0) == "79"
    assert go_value(0.25) == "0.25"
    with pytest.raises(ValueError):
        go_value(2e6)


def test_the_runbooks_queries_stay_within_the_alerts_cluster_where_one_store_holds_several():
    """With ``cluster_label`` set, every query the runbook gives for an execution, GPU or host also
    matches the cluster; without it, none names one (the defaults' runbook is unchanged)."""
    for cluster_label in ("cluster", "k8s_cluster"):
        text = runbook.render(config_from_mapping({"cluster_label": cluster_label}, "test"))
        queries = re.findall(r"\{[^{}`]*=\"…\"[^{}`]*\}", text)
        assert len(queries) >= 15, queries
        for query in queries:
            assert f'{cluster_label}="…"' in query, query
    defaults = runbook.render(Config())
    assert defaults == (REPO / "docs/runbook.md").read_text()
    assert 'cluster="…"' not in defaults
