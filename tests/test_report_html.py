"""The report as a page: written by the CLI and served by the endpoint from a real Prometheus holding the
report suite (one execution per verdict), opened in headless Chromium (Debian's ``chromium``), which
must draw every chart with data and hear no error. The figures' wording is checked on its own.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from gpu_execution_pack import catalog
from gpu_execution_pack.api.app import SUMMARY_PATH, create_app, prefers_html
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.query.prometheus import PrometheusClient
from gpu_execution_pack.report import document, html
from gpu_execution_pack.report.numbers import figure, percent_text
from gpu_execution_pack.report.text import bar
from starlette.testclient import TestClient

from harness import browser

from . import report_oracle
from .conftest import REPO

# The page from a report's document: the documents' figures on Prometheus 3 are test_report's.
pytestmark = pytest.mark.single_version

CONFIG = report_oracle.CONFIG
SCENARIO = report_oracle.report_suite()
KEY = "admin-key-0123456789"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
# A whole GPU with every activity field; MIG instances; a job whose telemetry stopped; an idle one; a shared GPU.
PAGES = ["train-0001", "mig-0003", "lost-0019", "idle-0022", "slice-0029"]


# --- the wording of figures (no browser, no Prometheus) ------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (0.123456, "", "0.123"),
        (28.04, "%", "28 %"),
        (28.449, "%", "28.4 %"),
        (99.96, "%", "100 %"),
        (5.0, "kWh", "5 kWh"),
        (1234.6, "W", "1235 W"),
        (0.0, "%", "0 %"),
        (-0.0004, "", "-0.0004"),
        (None, "%", "n/a"),
        (float("nan"), "", "n/a"),
    ],
)
def test_figures_have_three_significant_digits_and_one_percent_style(value, unit, text):
    assert figure(value, unit) == text


def test_bars_write_their_percentage_as_the_notes_do():
    assert bar(28.0).endswith("] " + "28 %".rjust(7)) and "%" not in bar(28.0).replace(" 28 %", "")
    assert bar(None).endswith("n/a") and percent_text(15.04) == "15 %"


@pytest.mark.parametrize(
    ("accept", "page"),
    [
        (BROWSER, True),
        ("text/html", True),
        ("*/*", False),
        ("", False),
        ("application/json", False),
        ("application/json, text/html", False),  # a tie: JSON
        ("text/html;q=0.5, application/json", False),
        ("text/html;q=x", False),
    ],
)
def test_the_summary_route_answers_a_page_only_where_html_is_preferred(accept, page):
    assert prefers_html(accept) is page


def test_html_and_json_are_not_asked_for_together(tmp_path, capsys):
    from gpu_execution_pack import cli

    page = tmp_path / "page.html"
    assert cli.main(["report", "train-0001", "--json", "--html", str(page), "--prometheus", "http://127.0.0.1:9"]) == 2
    assert "--html and --json" in capsys.readouterr().err and not page.exists()


def test_every_served_series_has_a_chart_once():
    charted = [s.name for chart in html.CHARTS for s in chart.series]
    assert sorted(charted) == sorted(s.name for s in catalog.SERVABLE_SERIES)


def test_script_data_cannot_end_its_script_element():
    text = html.script_json({"label": "</script><script>alert(1)</script>", "b": [1.5, None]})
    assert "<" not in text and json.loads(text)["label"].startswith("</script>")


# --- pages from a real Prometheus, opened in Chromium ---------------------------------------------------------


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """The report suite backfilled (conftest.report_suite_prometheus: raw series, every recording rule, the ALERTS
    the oracle says fire, ended 15 minutes ago or more), and a config file that reads it."""
    browser.chromium()  # the install hint before a minute of backfill
    server, _cfg, _start = request.getfixturevalue("report_suite_prometheus")
    config = tmp_path_factory.mktemp("config") / "pack.yml"
    config.write_text(json.dumps({**CONFIG, "api": {"prometheus_url": server.url}}))
    return server, config


def cli_page(config: Path, out: Path, *args: str) -> str:
    """``report ... --html out`` as a user runs it; the page's text."""
    cli = [sys.executable, "-m", "gpu_execution_pack", "report", "--config", str(config), *args, "--html", str(out)]
    done = subprocess.run(cli, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    return out.read_text()


def page_data(text: str) -> dict:
    """The data a page draws (its ``<script type="application/json">``)."""
    return json.loads(re.search(r'<script type="application/json" id="page-data">(.*?)</script>', text, re.S)[1])


def assert_drawn(page: Path) -> browser.Drawn:
    """Opened in Chromium, the page drew every chart it set out to, each with lines and points, and heard no error."""
    drawn = browser.open_page(page)
    assert drawn.errors == 0, drawn.error_text
    assert drawn.charts > 0 and drawn.drawn == drawn.charts == len(drawn.each)
    empty = [c.title for c in drawn.each if c.lines == 0 or c.points == 0]
    assert not empty, f"charts without data drawn: {empty}"
    return drawn


@pytest.mark.e2e
@pytest.mark.parametrize("execution_id", PAGES)
def test_an_executions_page_draws_every_chart_with_data_and_no_error(loaded, tmp_path, execution_id):
    _server, config = loaded
    text = cli_page(config, tmp_path / "page.html", execution_id)
    # Self-contained: nothing to fetch, and the policy forbids any fetch the page might still try.
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", text)
    assert "default-src 'none'" in text
    drawn = assert_drawn(tmp_path / "page.html")
    as_json = json.loads(
        subprocess.run(
            [sys.executable, "-m", "gpu_execution_pack", "report", "--config", str(config), execution_id, "--json"],
            capture_output=True,
            text=True,
            cwd=REPO,
            check=True,
        ).stdout
    )
    # The verdicts come first, each with its advice.
    verdicts = drawn.dom.index("Verdicts and advice")
    assert verdicts < drawn.dom.index('id="charts"')
    for v in as_json["verdicts"]:
        assert v["code"] in drawn.dom[verdicts:] and v["code"] in drawn.dom[: drawn.dom.index('id="charts"')]
    # One line per GPU (or host) in each chart of one series; the power chart adds each GPU's limit.
    gpus, hosts = as_json["gpus"]["count"], len(as_json["hosts"])
    lines = {c.title: c.lines for c in drawn.each}
    assert lines["GPU utilisation"] == gpus and lines["Power against the limit"] == 2 * gpus
    assert lines["Host CPU"] == hosts
    # No sub-second digits in the times the page shows, nor in the document's; whole seconds, bytes and counts.
    assert not re.search(r"T\d\d:\d\d:\d\d\.\d+Z", drawn.dom + json.dumps(as_json))
    whole = [
        as_json["durationSeconds"],
        as_json["memory"]["secondsAboveOomThreshold"],
        as_json["power"]["powerThrottledSeconds"],
        as_json["utilization"]["lowUtilizationSeconds"],
        *(d["memoryPeakBytes"] for d in as_json["gpus"]["devices"] if d["memoryPeakBytes"] is not None),
        *(h["ramTotalBytes"] for h in as_json["hosts"] if h["ramTotalBytes"] is not None),
        *(a["firingSeconds"] for a in as_json["alerts"]),
    ]
    assert all(type(v) is int for v in whole), whole


@pytest.mark.e2e
def test_the_page_charts_every_served_series_the_run_published_and_marks_phase_and_alerts(loaded, tmp_path):
    _server, config = loaded
    text = cli_page(config, tmp_path / "page.html", "train-0001")
    data = page_data(text)
    assert data["heavyPhase"] and data["heavyPhase"][0] < data["heavyPhase"][1]
    assert {a["name"] for a in data["alerts"]} == {"GpuExecutionGpuMemoryFillingUp", "GpuExecutionThermalThrottling"}
    assert all(a["intervals"] for a in data["alerts"])
    # The training job's exporter publishes every field the scenario models: a chart for each.
    assert [c["title"] for c in data["charts"]] == [c.title for c in html.CHARTS]
    thresholds = {c["title"]: [t["label"] for t in c["thresholds"]] for c in data["charts"]}
    assert thresholds["GPU memory used, of capacity"] == ["OOM threshold", "capacity"]
    assert thresholds["GPU temperature"] == ["throttle threshold"]


@pytest.mark.e2e
def test_the_same_document_and_series_give_the_same_page(loaded):
    """Byte for byte: nothing in a page depends on when or how often it is written. (Two reads of the report
    may differ: alerts are read up to alerts.telemetry_missing.window past the end, a window still growing
    for an hour after the run ended; so both pages are written from one read.)"""
    server, _config = loaded
    cfg = config_from_mapping({**CONFIG, "api": {"prometheus_url": server.url}})

    async def read() -> tuple:
        client = PrometheusClient(server.url, 30)
        try:
            doc = await document.execution_summary(cfg, client, "train-0001")
            return doc, *(await html.read_series(cfg, client, doc, None))
        finally:
            await client.close()

    doc, grid, found, alerts = asyncio.run(read())
    first = html.render_execution(cfg, doc, grid, found, alerts)
    assert html.render_execution(cfg, copy.deepcopy(doc), list(grid), copy.deepcopy(found), alerts) == first
    assert (
        html.render_fleet(
            {"since": "1d", "end": doc["end"], "executions": 0, "gpuHoursBilled": 0, "gpuHoursWasted": 0, "top": []}
        ).count("No executions in this window")
        == 1
    )


@pytest.mark.e2e
def test_the_fleet_page_draws_gpu_hours_billed_against_worked(loaded, tmp_path):
    _server, config = loaded
    page = cli_page(config, tmp_path / "fleet.html", "--since", "1d", "--top", "8")
    # `--html -` writes the same page to standard output (its "now" aside, the instant it was asked at).
    cli = [sys.executable, "-m", "gpu_execution_pack", "report", "--config", str(config), "--since", "1d"]
    printed = subprocess.run([*cli, "--top", "8", "--html", "-"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert printed.returncode == 0 and printed.stdout.startswith("<!DOCTYPE html>"), printed.stderr
    assert page_data(printed.stdout).keys() == page_data(page).keys()
    assert printed.stdout.count('<tr><td class="n">') == page.count('<tr><td class="n">') == 8
    drawn = assert_drawn(tmp_path / "fleet.html")
    assert [(c.title, c.lines, c.points) for c in drawn.each] == [("GPU-hours billed and worked", 2, 2 * 8)]
    assert len(re.findall(r"<tr><td class=\"n\">\d+</td>", drawn.dom)) == 8


# A fleet view over every tenant (``tenant`` null) and one row of it, as document.fleet_summary writes them.
ROW = {"executionId": "train", "gpus": 1, "models": ["A100"], "gpuHoursBilled": 1.0, "gpuHoursWorked": 0.5,
       "gpuHoursWasted": 0.5, "efficiencyPercent": 50.0, "energyKwh": None, "verdicts": ["healthy"]}  # fmt: skip
FLEET = {"since": "1d", "end": "2026-12-07T12:00:00Z", "tenant": None, "executions": 2, "gpuHoursBilled": 3.0,
         "gpuHoursWasted": 1.5, "notes": [], "top": []}  # fmt: skip


def test_the_fleet_page_and_text_name_the_tenant_of_each_row_where_two_tenants_hold_an_id():
    """Over every tenant, one id may be two tenants' executions, one row each: both pages named the id alone."""
    from gpu_execution_pack.report.text import render_fleet

    doc = {**FLEET, "top": [{**ROW, "tenant": "research"}, {**ROW, "tenant": "physics", "gpus": 2}]}
    page = html.render_fleet(doc)
    assert "<th>tenant</th>" in page and "<td>research</td>" in page and "<td>physics</td>" in page
    assert page_data(page)["charts"][0]["labels"] == ["train (research)", "train (physics)"]
    text = render_fleet(doc)
    assert re.search(r"^research\s+train\s+1 ", text, re.M) and re.search(r"^physics\s+train\s+2 ", text, re.M), text


def test_a_fleet_view_over_every_tenant_names_the_tenant_of_its_rows_however_few_and_a_tenants_own_view_does_not():
    """`--top 1` over every tenant, or top rows that happen to be one tenant's: the rows alone do not tell whose
    execution each is, so the view over every tenant names it. A view of one tenant (a key scoped to it, or a
    tenant asked for) has one tenant, said once in its heading; rows without a tenant label need no column."""
    from gpu_execution_pack.report.text import render_fleet

    one_row = {**FLEET, "executions": 2, "top": [{**ROW, "tenant": "research"}]}
    page, text = html.render_fleet(one_row), render_fleet(one_row)
    assert "<th>tenant</th>" in page and "<td>research</td>" in page and "train (research)" in page
    assert re.search(r"^tenant\s+execution\s", text, re.M) and re.search(r"^research\s+train\s+1 ", text, re.M), text

    scoped = {**one_row, "tenant": "research"}
    page, text = html.render_fleet(scoped), render_fleet(scoped)
    assert "<th>tenant</th>" not in page and "<td>research</td>" not in page and "tenant research" in page
    assert text.startswith("Executions of tenant research in the last 1d: 2;"), text
    assert re.search(r"^execution\s", text, re.M) and re.search(r"^train\s+1 ", text, re.M), text

    untenanted = {**FLEET, "top": [{**ROW, "tenant": None}, {**ROW, "executionId": "sweep", "tenant": None}]}
    assert "<th>tenant</th>" not in html.render_fleet(untenanted) and "tenant" not in render_fleet(untenanted)

    # The view of the GPUs without a tenant label (`--tenant ''`, `tenant=`) says so, not "of tenant " and nothing.
    unlabelled = {**untenanted, "tenant": ""}
    page, text = html.render_fleet(unlabelled), render_fleet(unlabelled)
    assert text.startswith("Executions of the GPUs without a tenant label in the last 1d: "), text
    assert "· the GPUs without a tenant label ·" in page and "<th>tenant</th>" not in page


def test_the_fleet_pages_chart_names_the_cluster_of_each_row_where_two_clusters_hold_an_id():
    """With a cluster label, one id is an execution in each cluster that holds it, and in one cluster may be a
    tenant's and the GPUs' without a tenant label: a row each. The table has a cluster column; the chart named each
    bar by id and tenant alone, so two bars read "20417 (research)" (in a view of one tenant, both "20417")."""
    top = [
        {**ROW, "executionId": "20417", "cluster": cluster, "tenant": tenant}
        for cluster, tenant in (("b", "research"), ("a", None), ("a", "research"))
    ]
    labels = page_data(html.render_fleet({**FLEET, "top": top}))["charts"][0]["labels"]
    assert labels == ["20417 (cluster b, research)", "20417 (cluster a, -)", "20417 (cluster a, research)"]
    one_tenant = page_data(html.render_fleet({**FLEET, "tenant": "research", "top": top[::2]}))["charts"][0]
    assert one_tenant["labels"] == ["20417 (cluster b)", "20417 (cluster a)"]


@pytest.mark.e2e
def test_the_text_fleet_view_of_its_top_row_names_its_tenant_unless_it_is_one_tenants_view(loaded):
    """`report --since 1d --top 1` over the report suite (Jobs of several namespaces): one row, with its tenant;
    with `--tenant` that tenant's own view, which says its tenant in the heading and needs no column."""
    _server, config = loaded

    def report(*args: str) -> str:
        cli = [sys.executable, "-m", "gpu_execution_pack", "report", "--config", str(config), "--since", "1d", *args]
        done = subprocess.run(cli, capture_output=True, text=True, cwd=REPO, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    ranked = json.loads(report("--top", "1", "--json"))
    [top] = ranked["top"]
    assert ranked["tenant"] is None and top["tenant"] and ranked["executions"] > 1
    _summary, _blank, heading, row = report("--top", "1").splitlines()
    assert heading.split()[:2] == ["tenant", "execution"] and row.split()[:2] == [top["tenant"], top["executionId"]]
    own = report("--top", "1", "--tenant", top["tenant"]).splitlines()
    assert own[0].startswith(f"Executions of tenant {top['tenant']} in the last 1d: "), own[0]
    assert own[2].split()[0] == "execution" and own[3].split()[0] == top["executionId"]


@pytest.mark.e2e
def test_the_check_hears_a_script_error(loaded, tmp_path):
    """The page's own error count is what the tests trust: a page whose data is broken must report it."""
    _server, config = loaded
    text = cli_page(config, tmp_path / "page.html", "idle-0022")
    broken = tmp_path / "broken.html"
    broken.write_text(text.replace('id="page-data">', 'id="page-data">{', 1))
    drawn = browser.open_page(broken)
    assert drawn.errors >= 1 and drawn.drawn == 0


@pytest.mark.e2e
def test_the_endpoint_serves_the_page_to_a_browser_and_json_to_the_rest(loaded, tmp_path):
    server, config = loaded
    cfg = config_from_mapping({**CONFIG, "api": {"prometheus_url": server.url}})
    path = SUMMARY_PATH.format(execution_id="cpubound-0017")
    with TestClient(create_app(cfg, {KEY: "*"})) as client:
        auth = {"Authorization": f"Bearer {KEY}"}
        page = client.get(path, headers={**auth, "Accept": BROWSER})
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), page.text[:300]
        as_json = client.get(path, headers={**auth, "Accept": "*/*"})
        assert as_json.headers["content-type"].startswith("application/json")
        assert [v["code"] for v in as_json.json()["verdicts"]] == ["gpu_underutilized_input_bound"]
        missing = client.get(SUMMARY_PATH.format(execution_id="nope-0000"), headers={**auth, "Accept": BROWSER})
        assert missing.status_code == 404 and missing.headers["content-type"].startswith("application/json")
        assert client.get(path, headers={"Accept": BROWSER}).status_code == 401
    # The same charts as the page the CLI writes.
    cli = cli_page(config, tmp_path / "cli.html", "cpubound-0017")
    assert page_data(page.text)["charts"] == page_data(cli)["charts"]
    served = tmp_path / "served.html"
    served.write_text(page.text)
    assert_drawn(served)
