"""The report and the endpoint's answers from Prometheus, or from the archive where Prometheus no longer has
the execution (its samples left the retention) or no longer has its start.

Every answer says where it came from: ``source`` is ``prometheus`` or ``archive``; an archived one
also gives ``step``, the step its series were kept at. Tenant scoping and ``cluster`` hold on both
sources: a key scoped to a tenant reads only that tenant's records, and an id that several clusters
hold is a 409 unless ``cluster`` names one.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gpu_execution_pack import catalog
from gpu_execution_pack.archive.listing import Found, executions_in, still_held
from gpu_execution_pack.config import CLUSTER, Config, ConfigError, cluster_scope
from gpu_execution_pack.config.sections.archive import POSTGRES_URL_PREFIXES
from gpu_execution_pack.promql import parse_duration_seconds
from gpu_execution_pack.promql.durations import duration_text
from gpu_execution_pack.query.execution import ambiguous, held_by_tenants
from gpu_execution_pack.query.params import (
    Params,
    RequestError,
    Window,
    check_execution_id,
    iso,
    parse_cluster,
    parse_params,
    shown,
)
from gpu_execution_pack.query.prometheus import PrometheusClient
from gpu_execution_pack.report import document, html

if TYPE_CHECKING:  # the store needs SQLAlchemy (the archive extra); the readers run without it
    from gpu_execution_pack.archive.store import Record, Store

PROMETHEUS, ARCHIVE = "prometheus", "archive"
# The longest since the fleet view reads the archive over: ten years of records (a longer one is a typo).
MAX_ARCHIVE_SINCE_SECONDS = 10 * 365 * 86400
log = logging.getLogger("gpu_execution_pack.archive")
T = TypeVar("T")


def open_store(url: str) -> Store | None:
    """The archive at ``url`` for reading; None where none is configured, its SQLite file does not exist, or
    the archive extra is not installed (then, where there is an archive to miss, a warning says the answers come
    from Prometheus only: not for the default SQLite file of an install that never archived)."""
    if not url:
        return None
    try:
        from gpu_execution_pack.archive.store import Store
    except ImportError:
        if url.startswith(POSTGRES_URL_PREFIXES) or Path(url).expanduser().exists():
            log.warning("archive.url is set but the archive extra is not installed: reading Prometheus only")
        return None
    return Store.open(url, create=False)


# How often ``serve`` looks again for an archive's SQLite file that was not there: at most once in this many
# seconds, on a request that could read it (or /readyz), so a file's absence costs requests one clock read.
ARCHIVE_LOOK_AGAIN_SECONDS = 5.0


class ServedArchive:
    """The archive a long-running reader (``serve``) reads: opened at start where it is there. The archiver creates
    its SQLite file at its first pass, which may come after ``serve`` started; a file not there at start is looked
    for again (``current``) until it is, and read from then on, without a restart. Until then the routes read
    Prometheus only, as without an archive.

    A SQLite file replaced since it was opened (a restore from a backup moved into place) or removed is noticed the
    same way: the open store, which goes on reading the file it opened, is closed, and the file at the path read.

    A PostgreSQL archive, and one the archive extra cannot read, are not looked for again: the first is there or
    refused at start, the second read nowhere (``open_store``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.file: Path | None = None if not url or url.startswith(POSTGRES_URL_PREFIXES) else Path(url).expanduser()
        self.opened = file_identity(self.file)  # before opening: a file replaced meanwhile is seen as replaced
        self.store = open_store(url)
        self.awaited = self.store is None and self.file is not None and not self.file.exists()
        self.looked = time.monotonic()
        self.opening: asyncio.Future[None] | None = None
        self.unopened = ""  # why the file, there now, could not be opened (/readyz: not ready); "" where none

    async def current(self) -> Store | None:
        """The open store, or None: the file looked at again where ARCHIVE_LOOK_AGAIN_SECONDS have passed."""
        if self.opening is not None or time.monotonic() - self.looked < ARCHIVE_LOOK_AGAIN_SECONDS:
            return self.store
        self.looked = time.monotonic()
        if not self.awaited:
            if self.store is None or self.file is None or file_identity(self.file) == self.opened:
                return self.store
            log.info("the archive's file (archive.url) was replaced or removed: reading the file at its path")
            replaced, self.store, self.awaited = self.store, None, True
            replaced.close()
        if self.file is None or not self.file.exists():
            self.unopened = ""  # a file that could not be opened and is gone again is no longer an archive to miss
            return None
        # Opened in a worker thread (opening migrates the schema, which waits for the archiver's write lock): a
        # request cancelled meanwhile (its deadline) leaves the opening to finish; requests meanwhile read Prometheus.
        self.opening = asyncio.ensure_future(self.open_now())
        await asyncio.shield(self.opening)
        return self.store

    async def open_now(self) -> None:
        try:
            self.opened = file_identity(self.file)
            self.store = await asyncio.to_thread(open_store, self.url)
        except ConfigError as err:  # not SQLite, unreadable, or locked past the busy timeout: looked at again later
            self.unopened = str(err)
            log.warning("the archive's file exists now and cannot be opened: %s", err)
        else:
            self.awaited, self.unopened = False, ""
            if self.store is not None:
                log.info("the archive (archive.url) exists now: read beside Prometheus")
        finally:
            self.opening = None

    def close(self) -> None:
        if self.store is not None:
            self.store.close()


def file_identity(file: Path | None) -> tuple[int, int] | None:
    """The device and inode of ``file``: which file a path names, changed where another was moved into its place
    (a write in place keeps it, and SQLite reads such a write itself); None where there is none."""
    try:
        status = file.stat() if file is not None else None
    except OSError:
        return None
    return None if status is None else (status.st_dev, status.st_ino)


async def in_archive(work: Callable[..., T], *args: Any) -> T:
    """``work(*args)`` on the archive, in a worker thread; a database that does not answer (PostgreSQL stopped,
    the connection gone) is a 503 naming the archive, not a 500."""
    from gpu_execution_pack.archive.store import DATABASE_ERRORS, one_line  # the store is open: the extra is there

    try:
        return await asyncio.to_thread(work, *args)
    except DATABASE_ERRORS as err:
        log.warning("the archive does not answer: %s", one_line(err))
        raise RequestError(503, f"the archive does not answer ({one_line(err)[:200]}); try again later") from None


def seconds_of(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def archived_record(
    cfg: Config, store: Store | None, execution_id: str, tenant: str | None, cluster: str | None
) -> Record | None:
    """``archived`` on the archive (``in_archive``); None without an archive, read without the archive extra
    (SQLAlchemy): an install with the api extra alone has no archive and reports from Prometheus."""
    if store is None:
        return None
    return await in_archive(archived, cfg, store, execution_id, tenant, cluster)


def archived(
    cfg: Config, store: Store | None, execution_id: str, tenant: str | None, cluster: str | None
) -> Record | None:
    """The record of an execution id in ``tenant`` and ``cluster`` (None: any; tenant "": the GPUs without the
    tenant label): the latest start where the id was reused; None without an archive or a record; a 409 where
    several clusters hold it and none is named, or several tenants and none is named (as ``span`` answers)."""
    if store is None:
        return None
    found = store.find(execution_id, tenant, cluster)
    clusters = sorted({r.cluster for r in found})
    if cluster_scope(cfg).enabled and cluster is None and len(clusters) > 1:
        raise ambiguous(execution_id, cluster_scope(cfg).label, clusters)
    tenants = sorted({r.tenant for r in found})
    if tenant is None and len(tenants) > 1:  # the latest of them would be a guess at which one was asked for
        raise held_by_tenants(execution_id, cfg.api.tenant_label, tenants)
    return found[0] if found else None


def from_archive(record: Record, start: str | None, end: str | None) -> dict[str, Any]:
    """The archived report: its whole span only (the figures were judged once, over the whole run)."""
    if start is not None or end is not None:
        name = "start" if start is not None else "end"
        raise RequestError(
            400,
            f"{name}: the execution is read from the archive, whose report covers its whole run "
            f"({iso(record.start)} to {iso(record.end)}); accepted: no start or end",
        )
    return {**record.document, "source": ARCHIVE, "step": duration_text(record.step_seconds)}


async def execution_summary(
    cfg: Config,
    prometheus: PrometheusClient,
    store: Store | None,
    execution_id: str,
    start: str | None = None,
    end: str | None = None,
    tenant: str | None = None,
    cluster: str | None = None,
) -> dict[str, Any]:
    """``report.document.execution_summary`` with its ``source``; from the archive where Prometheus has no
    sample of the execution, or has lost the start of the run the archive holds."""
    check_execution_id(execution_id, re.compile(cfg.api.execution_id_pattern))
    try:
        answer = await document.execution_summary(cfg, prometheus, execution_id, start, end, tenant, cluster)
    except RequestError as err:
        found = err.status == 404 and await archived_record(cfg, store, execution_id, tenant, cluster)
        if not found:
            raise
        return from_archive(found, start, end)
    try:
        # The cluster Prometheus found the execution in (the answer names it): a record of another cluster is not
        # this run's, and asked over every cluster the archive would refuse where it holds the id in another one.
        record = await archived_record(cfg, store, execution_id, tenant, answer.get(CLUSTER) or cluster)
    except RequestError as err:
        if err.status != 409:
            raise
        # Prometheus holds one tenant's execution of the id; the archive more. Which record would be this one's
        # beginning is a guess: Prometheus' answer stands.
        record = None
    held_from = seconds_of(answer["start"])
    if (
        record is not None
        and start is None
        and record.start < held_from - record.step_seconds
        # The same run: the record reaches what Prometheus still holds. An earlier run of a reused id (or of
        # another tenant's, read with a key to every tenant) ended before it, and is not this one's beginning.
        and record.end >= held_from - catalog.LOOKBACK_SECONDS
    ):
        return from_archive(record, start, end)  # the archive holds more of the run than Prometheus still has
    return {**answer, "source": PROMETHEUS}


async def execution_page(
    cfg: Config,
    prometheus: PrometheusClient,
    store: Store | None,
    execution_id: str,
    start: str | None = None,
    end: str | None = None,
    tenant: str | None = None,
    cluster: str | None = None,
) -> str:
    """One execution's report as a page (``report.html``), from the source ``execution_summary`` answers from:
    Prometheus' series, or the record's (at the archive's step, without the alerts' intervals, which a record does
    not keep)."""
    doc = await execution_summary(cfg, prometheus, store, execution_id, start, end, tenant, cluster)
    if doc["source"] != ARCHIVE:
        grid, found, alerts = await html.read_series(cfg, prometheus, doc, tenant)
        return html.render_execution(cfg, doc, grid, found, alerts)
    record = await archived_record(cfg, store, execution_id, tenant, doc.get("cluster") or cluster)
    if record is None:  # the record went between the two reads
        raise RequestError(404, f"execution {execution_id!r} not found")
    grid, found = kept_lines(record)
    return html.render_execution(cfg, doc, grid, found, [])


def kept_lines(record: Record) -> tuple[list[float], dict[str, dict[str, list[list[float]]]]]:
    """A record's series as the page draws them: the grid, and series name -> line -> samples, every
    ``stride``-th point where the record holds more than a chart draws (``html.MAX_POINTS``)."""
    kept = record.series
    step = record.step_seconds
    points = round((kept["end"] - kept["start"]) / step) + 1
    stride = max(1, math.ceil(points / html.MAX_POINTS))
    grid = [kept["start"] + k * step for k in range(0, points, stride)]
    on_grid = set(grid)
    found: dict[str, dict[str, list[list[float]]]] = {}
    for answer in kept["answers"]:
        for r in answer:
            lines = found.setdefault(r["metric"]["__name__"], {})
            lines.setdefault(html.line_name(r["metric"]), []).extend(v for v in r["values"] if v[0] in on_grid)
    return grid, found


def archived_series(
    cfg: Config,
    store: Store | None,
    execution_id: str,
    start: str | None,
    end: str | None,
    step: str | None,
    tenant: str | None,
    series: str | None,
    cluster: str | None,
) -> tuple[Params, Window, list[list[dict[str, Any]]]] | None:
    """An archived execution's series as the endpoint assembles Prometheus' answers: the parameters, the grid
    (the record's, narrowed to ``start``..``end``) and the kept answers of the series asked for; None without a
    record. ``step`` may only be the record's (the series were kept at it, nothing finer is left)."""
    asked = parse_params(start, end, step, series, cluster, cluster_scope(cfg))
    record = archived(cfg, store, execution_id, tenant, asked.cluster)
    if record is None:
        return None
    kept = record.series
    if step is not None and asked.step != record.step_seconds:
        raise RequestError(
            400, f"step: {step!r}; the execution is read from the archive, kept at {kept['step']}; accepted: that step"
        )
    params = replace(asked, step=record.step_seconds, step_text=kept["step"], cluster=record.cluster or None)
    missing = [s.api_name for s in params.series if s.name not in kept["series"]]
    if missing:
        raise RequestError(404, f"series: {', '.join(missing)} not kept in the archived record of {execution_id!r}")
    first = kept["start"] if params.start is None else max(kept["start"], params.start)
    first = kept["start"] + math.ceil((first - kept["start"]) / params.step) * params.step  # on the kept grid
    last = kept["end"] if params.end is None else min(kept["end"], params.end)
    if last < first:
        raise RequestError(
            400, f"start..end: the archived execution ran {iso(record.start)} to {iso(record.end)}; accepted: within it"
        )
    names = {s.name for s in params.series}
    answers = [
        [
            {"metric": r["metric"], "values": [v for v in r["values"] if first <= v[0] <= last]}
            for r in answer
            if r["metric"].get("__name__") in names
        ]
        for answer in kept["answers"]
    ]
    return params, Window(first, first + (last - first) // params.step * params.step, params.step), answers


async def fleet_summary(
    cfg: Config,
    prometheus: PrometheusClient,
    store: Store | None,
    since: str = "7d",
    top: int = 20,
    tenant: str | None = None,
    cluster: str | None = None,
) -> dict[str, Any]:
    """``report.document.fleet_summary`` with the archived executions Prometheus no longer has: Prometheus ranks
    what it holds (over ``since``, at most ``api.lookback``), the archive adds the rest; each row says its source.
    Without an archive ``since`` is bounded by ``api.lookback`` as before."""
    try:
        window = parse_duration_seconds(since)
    except ValueError:
        raise RequestError(400, f"since: {shown(since)} is not a Prometheus duration such as 1d or 7d") from None
    lookback = parse_duration_seconds(cfg.api.lookback)
    # With an archive, since may reach past the lookback (docs/archive.md): the archive holds what Prometheus does
    # not. Without one, or a since out of every bound, Prometheus' path answers (and refuses, saying why).
    if store is None or not 1 <= window <= MAX_ARCHIVE_SINCE_SECONDS:
        answer = await document.fleet_summary(cfg, prometheus, since, top, tenant, cluster=cluster)
        return {**answer, "top": [{**row, "source": PROMETHEUS} for row in answer["top"]]}
    cluster = parse_cluster(cluster, cluster_scope(cfg))
    now = time.time()
    recent = since if window <= lookback else cfg.api.lookback
    answer = await document.fleet_summary(cfg, prometheus, recent, top, tenant, now, cluster)
    ranked = min(window, lookback)  # Prometheus' rows count the samples of this span before now
    held = set(await executions_in(cfg, prometheus, ranked, now))
    kept = await in_archive(store.ended_between, now - window, now, tenant, cluster)
    # An archived run is in Prometheus' row of its execution where Prometheus holds the execution in the window and
    # still holds that run; an earlier run of a reused id (Kubernetes Job names repeat), ended before what Prometheus
    # counts or past its retention, is a row of its own.
    runs = [(Found(r.cluster, r.tenant, r.execution_id), r.end) for r in kept]
    asked = [i for i, (found, end) in enumerate(runs) if found in held and end >= now - ranked]
    answers = await still_held(cfg, prometheus, [runs[i] for i in asked])
    counted = {i for i, yes in zip(asked, answers, strict=True) if yes}
    added = [fleet_row(cfg, r.document, r.tenant) for i, r in enumerate(kept) if i not in counted]
    rows = [{**row, "source": PROMETHEUS} for row in answer["top"]] + added
    rows.sort(key=lambda r: (-(r["gpuHoursWasted"] or 0), r["executionId"], r.get("cluster", ""), r["tenant"] or ""))
    billed = sum(r["gpuHoursBilled"] or 0 for r in added)
    wasted = sum(r["gpuHoursWasted"] or 0 for r in added)
    return {
        **answer,
        "since": since,
        "executions": answer["executions"] + len(added),
        "gpuHoursBilled": round(answer["gpuHoursBilled"] + billed, 4),
        "gpuHoursWasted": round(answer["gpuHoursWasted"] + wasted, 4),
        "top": rows[:top],
    }


def fleet_row(cfg: Config, doc: dict[str, Any], tenant: str) -> dict[str, Any]:
    """An archived execution's fleet row (``document.fleet_row``'s keys) from its report."""
    cost = doc["cost"]
    return {
        "executionId": doc["executionId"],
        **({"cluster": doc.get("cluster", "")} if cluster_scope(cfg).enabled else {}),
        "tenant": tenant or None,
        "gpus": doc["gpus"]["count"],
        "models": doc["gpus"]["models"],
        "gpuHoursBilled": cost["gpuHoursBilled"],
        "gpuHoursWorked": cost["gpuHoursWorked"],
        "gpuHoursWasted": cost["gpuHoursWasted"],
        "efficiencyPercent": cost["efficiencyPercent"],
        "energyKwh": doc["power"]["energyKwh"],
        "verdicts": [v["code"] for v in doc["verdicts"]],
        "source": ARCHIVE,
    }
