"""The execution report against a real Prometheus holding one execution per verdict, checked against the oracle.

The scenario library's report suite is backfilled (raw series, every recording rule, and the
ALERTS series the alert oracle says fire); the report is read through the library, the CLI and
the HTTP endpoint, and its verdicts, energy and GPU-hours compared with ``report_oracle`` (beside this file).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from urllib.parse import quote

import httpx
import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.api.app import FLEET_PATH, SUMMARY_PATH, create_app
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.promql import call, format_duration, match, render
from gpu_execution_pack.query.params import iso
from gpu_execution_pack.query.prometheus import PrometheusClient
from gpu_execution_pack.report import document
from gpu_execution_pack.report import figures as fig
from gpu_execution_pack.report.figures import REQUIRED_GPU_SERIES, ExecutionFigures, GpuFigures, HostFigures
from gpu_execution_pack.report.verdicts import CODES, judge
from gpu_execution_pack.scenario import model, oracle
from gpu_execution_pack.scenario.model import STEP_SECONDS
from gpu_execution_pack.scenario.phases import PHASES
from starlette.testclient import TestClient

from harness.prometheus import Prometheus

from . import report_oracle
from .conftest import REPO
from .test_api import ESCAPED_IDS, INJECTION_IDS, closed_port

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("promtool_available")]

# The backfill evaluates every rule every 15 s: the config says so, so samples count as 15 s each.
CONFIG = report_oracle.CONFIG
SCENARIO = report_oracle.report_suite()
ADMIN, RESEARCH, OTHER = "admin-key-0123456789", "research-key-0123456789", "other-tenant-key-012345"
KEYS = {ADMIN: "*", RESEARCH: "research", OTHER: "physics"}
# Backfilled recorded series start up to two steps after the raw ones (one per rule level in the
# rounds of the backfill), per GPU at either end of the span.
LAG_STEPS = 2
ENERGY_TOLERANCE = 0.02
ACTIVITY_TOLERANCE = 0.02
PEAK_WATTS = max(p.gpu.power_watts for p in PHASES.values())
# Backfilled series carry no stale markers: an execution's series read on for Prometheus' 5-minute lookback
# after it ends, and it counts among a shared GPU's holders meanwhile (report_oracle.Shares): twice that,
# since the share is recorded from the recorded utilisation, which read the raw series on already. Each
# level reads on a step less than the lookback: the backfill evaluates a little after each raw sample
# (promtool's group offset), so the sample a lookback after the last is past it.
READS_ON_MINUTES = 2 * (5 - STEP_SECONDS / 60)


@pytest.fixture(scope="module")
def loaded(report_suite_prometheus):
    """The report suite backfilled (conftest.report_suite_prometheus): (server, cfg, start)."""
    return report_suite_prometheus


def last_sample(start: int, execution_id: str) -> str:
    """Just before the scrape after the execution's last one. The report is asked up to then: backfilled series
    carry no stale markers, so they read on for Prometheus' 5-minute lookback, which a live Prometheus ends at once."""
    return iso(last_sample_at(start, execution_id))


def last_sample_at(start: int, execution_id: str) -> float:
    """``last_sample`` in seconds."""
    execution = next(e for e in SCENARIO.executions if e.id == execution_id)
    scraped = [
        m
        for m in model.grid(execution.start_minute, execution.end_minute - STEP_SECONDS / 60)
        if any(SCENARIO.host(g.host).dcgm_outage is None or not _down(SCENARIO.host(g.host), m) for g in execution.gpus)
    ]
    # A rule evaluated before the next scrape still reads the last one: its sample belongs to the span.
    return start + scraped[-1] * 60 + STEP_SECONDS - 1


def _down(host, minute: float) -> bool:
    return host.dcgm_outage[0] <= minute < host.dcgm_outage[1]


def summary_of(server: Prometheus, cfg, execution_id: str, start: int, tenant: str | None = None) -> dict:
    async def run() -> dict:
        client = PrometheusClient(server.url, 30)
        try:
            end = last_sample(start, execution_id)
            return await document.execution_summary(cfg, client, execution_id, end=end, tenant=tenant)
        finally:
            await client.close()

    return asyncio.run(run())


EXECUTIONS = [e for e in SCENARIO.executions]


@pytest.mark.parametrize("execution", EXECUTIONS, ids=[e.id for e in EXECUTIONS])
def test_verdicts_energy_and_gpu_hours_match_the_oracle(loaded, execution):
    server, cfg, start = loaded
    want = report_oracle.report(SCENARIO, cfg, execution, reads_on=READS_ON_MINUTES)
    got = summary_of(server, cfg, execution.id, start)

    assert tuple(v["code"] for v in got["verdicts"]) == want.codes, json.dumps(got["verdicts"], indent=1)
    activity = {k: v for k, v in got["utilization"].items() if k in report_oracle.ACTIVITY}
    assert activity.keys() == want.activity_percent.keys()  # an absent series leaves its figure out
    for key, value in want.activity_percent.items():
        assert activity[key] == pytest.approx(value, rel=ACTIVITY_TOLERANCE, abs=0.01), key
    assert got["gpus"]["count"] == len(execution.gpus)
    assert {h["hostname"] for h in got["hosts"]} == {g.host for g in execution.gpus}
    if resumed_after_outage(execution):
        # Backfilled series read on through an outage for the 5-minute lookback (a live Prometheus marks
        # them stale at once): the figures cannot be compared sample for sample; the verdicts were.
        return
    lag_hours = len(execution.gpus) * LAG_STEPS * STEP_SECONDS / 3600 + 1e-4  # the document rounds to 4 digits
    assert got["cost"]["gpuHoursBilled"] == pytest.approx(want.gpu_hours_billed, abs=lag_hours)
    assert got["cost"]["gpuHoursBilled"] <= want.gpu_hours_billed + 1e-4  # never more than held; 4-digit rounding
    assert got["cost"]["gpuHoursWorked"] == pytest.approx(want.gpu_hours_worked, abs=lag_hours)
    # Within 2 %, beside the samples the backfill's rule levels cost at the ends, at the highest power.
    devices = len({g.device_key for g in execution.gpus})
    edge_kwh = devices * LAG_STEPS * STEP_SECONDS * PEAK_WATTS / 3_600_000
    assert got["power"]["energyKwh"] == pytest.approx(want.energy_kwh, rel=ENERGY_TOLERANCE, abs=edge_kwh)
    lag_s = LAG_STEPS * STEP_SECONDS
    assert got["power"]["powerThrottledSeconds"] == pytest.approx(want.power_throttled_seconds, abs=lag_s)
    assert got["power"]["thermalThrottledSeconds"] == pytest.approx(want.thermal_throttled_seconds, abs=lag_s)


def resumed_after_outage(execution) -> bool:
    """Whether a host of the execution's exporter was down for a while and answered again before it ended."""
    outages = [SCENARIO.host(g.host).dcgm_outage for g in execution.gpus]
    return any(o and execution.start_minute < o[1] < execution.end_minute for o in outages)


def test_energy_says_which_source_it_used(loaded):
    """dcgm-exporter 4.8 publishes the energy counter; the MIG host runs 4.9, where power is integrated."""
    server, cfg, start = loaded
    assert summary_of(server, cfg, "train-0001", start)["power"]["energySource"] == "energy_counter"
    mig = summary_of(server, cfg, "mig-0003", start)
    assert mig["power"]["energySource"] == "power_integral"
    # Two MIG instances of one A100: its energy counts once, as one GPU's.
    assert mig["gpus"]["migProfiles"] == ["3g.40gb"] and mig["gpus"]["count"] == 2


def test_alerts_that_fired_are_listed_with_their_time(loaded):
    server, cfg, start = loaded
    got = summary_of(server, cfg, "leak-0006", start)
    names = {a["alertname"] for a in got["alerts"]}
    assert "GpuExecutionGpuMemoryHigh" in names and "GpuExecutionGpuMemoryFillingUp" in names
    fired = {
        labels["alertname"]
        for labels, _ in report_oracle.alert_series(SCENARIO, cfg)
        if labels.get("execution_id") == "leak-0006"
    }
    assert names == fired
    assert all(a["firingSeconds"] > 0 for a in got["alerts"])


def test_heavy_phase_leaves_out_the_loading_phase(loaded):
    server, cfg, start = loaded
    got = summary_of(server, cfg, "warmup-0018", start)  # 5 minutes of loading at 4 %, then 40 of compute at 97 %
    heavy = got["utilization"]["heavyPhase"]
    assert heavy["gpuMeanPercent"] == pytest.approx(97, abs=0.5)
    assert got["utilization"]["gpuMeanPercent"] < heavy["gpuMeanPercent"]
    assert heavy["seconds"] == pytest.approx(40 * 60, abs=LAG_STEPS * STEP_SECONDS + STEP_SECONDS)


def test_fleet_ranks_by_gpu_hours_wasted_with_verdict_codes(loaded):
    server, cfg, _start = loaded

    async def run() -> dict:
        client = PrometheusClient(server.url, 30)
        try:
            return await document.fleet_summary(cfg, client, "1d", 5)
        finally:
            await client.close()

    fleet = asyncio.run(run())
    rows = fleet["top"]
    assert len(rows) == 5 and fleet["executions"] == len(SCENARIO.executions)
    wasted = [r["gpuHoursWasted"] for r in rows]
    assert wasted == sorted(wasted, reverse=True)
    # The most wasteful: the two stalled GPUs of stall-0016 for 40 minutes lose more than any other.
    expected = {e.id: report_oracle.report(SCENARIO, cfg, e) for e in SCENARIO.executions}
    oracle_top = max(expected.values(), key=lambda x: x.gpu_hours_billed - x.gpu_hours_worked)
    assert rows[0]["executionId"] == oracle_top.execution_id
    assert all(set(r["verdicts"]) <= set(CODES) for r in rows)


def test_the_fleet_views_top_rows_are_those_of_the_whole_ranking(loaded):
    """The view ranks every execution on a few queries and reads figures for its top rows only: its GPU-hours
    are the figures' own (each execution's, a shared GPU in its share) and its rows those of the whole ranking."""
    server, cfg, _start = loaded
    at = time.time()

    async def run() -> tuple[dict, dict, dict]:
        client = PrometheusClient(server.url, 30)
        try:
            whole = await document.fleet_summary(cfg, client, "1d", len(SCENARIO.executions), at=at)
            head = await document.fleet_summary(cfg, client, "1d", 3, at=at)
            figures = await fig.collect(cfg, client, fig.Scope(cfg, None, None), 86400, at)
            deployed = await fig.intervals(cfg, client)
            ranked = await fig.waste_by_execution(cfg, client, fig.Scope(cfg, None, None), 86400, at, deployed.gpu)
            return whole, head, figures, ranked
        finally:
            await client.close()

    whole, head, figures, ranked = asyncio.run(run())
    assert {r["executionId"] for r in whole["top"]} == {e.id for e in SCENARIO.executions}
    for row in whole["top"]:
        f = figures[("", row["executionId"])]
        billed, worked = f.billed_seconds / 3600, f.worked_seconds / 3600
        assert (row["gpuHoursBilled"], row["gpuHoursWorked"]) == pytest.approx((billed, worked), abs=1e-4)
        # Read for the named top rows, the rest of the row is what reading every execution gives.
        assert row["verdicts"] == [v.code for v in judge(f, cfg, running=f.reporting_at_end, span_seconds=None)]
        assert row["energyKwh"] == pytest.approx(document.energy(f)[0] / document.JOULES_PER_KWH, abs=1e-4)
    assert any(g.shared for f in figures.values() for g in f.gpus)  # the split is among what is compared
    assert head["top"] == whole["top"][:3]
    assert (head["executions"], head["gpuHoursBilled"], head["gpuHoursWasted"]) == (
        whole["executions"],
        whole["gpuHoursBilled"],
        whole["gpuHoursWasted"],
    )
    billed = sum(w.billed_seconds for w in ranked) / 3600
    assert (whole["gpuHoursBilled"], whole["gpuHoursWasted"]) == pytest.approx(
        (billed, billed - sum(w.worked_seconds for w in ranked) / 3600), abs=1e-4
    )
    # The ranking counts each execution's time as its figures do: the seconds of its utilisation samples. A shared
    # GPU's share and worked series (recorded from the utilisation, so backfilled, without stale markers, they read
    # on a lookback past it: READS_ON_MINUTES) have samples past the utilisation's, which the figures count in full
    # and the ranking, weighing their means by the utilisation's seconds, not: up to a lookback each, never more.
    for w in ranked:
        f = figures[w.key]
        past = sum(300 for g in f.gpus if g.shared)
        assert -1e-6 <= f.billed_seconds - w.billed_seconds <= past + 1e-6, w.execution_id
        assert -1e-6 <= f.worked_seconds - w.worked_seconds <= past + 1e-6, w.execution_id
        assert past or (w.billed_seconds, w.worked_seconds) == pytest.approx((f.billed_seconds, f.worked_seconds)), w


def test_the_fleet_view_does_not_call_a_running_execution_at_full_memory_a_crash(loaded):
    """leak-0006 ends at full GPU memory: a crash, once it has ended; while it still runs, not yet one."""
    server, cfg, start = loaded
    leak = next(e for e in SCENARIO.executions if e.id == "leak-0006")
    full = start + (leak.end_minute - 3) * 60  # in its last phase, above the OOM threshold, still reporting
    assert "gpu_oom" in report_oracle.report(SCENARIO, cfg, leak).codes

    async def codes(at: float | None) -> list[str]:
        client = PrometheusClient(server.url, 30)
        try:
            fleet = await document.fleet_summary(cfg, client, "1d", len(SCENARIO.executions), at=at)
        finally:
            await client.close()
        return next(r["verdicts"] for r in fleet["top"] if r["executionId"] == leak.id)

    assert "gpu_oom" not in asyncio.run(codes(full))
    assert "gpu_oom" in asyncio.run(codes(None))  # now: it ended 15 minutes ago and more


def client_for(server: Prometheus) -> TestClient:
    """The app, with CONFIG and KEYS, serving the report endpoints from ``server``."""
    return TestClient(create_app(config_from_mapping({**CONFIG, "api": {"prometheus_url": server.url}}), KEYS))


def test_the_endpoint_serves_the_same_document_with_the_metrics_endpoints_auth_and_tenants(loaded):
    server, cfg, start = loaded
    with client_for(server) as client:
        path = SUMMARY_PATH.format(execution_id="train-0001") + "?end=" + last_sample(start, "train-0001")
        assert client.get(path).status_code == 401
        assert client.get(path, headers={"Authorization": "Bearer nope"}).status_code == 401
        research = client.get(path, headers={"Authorization": f"Bearer {RESEARCH}"})
        assert research.status_code == 200, research.text
        assert research.json()["verdicts"] == summary_of(server, cfg, "train-0001", start)["verdicts"]
        other = client.get(path, headers={"Authorization": f"Bearer {OTHER}"})
        assert other.status_code == 404 and other.headers["content-type"].startswith("application/json")
        fleet = client.get(FLEET_PATH, params={"since": "1d", "top": "3"}, headers={"Authorization": f"Bearer {OTHER}"})
        assert fleet.status_code == 200 and fleet.json()["executions"] == 0  # no physics executions
        for params, name in (({"since": "forever"}, "since"), ({"top": "0"}, "top"), ({"top": "x"}, "top")):
            r = client.get(FLEET_PATH, params=params, headers={"Authorization": f"Bearer {ADMIN}"})
            assert r.status_code == 400 and r.json()["error"].startswith(name), r.text
        assert SUMMARY_PATH in client.get("/openapi.json").json()["paths"]


def test_the_cli_prints_a_jobstats_style_report_and_the_json_document(loaded, tmp_path):
    server, _cfg, _start = loaded
    config = tmp_path / "pack.yml"
    config.write_text(json.dumps({**CONFIG, "api": {"prometheus_url": server.url}}))
    cli = [sys.executable, "-m", "gpu_execution_pack", "report", "--config", str(config)]
    text = subprocess.run([*cli, "cpubound-0017"], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert "GPU execution report: cpubound-0017" in text
    assert "[gpu_underutilized_input_bound]" in text
    as_json = json.loads(
        subprocess.run([*cli, "cpubound-0017", "--json"], capture_output=True, text=True, cwd=REPO, check=True).stdout
    )
    assert [v["code"] for v in as_json["verdicts"]] == ["gpu_underutilized_input_bound"]
    fleet = subprocess.run(
        [*cli, "--since", "1d", "--top", "3"], capture_output=True, text=True, cwd=REPO, check=True
    ).stdout
    assert "GPU-hours billed" in fleet and len(fleet.strip().splitlines()) == 3 + 3
    neither = subprocess.run(cli, capture_output=True, text=True, cwd=REPO)
    assert neither.returncode == 2 and "give an EXECUTION_ID, or --since" in neither.stderr
    missing = subprocess.run([*cli, "nope-0000"], capture_output=True, text=True, cwd=REPO)
    assert missing.returncode == 2 and "not found" in missing.stderr and "Traceback" not in missing.stderr


@pytest.mark.single_version  # our import of the archive's store, whichever Prometheus answers
def test_without_the_archive_extra_an_executions_report_and_summary_come_from_prometheus(loaded, tmp_path):
    """The api extra is what report and serve need (README, the ops-repo example): without the archive extra's
    SQLAlchemy an execution's report exited with a ModuleNotFoundError traceback, and its summary route was a 500,
    while the fleet view and the metrics route answered."""
    server, _cfg, _start = loaded
    config = tmp_path / "pack.yml"
    config.write_text(json.dumps({**CONFIG, "api": {"prometheus_url": server.url}}))
    code = (
        "import sys; sys.modules['sqlalchemy'] = None; from gpu_execution_pack import cli; "
        f"sys.exit(cli.main(['report', 'cpubound-0017', '--json', '--config', {str(config)!r}]))"
    )
    report = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr
    assert json.loads(report.stdout)["source"] == "prometheus"
    code = (
        "import sys, json; sys.modules['sqlalchemy'] = None\n"
        "from starlette.testclient import TestClient\n"
        "from gpu_execution_pack.api.app import SUMMARY_PATH, create_app\n"
        "from gpu_execution_pack.config import load_config\n"
        f"cfg = load_config({str(config)!r})\n"
        "with TestClient(create_app(cfg, {'k-0123456789abcdef': '*'})) as client:\n"
        "    r = client.get(SUMMARY_PATH.format(execution_id='cpubound-0017'),"
        " headers={'Authorization': 'Bearer k-0123456789abcdef'})\n"
        "print(r.status_code, r.json().get('source'))\n"
    )
    summary = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert summary.stdout.split() == ["200", "prometheus"], summary.stdout + summary.stderr


def test_every_verdict_is_documented_with_its_rule():
    text = (REPO / "docs" / "report.md").read_text()
    for code in CODES:
        assert f"| `{code}` |" in text, code


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("energy_price_per_kwh", -0.1, "report.energy_price_per_kwh: -0.1 is not accepted; expected 0 (off)"),
        ("grams_co2e_per_kwh", "a lot", "report.grams_co2e_per_kwh: expected a number"),
        ("heavy_phase_memory_share", 0, "report.heavy_phase_memory_share: 0.0 is not accepted"),
    ],
)
def test_report_keys_refuse_bad_values_naming_the_key(key, value, message):
    from gpu_execution_pack.config import ConfigError

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config_from_mapping({"report": {key: value}})


def test_energy_cost_and_emissions_appear_only_when_configured(loaded):
    server, _, start = loaded
    priced = config_from_mapping({**CONFIG, "report": {"energy_price_per_kwh": 0.25, "grams_co2e_per_kwh": 400}})
    got = summary_of(server, priced, "train-0001", start)
    kwh = got["power"]["energyKwh"]
    assert got["cost"]["energyCost"] == pytest.approx(kwh * 0.25, abs=0.01)
    assert got["cost"]["co2eKg"] == pytest.approx(kwh * 0.4, abs=0.001)
    plain = summary_of(server, config_from_mapping(CONFIG), "train-0001", start)
    assert "energyCost" not in plain["cost"] and "co2eKg" not in plain["cost"]


def admin_get(client: TestClient, execution_id: str, **params) -> httpx.Response:
    path = SUMMARY_PATH.format(execution_id=quote(execution_id, safe=""))
    return client.get(path, params=params, headers={"Authorization": f"Bearer {ADMIN}"})


@pytest.mark.parametrize("execution_id", INJECTION_IDS)
def test_summary_refuses_the_metrics_endpoints_injection_attempts(loaded, execution_id):
    server, _, _ = loaded
    with client_for(server) as client:
        response = admin_get(client, execution_id)
    assert response.status_code in (400, 404) and "error" in response.json()
    assert "verdicts" not in response.text


@pytest.mark.parametrize("execution_id", ESCAPED_IDS)
def test_summary_escaping_keeps_the_query_meaning_with_a_permissive_pattern(loaded, execution_id):
    server, _, _ = loaded
    cfg = config_from_mapping(
        {**CONFIG, "api": {"prometheus_url": server.url, "execution_id_pattern": "(?s)^.{1,200}$"}}
    )
    with TestClient(create_app(cfg, KEYS)) as client:
        response = admin_get(client, execution_id)
    assert response.status_code == 404, response.text  # never another execution's report


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"start": "yesterday"}, "start: 'yesterday' is not an ISO 8601 time"),
        ({"end": "2026-13-40"}, "end: '2026-13-40' is not an ISO 8601 time"),
        ({"start": "2026-12-02T10:00:00Z", "end": "2026-12-02T09:00:00Z"}, "end: before start"),
        ({"start": "2020-01-01T00:00:00Z", "end": "2020-01-02T00:00:00Z"}, "start..end: the execution has no samples"),
    ],
)
def test_summary_bad_parameters_are_400_naming_the_parameter(loaded, params, message):
    server, _, _ = loaded
    with client_for(server) as client:
        response = admin_get(client, "train-0001", **params)
    assert response.status_code == 400
    assert response.json()["error"].startswith(message), response.json()


def test_a_window_inside_the_run_between_two_samples_is_a_400_not_a_404(loaded):
    """The execution exists: a window that holds none of its samples (an instant between two) said "not found"."""
    server, _, start = loaded
    between = iso(last_sample_at(start, "train-0001") - STEP_SECONDS / 2)
    with client_for(server) as client:
        response = admin_get(client, "train-0001", start=between, end=between)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("start..end: the execution has no samples between them"), response.text


def test_summary_with_prometheus_down_is_a_json_502():
    cfg = config_from_mapping({**CONFIG, "api": {"prometheus_url": f"http://127.0.0.1:{closed_port()}"}})
    with TestClient(create_app(cfg, KEYS)) as client:
        response = admin_get(client, "train-0001")
        fleet = client.get(FLEET_PATH, headers={"Authorization": f"Bearer {ADMIN}"})
    assert response.status_code == fleet.status_code == 502
    assert "unreachable" in response.json()["error"] and "unreachable" in fleet.json()["error"]


def figures_with_samples(samples: int) -> ExecutionFigures:
    """One healthy GPU's figures (every series present, busy, cool) with ``samples`` 15 s samples in a row."""
    gpu = GpuFigures(
        {"execution_id": "x", "hostname": "h", "gpu": "0", "UUID": "GPU-x", "modelName": "m"},
        samples=samples,
        held_seconds=samples * 15.0,
        covered_seconds=(samples - 1) * 15.0,
        util_mean=0.9,
        worked_seconds=0.9 * samples * 15.0,
        mem_peak_ratio=0.5,
        mem_last_ratio=0.5,
        present={s.name for s in REQUIRED_GPU_SERIES},
    )
    return ExecutionFigures("x", 15.0, 15.0, gpus=[gpu], hosts=[HostFigures("h", cpu_mean=0.3, ram_peak_ratio=0.2)])


@pytest.mark.parametrize(
    ("samples", "codes"), [(240, ["healthy"]), (238, ["healthy"]), (220, ["telemetry_incomplete"])]
)
def test_a_gap_is_samples_missing_for_prometheus_lookback_not_a_missed_evaluation(samples, codes):
    """240 samples span an hour at 15 s: 2 missing is a missed rule evaluation, 20 (5 minutes) a gap."""
    cfg = config_from_mapping(CONFIG)
    verdicts = judge(figures_with_samples(samples), cfg, running=False, span_seconds=239 * 15.0)
    assert [v.code for v in verdicts] == codes


# --- Work truth: activity, stalled GPUs, tensor cores, shared GPUs -----------------------------------


def execution_named(execution_id: str):
    return next(e for e in SCENARIO.executions if e.id == execution_id)


def verdict(doc: dict, code: str) -> dict:
    return next(v for v in doc["verdicts"] if v["code"] == code)


def test_a_stalled_gpu_is_named_with_its_time_and_how_to_confirm(loaded):
    server, cfg, start = loaded
    got = verdict(summary_of(server, cfg, "hung-0024", start), "gpu_stalled")
    assert got["severity"] == cfg.alerts.gpu_stalled.severity
    assert "GPU 0 on h19" in got["summary"] and "GPU 1 on h19" in got["summary"]
    assert "for up to 30 min" in got["summary"]  # the hung phase, recorded from its first sample
    assert "py-spy dump" in got["advice"] and "NCCL_DEBUG=INFO" in got["advice"]
    # Its neighbour on the tensor cores, on the same host, is told nothing.
    assert [v["code"] for v in summary_of(server, cfg, "tensor-0025", start)["verdicts"]] == ["healthy"]


def test_activity_figures_per_gpu_and_only_where_published(loaded):
    server, cfg, start = loaded
    fp32 = summary_of(server, cfg, "fp32-0026", start)["gpus"]["devices"][0]
    # Its tensor pipes only worked a little while loading.
    assert fp32["tensorActivePercent"] < cfg.report.tensor_active_threshold * 100
    assert fp32["graphicsEngineActivePercent"] > cfg.report.tensor_engine_busy * 100
    assert "tensor_cores_unused" in [v["code"] for v in summary_of(server, cfg, "fp32-0026", start)["verdicts"]]
    blind = summary_of(server, cfg, "blind-0033", start)
    device = blind["gpus"]["devices"][0]
    assert "graphicsEngineActivePercent" not in device and "tensorActivePercent" in device
    # A field the GPU never publishes is no gap: an info note, and healthy all the same.
    assert [v["code"] for v in blind["verdicts"]] == ["not_judged", "healthy"]
    note = verdict(blind, "not_judged")
    assert note["severity"] == "info"
    assert "gpuGraphicsEngineActivePercent" in note["summary"] and "stalled cannot be told" in note["summary"]
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in note["advice"]
    # Ten minutes at high utilisation are too short for a stall: nothing to note.
    short = summary_of(server, cfg, "blindshort-0034", start)
    assert "not_judged" not in [v["code"] for v in short["verdicts"]]


@pytest.mark.parametrize("execution_id", ["noprof-0044", "nodcp-0045"])
def test_a_fleet_without_profiling_fields_is_healthy_with_a_note_not_incomplete(loaded, execution_id):
    """dcgm-exporter 3.x default counters, and GPUs without DCP: every busy job used to be telemetry_incomplete
    (a warning) and never healthy."""
    server, cfg, start = loaded
    got = summary_of(server, cfg, execution_id, start)
    assert [(v["code"], v["severity"]) for v in got["verdicts"]] == [("not_judged", "info"), ("healthy", "info")]


def test_a_shared_gpu_names_the_other_executions_within_the_tenant(loaded):
    server, cfg, start = loaded
    mps = verdict(summary_of(server, cfg, "mps-0031", start), "gpu_shared")["summary"]
    assert "GPU 0 on h22 with mps-0032" in mps and "GPU 1 on h22" not in mps and "1/N" in mps
    admin = verdict(summary_of(server, cfg, "slice-0029", start), "gpu_shared")["summary"]
    assert "slice-0030" in admin
    # slice-0030 is team-b's: team-a's report says the GPU was shared, not with whom.
    team_a = verdict(summary_of(server, cfg, "slice-0029", start, tenant="team-a"), "gpu_shared")["summary"]
    assert "slice-0030" not in team_a and "outside this report's tenant" in team_a


def test_a_time_sliced_pair_is_each_billed_half_the_gpu(loaded):
    server, cfg, start = loaded
    pair = [execution_named("slice-0029"), execution_named("slice-0030")]
    hours, kwh = report_oracle.gpu_totals(SCENARIO, pair[0].gpus[0])
    lag_hours = LAG_STEPS * STEP_SECONDS / 3600 + 1e-4
    edge_kwh = LAG_STEPS * STEP_SECONDS * PEAK_WATTS / 3_600_000
    for execution in pair:
        got = summary_of(server, cfg, execution.id, start)
        assert got["cost"]["gpuHoursBilled"] == pytest.approx(hours / 2, abs=lag_hours)
        assert got["gpus"]["devices"][0]["gpuHoursBilled"] == got["cost"]["gpuHoursBilled"]
        assert got["power"]["energyKwh"] == pytest.approx(kwh / 2, rel=ENERGY_TOLERANCE, abs=edge_kwh)


def test_a_virtual_gpu_pair_is_split_by_its_own_use_against_the_gpus_capacity(loaded):
    """Per-pod utilisation and memory (KUBERNETES_VIRTUAL_GPUS): each execution's energy and GPU-hours worked
    follow its own utilisation (report_oracle.Shares.of_work), its memory utilisation is its own use over the
    A10's whole capacity, the same 22 GiB for both, and the verdict says which split was used."""
    server, cfg, start = loaded
    capacity = 22 * 1024**3
    for execution in (execution_named("vgpu-0035"), execution_named("vgpu-0036")):
        gpu = execution.gpus[0]
        assert gpu.mem_total_mib * 1024**2 == capacity
        want = report_oracle.report(SCENARIO, cfg, execution, reads_on=READS_ON_MINUTES)
        got = summary_of(server, cfg, execution.id, start)
        minutes = model.grid(execution.start_minute, execution.end_minute - STEP_SECONDS / 60)
        own_peak = max(oracle.mem_used_mib(execution, gpu, m) for m in minutes) * 1024**2
        device = got["gpus"]["devices"][0]
        assert device["memoryPeakBytes"] == pytest.approx(own_peak, rel=0.02)
        assert device["memoryPeakPercent"] == pytest.approx(own_peak / capacity * 100, rel=0.02)
        assert device["memoryPeakBytes"] / (device["memoryPeakPercent"] / 100) == pytest.approx(capacity, rel=0.02)
        assert got["power"]["energyKwh"] == pytest.approx(want.energy_kwh, rel=ENERGY_TOLERANCE)
        assert got["cost"]["gpuHoursWorked"] == pytest.approx(want.gpu_hours_worked, rel=0.02)
        assert got["cost"]["gpuHoursBilled"] == pytest.approx(want.gpu_hours_billed, rel=0.02)
        shared = verdict(got, "gpu_shared")["summary"]
        assert "in proportion to the holders' utilisation" in shared and "split equally" not in shared
        # The recorded capacity is the GPU's at every sample of the span, for both.
        span = format_duration(execution.end_minute * 60 - execution.start_minute * 60)
        total = catalog.GPU_MEMORY_TOTAL.select(match(catalog.EXECUTION_LABEL, execution.id))
        at = last_sample_at(start, execution.id)
        for fn in ("min_over_time", "max_over_time"):
            [row] = server.query(render(call(fn, total.range(span))), at)
            assert float(row["value"][1]) == capacity, fn
    # Split by use, the two add up to the GPU's own energy once (the model's, from the phases).
    _, kwh = report_oracle.gpu_totals(SCENARIO, execution_named("vgpu-0035").gpus[0])
    both = [summary_of(server, cfg, i, start)["power"]["energyKwh"] for i in ("vgpu-0035", "vgpu-0036")]
    assert sum(both) == pytest.approx(kwh, rel=ENERGY_TOLERANCE)
    assert both[0] != pytest.approx(both[1], rel=0.1)  # not the equal split: vgpu-0035 worked more


def test_a_shared_gpu_filled_by_its_holders_together_is_each_ones_oom_naming_the_other(loaded):
    """Each pod holds under half of the A10, the two together 96 %: gpu_oom judges the GPU's fill, for both."""
    server, cfg, start = loaded
    for own, other in (("vgpufull-0037", "vgpufull-0038"), ("vgpufull-0038", "vgpufull-0037")):
        got = summary_of(server, cfg, own, start)
        assert got["gpus"]["devices"][0]["memoryPeakPercent"] < 50
        oom = verdict(got, "gpu_oom")["summary"]
        assert f"GPU 0 on h25 (shared with {other})" in oom and "any of them can run it out" in oom


def fleet_at(server: Prometheus, cfg, at: float) -> dict[str, dict]:
    async def run() -> dict:
        client = PrometheusClient(server.url, 30)
        try:
            return await document.fleet_summary(cfg, client, "1d", len(SCENARIO.executions), at=at)
        finally:
            await client.close()

    return {row["executionId"]: row for row in asyncio.run(run())["top"]}


@pytest.mark.parametrize(
    ("ids", "tail_kwh"),
    [
        (("slice-0029", "slice-0030"), 0.0),
        (("vgpu-0035", "vgpu-0036"), 0.0),
        # mps-0032 ends while mps-0031 runs on: for READS_ON_MINUTES after, the backfill still counts it a
        # holder of GPU 0 (half the GPU's energy each) while its energy counter stands still.
        (("mps-0031", "mps-0032"), READS_ON_MINUTES * 60 / 2 * PEAK_WATTS / 3_600_000),
    ],
    ids=["time-sliced", "virtual-gpus", "mps"],
)
def test_the_fleet_view_counts_a_shared_gpu_once(loaded, ids, tail_kwh):
    """Summed over the executions that shared them, GPU-hours and energy are the GPUs' own (from the model)."""
    server, cfg, start = loaded
    executions = [execution_named(i) for i in ids]
    gpus = list(dict.fromkeys(g for e in executions for g in e.gpus))
    totals = [report_oracle.gpu_totals(SCENARIO, g) for g in gpus]
    # Asked just before the next scrape after the last holder's last sample, so no series reads on past it.
    rows = fleet_at(server, cfg, max(last_sample_at(start, i) for i in ids))
    billed = sum(rows[i]["gpuHoursBilled"] for i in ids)
    kwh = sum(rows[i]["energyKwh"] for i in ids)
    lag_hours = len(gpus) * LAG_STEPS * STEP_SECONDS / 3600 + len(ids) * 1e-4
    assert billed == pytest.approx(sum(h for h, _ in totals), abs=lag_hours)
    assert billed <= sum(h for h, _ in totals) + len(ids) * 1e-4  # never more than the GPUs were held
    edge_kwh = len(gpus) * LAG_STEPS * STEP_SECONDS * PEAK_WATTS / 3_600_000 + tail_kwh
    assert kwh == pytest.approx(sum(k for _, k in totals), rel=ENERGY_TOLERANCE, abs=edge_kwh)
    assert all("gpu_shared" in rows[i]["verdicts"] for i in ids)


# The report suite's executions on MIG instances: two 3g instances of one A100; a 3g beside a free 4g of another;
# each of an H100's two 3g instances.
MIG_IDS = ("mig-0003", "mig-0004", "migact-0027", "migact-0028")


@pytest.mark.parametrize("execution_id", MIG_IDS)
def test_the_fleet_view_bills_a_gpu_instance_its_share_of_the_gpu(loaded, execution_id):
    """The ranking and its rows count a MIG instance's GPU-hours in its share of the GPU, as the report does:
    mig-0003's two instances bill one A100, mig-0004's 3g instance 3/7 of one (report_oracle.slice_share)."""
    server, cfg, start = loaded
    # Asked at the execution's last sample: backfilled, its series would read on past it (READS_ON_MINUTES).
    at = last_sample_at(start, execution_id)
    row = fleet_at(server, cfg, at)[execution_id]

    async def ranking() -> list[fig.Waste]:
        client = PrometheusClient(server.url, 30)
        try:
            deployed = await fig.intervals(cfg, client)
            return await fig.waste_by_execution(cfg, client, fig.Scope(cfg, None, None), 86400, at, deployed.gpu)
        finally:
            await client.close()

    ranked = next(w for w in asyncio.run(ranking()) if w.execution_id == execution_id)
    execution = execution_named(execution_id)
    want = report_oracle.report(SCENARIO, cfg, execution)
    lag_hours = len(execution.gpus) * LAG_STEPS * STEP_SECONDS / 3600 + 1e-4
    expected = pytest.approx((want.gpu_hours_billed, want.gpu_hours_worked), abs=lag_hours)
    assert (row["gpuHoursBilled"], row["gpuHoursWorked"]) == expected
    assert (ranked.billed_seconds / 3600, ranked.worked_seconds / 3600) == expected


def test_the_readme_sample_is_what_the_report_prints(loaded, tmp_path):
    """README.md's text sample is this suite's I/O-bound job as `report` prints it: the same lines and words, and
    each figure within 1 %, all but the span's clock times (the data ends shortly before the test runs). A change
    to the report's figures or words fails here until the README shows it."""
    server, _cfg, _start = loaded
    config = tmp_path / "pack.yml"
    config.write_text(json.dumps({**CONFIG, "api": {"prometheus_url": server.url}}))
    cli = [sys.executable, "-m", "gpu_execution_pack", "report", "--config", str(config), "stall-0016"]
    printed = subprocess.run(cli, capture_output=True, text=True, cwd=REPO, check=True).stdout
    readme = (REPO / "README.md").read_text()
    sample = readme.split("A real report as text")[1].split("```text\n", 1)[1].split("```", 1)[0]
    assert words_of(sample) == words_of(printed)
    for shown, got in zip(figures_of(sample), figures_of(printed), strict=True):
        assert abs(shown - got) <= 0.01 * max(abs(got), 1e-9) + 0.05, (shown, got)


CLOCK = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
BAR = re.compile(r"\[[| ]+\]")
FIGURE = re.compile(r"\d+(?:\.\d+)?")


def words_of(report: str) -> list[str]:
    """A text report's lines without clock times, bars and figures, spaces folded: what must read the same."""
    return [
        " ".join(FIGURE.sub("#", BAR.sub("[bar]", CLOCK.sub("<time>", line))).split()) for line in report.splitlines()
    ]


def figures_of(report: str) -> list[float]:
    """Every figure of a text report but its clock times, in order (durations as their parts)."""
    return [float(x) for x in FIGURE.findall(BAR.sub("", CLOCK.sub("", report)))]
