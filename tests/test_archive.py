"""The archive end to end: the report suite backfilled into a real Prometheus, archived by the CLI into SQLite
and into a real PostgreSQL (a throwaway server started with initdb and pg_ctl), once, twice, by two archivers
at once and by one killed mid-run; then read back by the report with Prometheus' data gone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from gpu_execution_pack.api.app import FLEET_PATH, PATH, SUMMARY_PATH, create_app
from gpu_execution_pack.archive import archiver, reader
from gpu_execution_pack.archive.store import Store, records
from gpu_execution_pack.config import ConfigError, config_from_mapping, load_config
from gpu_execution_pack.output import to_yaml
from gpu_execution_pack.query.params import RequestError
from gpu_execution_pack.query.prometheus import PrometheusClient
from httpx import Response
from starlette.testclient import TestClient

from harness import browser
from harness.postgres import Postgres
from harness.prometheus import Prometheus

from .conftest import REPO
from .test_report import CONFIG, SCENARIO

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("promtool_available")]

ENDED_AFTER = "5m"  # the suite's data ends 15 minutes before the test starts
# Every execution of the suite, as the scenario says it ran: (cluster, tenant, id), without a cluster label.
EXPECTED = {("", e.namespace, e.id) for e in SCENARIO.executions}


@pytest.fixture(scope="module")
def loaded(report_suite_prometheus):
    """test_report's Prometheus: the report suite (raw series, recorded series and ALERTS) ended 15 minutes ago
    or more (conftest.report_suite_prometheus): (server, cfg, start)."""
    return report_suite_prometheus


@pytest.fixture(scope="module")
def postgres():
    server = Postgres()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def archive_url(request, tmp_path, postgres) -> str:
    """A new, empty archive: a SQLite file, or a database of its own on the module's PostgreSQL."""
    if request.param == "sqlite":
        return str(tmp_path / "archive.sqlite")
    return postgres.database(f"test_{abs(hash(request.node.name)) % 10**9}")


def config_file(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(to_yaml({**CONFIG, "archive": {"url": url, "ended_after": ENDED_AFTER}}))
    return path


def archive_command(server, tmp_path: Path, url: str, *more: str) -> list[str]:
    since = f"{SCENARIO.window_minutes + 60}m"
    config = config_file(tmp_path, url)
    return [sys.executable, "-m", "gpu_execution_pack", "archive", "-c", str(config), "--since", since,
            "--prometheus", server.url, *more]  # fmt: skip


def kept(url: str) -> list[tuple[str, str, str]]:
    """Every record's key but its start, as many times as the archive holds it."""
    store = Store.open(url, create=False)
    assert store is not None, f"no archive at {url}"
    try:
        with store.engine.connect() as conn:
            rows = conn.execute(sa.select(records.c.cluster, records.c.tenant, records.c.execution_id)).all()
        return sorted(tuple(r) for r in rows)
    finally:
        store.close()


@pytest.mark.single_version
def test_the_suite_is_archived_once_and_a_rerun_changes_nothing(loaded, tmp_path, archive_url):
    server, _cfg, _start = loaded
    first = subprocess.run(archive_command(server, tmp_path, archive_url), capture_output=True, text=True, cwd=REPO)
    assert first.returncode == 0, first.stderr
    assert kept(archive_url) == sorted(EXPECTED)
    again = subprocess.run(archive_command(server, tmp_path, archive_url), capture_output=True, text=True, cwd=REPO)
    assert again.returncode == 0, again.stderr
    assert f"0 archived, {len(EXPECTED)} unchanged" in again.stdout
    assert kept(archive_url) == sorted(EXPECTED)
    store = Store.open(archive_url, create=False)
    try:
        (record,) = store.find("train-0001")
        assert record.document["executionId"] == "train-0001" and record.tenant == "research"
        assert record.step_seconds == 60 and record.series["step"] == "1m"
        assert store.find("train-0001", tenant="physics") == []
    finally:
        store.close()


@pytest.mark.single_version
def test_two_archivers_at_once_keep_every_record_once(loaded, tmp_path, archive_url):
    server, _cfg, _start = loaded
    command = archive_command(server, tmp_path, archive_url)
    both = [subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    for p in both:
        _out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err.decode()
    assert kept(archive_url) == sorted(EXPECTED)


@pytest.mark.single_version
def test_an_archiver_killed_mid_run_and_restarted_keeps_every_record_once(loaded, tmp_path, archive_url):
    server, _cfg, _start = loaded
    command = archive_command(server, tmp_path, archive_url)
    victim = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and victim.poll() is None:
            if Path(archive_url).exists() or archive_url.startswith("postgresql"):
                try:
                    if kept(archive_url):
                        break
                except (AssertionError, ConfigError, sa.exc.OperationalError, sa.exc.ProgrammingError):
                    pass  # the archive or its tables are not there yet
            time.sleep(0.05)
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
    assert len(kept(archive_url)) < len(EXPECTED), "the archiver finished before it could be killed"
    again = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    assert again.returncode == 0, again.stderr
    assert kept(archive_url) == sorted(EXPECTED)
    store = Store.open(archive_url, create=False)
    try:
        for cluster, tenant, execution_id in EXPECTED:
            (record,) = store.find(execution_id, tenant, cluster)
            assert record.document["executionId"] == execution_id
            assert json.dumps(record.series)  # whole, readable
    finally:
        store.close()


@pytest.mark.single_version
def test_a_bad_archive_url_is_one_line(tmp_path, loaded):
    server, _cfg, _start = loaded
    done = subprocess.run(
        archive_command(server, tmp_path, "mysql://nowhere/db"), capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 2
    # Refused where the config is read, naming its file, before anything is asked of Prometheus.
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "config.yml: archive.url: 'mysql://nowhere/db' is not accepted; accepted: " in done.stderr, done.stderr


def report_json(prometheus_url: str, config: Path, *args: str) -> dict:
    cli = [sys.executable, "-m", "gpu_execution_pack", "report", "-c", str(config), "--prometheus", prometheus_url]
    done = subprocess.run([*cli, "--json", *args], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def summaries(cfg, prometheus_url: str, store: Store) -> dict[str, dict]:
    """Every execution's report as its tenant's key gets it (a record holds its tenant's view), by id."""

    async def run() -> dict[str, dict]:
        client = PrometheusClient(prometheus_url, 30)
        try:
            return {
                e.id: await reader.execution_summary(cfg, client, store, e.id, tenant=e.namespace)
                for e in SCENARIO.executions
            }
        finally:
            await client.close()

    return asyncio.run(run())


def one_pass(
    prometheus_url: str, cfg, store: Store, seconds: float, at: float | None = None, batch_size: int = archiver.BATCH
) -> archiver.Tally:
    """One archive pass in this process, as the CLI runs it."""

    async def run() -> archiver.Tally:
        client = PrometheusClient(prometheus_url, 60)
        try:
            return await archiver.archive_window(cfg, client, store, seconds, at, batch_size)
        finally:
            await client.close()

    return asyncio.run(run())


@pytest.mark.single_version
def test_a_follow_pass_after_a_complete_one_reads_no_ended_execution_again(loaded, tmp_path):
    server, _cfg, _start = loaded
    cfg = config_from_mapping({**CONFIG, "archive": {"url": str(tmp_path / "a.sqlite"), "ended_after": ENDED_AFTER}})
    store = Store.open(cfg.archive.url)
    assert store is not None
    since = (SCENARIO.window_minutes + 60) * 60
    try:
        at = time.time()
        first = one_pass(server.url, cfg, store, archiver.follow_window(cfg, since, None, at), at)
        assert first.archived == len(EXPECTED)
        mark, at = archiver.watermark_after(cfg, at), time.time()
        # The suite ended 15 minutes ago, before the mark: a follow pass lists none of it; a pass over
        # all of --since would read every span again to find every record unchanged.
        again = one_pass(server.url, cfg, store, archiver.follow_window(cfg, since, mark, at), at)
        assert (again.archived, again.unchanged, again.running, again.gone) == (0, 0, 0, 0)
        assert one_pass(server.url, cfg, store, since, at).unchanged == len(EXPECTED)
    finally:
        store.close()


def every_record(store: Store) -> dict[tuple, tuple]:
    """Each record's content but when it was written and by which version, by key."""
    found = {}
    for e in SCENARIO.executions:
        for r in store.find(e.id, e.namespace):
            found[(r.cluster, r.tenant, r.execution_id, r.start)] = (r.end, r.step_seconds, r.document, r.series)
    return found


def archived_records(server_url: str, folder: Path, batch_size: int) -> dict[tuple, tuple]:
    """Every record one pass over the whole suite writes, reading ``batch_size`` executions' spans per query."""
    since = (SCENARIO.window_minutes + 60) * 60
    url = str(folder / f"batch-{batch_size}.sqlite")
    cfg = config_from_mapping({**CONFIG, "archive": {"url": url, "ended_after": ENDED_AFTER}})
    store = Store.open(url)
    assert store is not None
    try:
        assert one_pass(server_url, cfg, store, since, batch_size=batch_size).archived == len(EXPECTED)
        return every_record(store)
    finally:
        store.close()


@pytest.fixture(scope="module")
def per_execution_records(loaded, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple, tuple]:
    """The records of a pass that reads each execution's span alone: what the batched passes must write."""
    server, _cfg, _start = loaded
    return archived_records(server.url, tmp_path_factory.mktemp("per-execution"), 1)


@pytest.mark.single_version  # two of our passes over one Prometheus
@pytest.mark.parametrize("size", [archiver.BATCH, 4])
def test_the_batched_archiver_writes_the_records_the_per_execution_one_does(
    loaded, per_execution_records, tmp_path, size
):
    server, _cfg, _start = loaded
    batched = archived_records(server.url, tmp_path, size)
    assert len(per_execution_records) == len(EXPECTED)
    assert batched.keys() == per_execution_records.keys()
    for key, record in per_execution_records.items():
        assert batched[key] == record, f"{key}: the batched record differs"


def test_with_prometheus_data_gone_the_report_answers_the_same_from_the_archive(loaded, tmp_path, postgres):
    server, _cfg, _start = loaded
    url = postgres.database("after_retention")
    archived = subprocess.run(archive_command(server, tmp_path, url), capture_output=True, text=True, cwd=REPO)
    assert archived.returncode == 0, archived.stderr
    config = config_file(tmp_path, url)
    cfg = load_config(str(config))
    store = Store.open(url, create=False)
    before = summaries(cfg, server.url, store)
    fleet_before = report_json(server.url, config, "--since", "1d", "--top", "100")
    # An earlier run of a reused id (Kubernetes Job names repeat), archived three weeks ago: train-0001's record
    # moved back. Prometheus holds the later run under the same key; the month's fleet counts both (the earlier
    # one was dropped as Prometheus' row).
    (latest,) = store.find("train-0001")
    earlier = dataclasses.replace(latest, start=latest.start - 21 * 86400, end=latest.end - 21 * 86400)
    store.put(earlier)
    fleet_month = report_json(server.url, config, "--since", "30d", "--top", "100")
    assert fleet_month["executions"] == fleet_before["executions"] + 1, fleet_month
    reused = {r["source"]: r for r in fleet_month["top"] if r["executionId"] == "train-0001"}
    assert sorted(reused) == ["archive", "prometheus"], reused
    assert reused["archive"]["gpuHoursBilled"] == latest.document["cost"]["gpuHoursBilled"]
    assert fleet_month["gpuHoursBilled"] == pytest.approx(
        fleet_before["gpuHoursBilled"] + reused["archive"]["gpuHoursBilled"], abs=1e-3
    )
    text_before = report_text(server.url, config, "train-0001")
    empty = Prometheus(tmp_path / "empty")  # Prometheus past its retention: none of the suite's samples
    empty.start()
    try:
        after = summaries(cfg, empty.url, store)
        fleet_after = report_json(empty.url, config, "--since", "1d", "--top", "100")
        # With an archive, since reaches past api.lookback (35d): a quarter's bill (it was refused as past 35d).
        fleet_quarter = report_json(empty.url, config, "--since", "90d", "--top", "100")
        text_after = report_text(empty.url, config, "train-0001")
        series_after = query_json(empty.url, config, "train-0001", "--series", "gpuUtilizationPercent")
    finally:
        empty.stop()
        store.close()
    for i, doc in after.items():
        assert before[i]["source"] == "prometheus" and doc["source"] == "archive"
        assert doc["step"] == "1m"
        assert {k: v for k, v in doc.items() if k not in ("source", "step")} == {
            k: v for k, v in before[i].items() if k != "source"
        }, i
    assert fleet_after["executions"] == fleet_before["executions"] == len(SCENARIO.executions)
    # The quarter holds train-0001's earlier run too.
    assert fleet_quarter["executions"] == len(SCENARIO.executions) + 1 and fleet_quarter["since"] == "90d"
    # From the archive the fleet's rows are the archived reports' (Prometheus ranks on its own, cheaper sums).
    billed = sum(doc["cost"]["gpuHoursBilled"] for doc in before.values())
    assert fleet_after["gpuHoursBilled"] == pytest.approx(billed, abs=1e-3)
    # Prometheus ranks on the seconds the rules measured each sample to stand for (the gap before it); the reports
    # weigh each sample by the gap after it. Both count the recorded series' lookback tail (backfilled without
    # stale markers, they run on for the lookback after an execution's raw data ends; live data has no such
    # tail), and they part at its ragged ends. No total rests on an assumed interval.
    assert fleet_after["gpuHoursBilled"] == pytest.approx(fleet_before["gpuHoursBilled"], rel=0.02)
    assert fleet_before["notes"] == []
    rows = {r["executionId"]: r for r in fleet_after["top"]}
    assert rows.keys() == before.keys()
    for i, row in rows.items():
        assert row["verdicts"] == [v["code"] for v in before[i]["verdicts"]], i
        assert row["gpuHoursWasted"] == before[i]["cost"]["gpuHoursWasted"], i
    assert all(r["source"] == "archive" for r in fleet_after["top"])
    assert "Source:    the archive" in text_after and "Source:" not in text_before
    # The figures the CLI prints (every line but the source's) are the same.
    assert [x for x in text_after.splitlines() if "Source:" not in x] == text_before.splitlines()
    # `query` answers from the archive as the endpoint does, the series asked for only.
    assert series_after["source"] == "archive" and series_after["executionId"] == "train-0001"
    assert set(series_after["series"]) == {"gpuUtilizationPercent"}
    assert all(e["values"] for e in series_after["series"]["gpuUtilizationPercent"]["entries"])


def query_json(prometheus_url: str, config: Path, *args: str) -> dict:
    cli = [sys.executable, "-m", "gpu_execution_pack", "query", "-c", str(config), "--prometheus", prometheus_url]
    done = subprocess.run([*cli, *args], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def report_text(prometheus_url: str, config: Path, execution_id: str) -> str:
    cli = [sys.executable, "-m", "gpu_execution_pack", "report", "-c", str(config), "--prometheus", prometheus_url]
    done = subprocess.run([*cli, execution_id], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.single_version
def test_another_tenants_record_is_never_served(loaded, tmp_path, postgres):
    """Read through the library with a tenant's scope: its own records, never another's."""
    server, cfg, _start = loaded
    url = postgres.database("tenants")
    assert subprocess.run(archive_command(server, tmp_path, url), capture_output=True, cwd=REPO).returncode == 0
    store = Store.open(url, create=False)
    empty = Prometheus(tmp_path / "empty")
    empty.start()

    async def read(execution_id: str, tenant: str) -> dict:
        client = PrometheusClient(empty.url, 30)
        try:
            return await reader.execution_summary(cfg, client, store, execution_id, tenant=tenant)
        finally:
            await client.close()

    try:
        mine = next(e for e in SCENARIO.executions if e.namespace != "research")
        assert asyncio.run(read(mine.id, mine.namespace))["executionId"] == mine.id
        with pytest.raises(RequestError) as refused:
            asyncio.run(read(mine.id, "research"))
        assert refused.value.status == 404
    finally:
        empty.stop()
        store.close()


@pytest.mark.single_version
def test_the_endpoint_answers_from_the_archive_for_its_tenant_only(loaded, tmp_path, postgres):
    """Summary and metrics routes with Prometheus' data gone: the archived report and series (at the kept step),
    for the tenant's own key; another tenant's key gets the 404 of an id it cannot see."""
    server, _cfg, _start = loaded
    url = postgres.database("endpoint")
    assert subprocess.run(archive_command(server, tmp_path, url), capture_output=True, cwd=REPO).returncode == 0
    execution = next(e for e in SCENARIO.executions if e.id == "train-0001")
    empty = Prometheus(tmp_path / "empty")
    empty.start()
    try:
        cfg = config_from_mapping({**CONFIG, "archive": {"url": url}, "api": {"prometheus_url": empty.url}})
        keys = {"own-key-0123456789": execution.namespace, "other-key-0123456789": "physics"}
        with TestClient(create_app(cfg, keys)) as client:
            own, other = ({"Authorization": f"Bearer {k}"} for k in keys)
            summary = client.get(SUMMARY_PATH.replace("{execution_id}", execution.id), headers=own)
            assert summary.status_code == 200, summary.text
            assert summary.json()["source"] == "archive" and summary.json()["executionId"] == execution.id
            path = PATH.replace("{execution_id}", execution.id)
            metrics = client.get(path, headers=own)
            assert metrics.status_code == 200, metrics.text
            body = metrics.json()
            assert body["source"] == "archive" and body["step"] == "1m"
            entries = body["series"]["gpuUtilizationPercent"]["entries"]
            assert len(entries) == len(execution.gpus)
            times = [t for t, _ in entries[0]["values"]]
            assert times and all(b - a == 60 for a, b in itertools.pairwise(times))
            assert client.get(path, headers=own, params={"step": "15s"}).status_code == 400
            assert client.get(path, headers=other).status_code == 404
            assert client.get(SUMMARY_PATH.replace("{execution_id}", execution.id), headers=other).status_code == 404
    finally:
        empty.stop()


@pytest.mark.single_version
def test_an_archive_created_after_the_endpoint_started_is_read_without_a_restart(loaded, tmp_path):
    """The endpoint started before the archiver's first pass created its SQLite file (a new install, the archiver's
    first run due later): the file was looked for at start only, so the routes never read it until a restart. It is
    looked for again every few seconds, and read once there. /readyz says ready without the file (Prometheus alone,
    as without an archive), not ready while a file there cannot be read, ready again once the archive is read. A file
    moved into its place later (a restore) is read in its turn, and a file removed is read no more."""
    server, _cfg, _start = loaded
    url = str(tmp_path / "created-later.sqlite")
    execution = next(e for e in SCENARIO.executions if e.id == "train-0001")
    empty = Prometheus(tmp_path / "empty")  # Prometheus past its retention: only the archive can hold the run
    empty.start()

    def within(seconds: float, ask: Callable[[], Response], done: Callable[[Response], bool], what: str) -> Response:
        deadline = time.monotonic() + seconds
        while not done(answer := ask()):
            assert time.monotonic() < deadline, f"{what} not within {seconds:g} s: {answer.status_code} {answer.text}"
            time.sleep(0.5)
        return answer

    try:
        cfg = config_from_mapping({**CONFIG, "archive": {"url": url}, "api": {"prometheus_url": empty.url}})
        key = {"Authorization": "Bearer own-key-0123456789"}
        with TestClient(create_app(cfg, {"own-key-0123456789": execution.namespace})) as client:
            summary = SUMMARY_PATH.replace("{execution_id}", execution.id)
            assert client.get(summary, headers=key).status_code == 404  # neither Prometheus nor an archive has it
            assert client.get("/readyz").status_code == 200
            Path(url).write_text("no SQLite database\n")  # the archive's file, and the routes cannot read it
            within(20, lambda: client.get("/readyz"), lambda r: r.status_code == 503, "/readyz's 503")
            Path(url).unlink()

            archived = subprocess.run(archive_command(server, tmp_path, url), capture_output=True, text=True, cwd=REPO)
            assert archived.returncode == 0, archived.stderr
            got = within(20, lambda: client.get(summary, headers=key), lambda r: r.status_code != 404, "the record")
            assert got.status_code == 200, got.text
            assert got.json()["source"] == "archive" and got.json()["executionId"] == execution.id
            metrics = client.get(PATH.replace("{execution_id}", execution.id), headers=key)
            assert metrics.status_code == 200 and metrics.json()["source"] == "archive", metrics.text
            assert client.get("/readyz").status_code == 200

            # A restore moved into place (here an archive without the run): the file at the path is read within
            # seconds, not the one opened, which the store would go on reading for the process's life.
            restored = tmp_path / "restored.sqlite"
            store = Store.open(str(restored))
            assert store is not None
            store.close()
            restored.replace(url)
            within(20, lambda: client.get(summary, headers=key), lambda r: r.status_code == 404, "the restored file")
            assert client.get("/readyz").status_code == 200
            Path(url).unlink()  # and removed: Prometheus alone, as before the archive was created
            within(20, lambda: client.get("/readyz"), lambda r: r.status_code == 200, "/readyz")
            assert client.get(summary, headers=key).status_code == 404
    finally:
        empty.stop()


def page_charts(text: str) -> dict[str, int]:
    """The charts a page sets out to draw (its ``<script type="application/json">``): lines by title."""
    data = json.loads(re.search(r'<script type="application/json" id="page-data">(.*?)</script>', text, re.S)[1])
    return {c["title"]: len(c["lines"]) for c in data["charts"]}


@pytest.mark.single_version
def test_with_prometheus_data_gone_the_page_still_draws_its_charts(loaded, tmp_path):
    """The report's page (CLI --html, and the summary route to a browser) of an execution Prometheus no longer has:
    drawn from its record, with the charts the page from Prometheus had, in Chromium without an error."""
    browser.chromium()  # the install hint first
    server, _cfg, _start = loaded
    url = str(tmp_path / "archive.sqlite")
    config = config_file(tmp_path, url)
    assert subprocess.run(archive_command(server, tmp_path, url), capture_output=True, cwd=REPO).returncode == 0
    execution = next(e for e in SCENARIO.executions if e.id == "train-0001")

    def cli_page(prometheus_url: str, out: Path) -> str:
        cli = [sys.executable, "-m", "gpu_execution_pack", "report", "-c", str(config), "--prometheus",
               prometheus_url, execution.id, "--html", str(out)]  # fmt: skip
        done = subprocess.run(cli, capture_output=True, text=True, cwd=REPO, timeout=120)
        assert done.returncode == 0, done.stderr
        return out.read_text()

    before = page_charts(cli_page(server.url, tmp_path / "before.html"))
    empty = Prometheus(tmp_path / "empty")
    empty.start()
    try:
        after = cli_page(empty.url, tmp_path / "after.html")
        cfg = config_from_mapping({**CONFIG, "archive": {"url": url}, "api": {"prometheus_url": empty.url}})
        key = "own-key-0123456789"
        with TestClient(create_app(cfg, {key: execution.namespace})) as client:
            served = client.get(
                SUMMARY_PATH.replace("{execution_id}", execution.id),
                headers={"Authorization": f"Bearer {key}", "Accept": "text/html"},
            )
    finally:
        empty.stop()
    assert before and page_charts(after) == before
    assert served.status_code == 200 and served.headers["content-type"].startswith("text/html")
    assert page_charts(served.text) == before
    drawn = browser.open_page(tmp_path / "after.html")
    assert drawn.errors == 0, drawn.error_text
    assert drawn.charts == drawn.drawn == len(before)
    assert not [c.title for c in drawn.each if c.lines == 0 or c.points == 0]


@pytest.mark.single_version  # which source answers is our choice, made alike over either version's answers
def test_a_record_answers_for_the_run_it_reaches_not_for_an_earlier_run_of_the_id(loaded, tmp_path):
    """The archive answers where it holds more of the run than Prometheus still does (its first hour gone with
    the retention). A record of an earlier run of the id (a day before, the id reused, or another tenant's) ended
    long before what Prometheus holds: it is not this run's beginning, and the report is Prometheus'."""
    server, _cfg, _start = loaded
    url = str(tmp_path / "archive.sqlite")
    archived = subprocess.run(archive_command(server, tmp_path, url), capture_output=True, text=True, cwd=REPO)
    assert archived.returncode == 0, archived.stderr
    cfg = load_config(str(config_file(tmp_path, url)))
    execution = SCENARIO.executions[0]
    kept = Store.open(url, create=False)
    [record] = kept.find(execution.id, execution.namespace, None)
    kept.close()

    def source_with(moved: dict[str, float]) -> str:
        store = Store.open(str(tmp_path / f"moved-{len(list(tmp_path.glob('moved-*')))}.sqlite"))
        store.put(dataclasses.replace(record, **moved))

        async def source() -> str:
            client = PrometheusClient(server.url, 30)
            try:
                doc = await reader.execution_summary(cfg, client, store, execution.id, tenant=execution.namespace)
                return doc["source"]
            finally:
                await client.close()

        try:
            return asyncio.run(source())
        finally:
            store.close()

    assert source_with({"start": record.start - 3600}) == "archive"
    assert source_with({"start": record.start - 86400, "end": record.end - 86400}) == "prometheus"


@pytest.mark.single_version  # our answer to a database gone, whichever Prometheus answered first
def test_an_archive_database_that_stops_answering_is_a_503_naming_it_not_a_500(loaded):
    """PostgreSQL stopped under a running endpoint: the routes that read the archive (an execution Prometheus no
    longer has, the fleet view) were 500s, and said nothing of the archive."""
    server, _cfg, _start = loaded
    database = Postgres()
    database.start()
    cfg = config_from_mapping(
        {
            **CONFIG,
            "archive": {"url": database.database("stopped")},
            "api": {**CONFIG.get("api", {}), "prometheus_url": server.url},
        }
    )
    key = "admin-key-0123456789abcdef"
    auth = {"Authorization": f"Bearer {key}"}
    try:
        with TestClient(create_app(cfg, {key: "*"})) as client:
            database.stop()
            answers = [
                client.get(FLEET_PATH, params={"since": "1d"}, headers=auth),
                client.get(SUMMARY_PATH.replace("{execution_id}", "gone-0001"), headers=auth),
            ]
    finally:
        database.stop()
    for answer in answers:
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"].startswith("the archive does not answer ("), answer.text


@pytest.fixture(scope="module")
def long_keys(tmp_path_factory: pytest.TempPathFactory):
    """A real Prometheus holding the training scenario ended 15 minutes ago, its first execution under a tenant of
    300 characters, its second under an id of 300, and a third execution of ordinary names: (server, ids)."""
    from gpu_execution_pack.config import Config
    from gpu_execution_pack.scenario import library
    from gpu_execution_pack.scenario.model import Execution

    base = library.training_in("4.8")
    long_tenant, long_id = base.executions
    free = base.unowned_gpus[0]
    scenario = dataclasses.replace(
        base,
        executions=(
            dataclasses.replace(long_tenant, namespace="t" * 300),
            dataclasses.replace(long_id, id="j" * 300),
            Execution("ok-0003", (free,), ("loading", "compute"), start_minute=3),
        ),
        unowned_gpus=(),
    )
    server = Prometheus(tmp_path_factory.mktemp("long-keys"))
    try:
        server.load_scenario(scenario, Config(), int(time.time()) // 60 * 60 - 15 * 60)
        yield server, [e.id for e in scenario.executions]
    finally:
        server.stop()


@pytest.mark.single_version  # our store's limits, whichever Prometheus answered
def test_a_key_longer_than_the_archive_keeps_is_skipped_with_a_warning_on_both_stores(long_keys, tmp_path, archive_url):
    """A tenant over 256 characters (the PostgreSQL column's length) stopped a pass on PostgreSQL with a traceback,
    while SQLite kept it; an id over 256 (the most the endpoint and report read) was archived, never to be read
    back: both stores now skip such an execution, say why on one line each, and archive the others."""
    server, (tenant_too_long, id_too_long, ordinary) = long_keys
    config = tmp_path / "config.yml"
    config.write_text(to_yaml({"archive": {"url": archive_url, "ended_after": ENDED_AFTER}}))
    command = [sys.executable, "-m", "gpu_execution_pack", "archive", "-c", str(config), "--since", "3h",
               "--prometheus", server.url]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    warnings = done.stderr.strip().splitlines()
    assert len(warnings) == 2, done.stderr
    (of_tenant,) = [w for w in warnings if w.startswith(f"warning: archive: execution {tenant_too_long!r} ")]
    assert of_tenant.endswith(
        "not archived: its tenant has 300 characters ('tttttttttttttttttttt'...); accepted: at most 256 characters"
    )
    (of_id,) = [w for w in warnings if w.startswith("warning: archive: execution 'jjjj")]
    assert of_id.endswith(
        "not archived: its execution id has 300 characters ('jjjjjjjjjjjjjjjjjjjj'...); "
        "accepted: at most 256 characters"
    )
    assert "1 archived" in done.stdout and "2 skipped" in done.stdout, done.stdout
    assert [key[2] for key in kept(archive_url)] == [ordinary]
    assert tenant_too_long == "train-0001" and len(id_too_long) == 300


@pytest.mark.single_version  # our probe's answer to a database gone, whichever Prometheus answered
def test_readyz_is_503_while_the_archive_database_does_not_answer(loaded, caplog):
    """/readyz said ready with PostgreSQL stopped under a running endpoint, while every route reading the archive
    answered 503: not ready now, the reason in the log (the probe needs no key: its body says no more, as for
    Prometheus)."""
    from gpu_execution_pack.api.app import READY_TIMEOUT_SECONDS

    server, _cfg, _start = loaded
    database = Postgres()
    database.start()
    url = database.database("readiness")
    cfg = config_from_mapping({**CONFIG, "archive": {"url": url}, "api": {"prometheus_url": server.url}})
    try:
        with TestClient(create_app(cfg, {"admin-key-0123456789abcdef": "*"})) as client:
            assert client.get("/readyz").status_code == 200
            database.stop()
            with caplog.at_level("WARNING", logger="gpu_execution_pack.api"):
                began = time.monotonic()
                down = client.get("/readyz")
                elapsed = time.monotonic() - began
    finally:
        database.stop()
    assert down.status_code == 503, down.text
    assert down.json() == {"status": "not ready"}
    assert elapsed < READY_TIMEOUT_SECONDS + 2, elapsed
    (said,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("not ready")]
    assert said.startswith("not ready: the archive (archive.url) does not answer ("), said


@pytest.mark.single_version  # which archive file stays is our choice, whichever Prometheus answered
def test_a_complete_pass_with_nothing_to_archive_keeps_the_new_archive(tmp_path):
    """A failed pass removes the SQLite file it created (tests/test_cli.py); a complete one keeps it, records or
    not: the archive is up to date with what Prometheus holds."""
    empty = Prometheus(tmp_path / "empty")
    empty.start()
    try:
        new = tmp_path / "new.sqlite"
        done = subprocess.run(
            [sys.executable, "-m", "gpu_execution_pack", "archive", "--url", str(new), "--prometheus", empty.url],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
    finally:
        empty.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("archive: 0 archived, 0 unchanged"), done.stdout
    assert new.exists() and kept(str(new)) == []
