"""The archive's store on SQLite, without Prometheus: its schema version, the upsert by key, tenant scoping.

The end-to-end behaviour (the scenario library archived, on SQLite and a real PostgreSQL) is test_archive's.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
import sys

import pytest
import sqlalchemy as sa
from gpu_execution_pack.archive.store import MIGRATIONS, Record, Store, engine_url
from gpu_execution_pack.config import ConfigError


def record(execution_id: str = "job-1", tenant: str = "team-a", start: float = 1000.0, end: float = 2000.0) -> Record:
    return Record("", tenant, execution_id, start, end, 60.0, "test", {"executionId": execution_id}, {"step": "1m"})


@pytest.fixture
def store(tmp_path):
    opened = Store.open(str(tmp_path / "archive.sqlite"))
    assert opened is not None
    yield opened
    opened.close()


def test_a_new_archive_is_at_the_last_schema_version_and_opening_it_again_changes_nothing(tmp_path, store):
    path = tmp_path / "archive.sqlite"
    with sqlite3.connect(path) as conn:  # read with SQLite itself, not the code under test
        assert conn.execute("select version from schema_version").fetchall() == [(len(MIGRATIONS),)]
    again = Store.open(str(path))
    assert again is not None and again.migrate() == len(MIGRATIONS)
    again.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("select count(*) from schema_version").fetchone() == (1,)


def test_an_archive_another_process_creates_meanwhile_is_opened_not_refused(tmp_path):
    """Two processes opening a new SQLite archive at once (an archiver and a report, say): between one's check
    for the schema table and its CREATE, the other creates it. SQLite refuses the CREATE ("table ... already
    exists"); the store reads the tables again instead of failing."""
    path = tmp_path / "archive.sqlite"
    engine = sa.create_engine(engine_url(str(path)))
    created = []

    @sa.event.listens_for(engine, "before_cursor_execute")
    def the_other_process_first(conn, cursor, statement, *_args) -> None:
        if statement.lstrip().upper().startswith("CREATE TABLE SCHEMA_VERSION") and not created:
            with sqlite3.connect(path, timeout=0) as other:  # its own connection, committed before ours runs
                other.execute("create table schema_version (version integer not null)")
            created.append(statement)

    store = Store(engine)
    try:
        assert store.migrate() == len(MIGRATIONS)
    finally:
        store.close()
    assert created, "the race was not staged: no CREATE TABLE schema_version ran"
    with sqlite3.connect(path) as conn:
        assert conn.execute("select version from schema_version").fetchall() == [(len(MIGRATIONS),)]


def test_a_record_written_twice_is_kept_once_and_a_reappearing_id_updates_it(store):
    store.put(record())
    store.put(record())
    assert store.count() == 1
    store.put(record(end=3000.0))  # the same run reported again, for longer
    (kept,) = store.find("job-1")
    assert kept.end == 3000.0
    store.put(record(start=5000.0, end=6000.0))  # the id reused by a later run: a record of its own
    assert [r.start for r in store.find("job-1")] == [5000.0, 1000.0]  # latest first


def test_a_tenant_reads_only_its_own_records(store):
    store.put(record(tenant="team-a"))
    store.put(record(tenant="team-b", execution_id="job-2"))
    assert [r.execution_id for r in store.find("job-2", tenant="team-a")] == []
    assert [r.tenant for r in store.find("job-2", tenant="team-b")] == ["team-b"]
    assert {r.execution_id for r in store.ended_between(0, 10_000, tenant="team-a")} == {"job-1"}


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ({"tenant": "t" * 257}, "its tenant has 257 characters ('tttttttttttttttttttt'...); accepted: at most 256"),
        (
            {"execution_id": "j" * 513},
            "its execution id has 513 characters ('jjjjjjjjjjjjjjjjjjjj'...); accepted: at most 512",
        ),
    ],
    ids=["tenant", "execution_id"],
)
def test_a_key_longer_than_postgresqls_columns_is_refused_on_sqlite_too(store, key, reason):
    """PostgreSQL's varchar columns refuse a longer key; SQLite took it: the store refuses it on both, saying why."""
    with pytest.raises(ValueError, match=re.escape(reason)):
        store.put(dataclasses.replace(record(), **key))
    assert store.count() == 0
    store.put(dataclasses.replace(record(), tenant="t" * 256, execution_id="j" * 512))  # the longest kept
    assert store.count() == 1


def test_a_reader_does_not_create_an_archive(tmp_path):
    assert Store.open(str(tmp_path / "none.sqlite"), create=False) is None
    assert not (tmp_path / "none.sqlite").exists()


@pytest.mark.parametrize("url", ["mysql://host/db", "http://host/x"])
def test_an_unknown_database_url_names_the_key_and_what_is_accepted(url):
    with pytest.raises(ConfigError, match=r"^archive\.url: .* accepted: a SQLite file path or a postgresql:// URL"):
        engine_url(url)


def test_the_generated_unit_and_deployment_run_a_command_the_cli_accepts(tmp_path):
    import shlex

    import yaml
    from gpu_execution_pack.archive.deploy import deploy_files
    from gpu_execution_pack.cli import parser
    from gpu_execution_pack.config import config_from_mapping

    files = deploy_files(config_from_mapping({}), tmp_path, "gpu-execution-pack generate")
    unit = next(text for path, text in files.items() if path.suffix == ".service")
    (start,) = [line.removeprefix("ExecStart=") for line in unit.splitlines() if line.startswith("ExecStart=")]
    args = parser().parse_args(shlex.split(start)[1:])
    assert args.command == "archive" and args.follow and args.config
    manifest = next(text for path, text in files.items() if path.suffix == ".yaml")
    kinds = [d["kind"] for d in yaml.safe_load_all(manifest)]
    assert kinds == ["Deployment", "PersistentVolumeClaim"]  # the default archive is a SQLite file: a volume
    (deployment, _) = yaml.safe_load_all(manifest)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert parser().parse_args(container["args"]).command == "archive"
    on_postgres = deploy_files(
        config_from_mapping({"archive": {"url": "postgresql://archiver@db/archive"}}), tmp_path, "generate"
    )
    (manifest,) = [text for path, text in on_postgres.items() if path.suffix == ".yaml"]
    assert [d["kind"] for d in yaml.safe_load_all(manifest)] == ["Deployment"]


def test_a_follow_pass_reads_only_the_time_after_the_last_complete_pass():
    from gpu_execution_pack.archive.archiver import follow_window, watermark_after
    from gpu_execution_pack.config import config_from_mapping

    cfg = config_from_mapping({"archive": {"ended_after": "15m"}})
    since, first_at = 2 * 3600.0, 1_000_000.0
    assert follow_window(cfg, since, None, first_at) == since  # the first pass reads all of --since
    mark = watermark_after(cfg, first_at)
    assert mark == first_at - 15 * 60  # ended_after before the pass: later executions were still running then
    at = first_at + 300  # the next pass, 5 minutes on
    window = follow_window(cfg, since, mark, at)
    assert window == 20 * 60  # 5 minutes since the pass, and the 15 the pass left to later
    # Any execution with a sample after the mark (ended since, still running, or back under its id) is listed.
    last_sample = mark + 1
    assert at - window < last_sample
    # Passes that stopped for long read no more than --since.
    assert follow_window(cfg, since, mark, first_at + 86400) == since


def test_batches_hold_each_execution_once_and_an_id_once_per_batch():
    from gpu_execution_pack.archive.batch import Item, batches
    from gpu_execution_pack.archive.listing import Found
    from gpu_execution_pack.query.execution import Span

    # 30 executions of 3 tenants, ids 0-9 reused by every tenant, ending in turn.
    items = [
        Item(Found("", f"team-{t}", f"job-{i}"), Span(1000.0 * i, 1000.0 * i + 600 + t, False), 0.0)
        for t in range(3)
        for i in range(10)
    ]
    grouped = batches(items, 4)
    assert sorted(b.found for batch in grouped for b in batch) == sorted(i.found for i in items)
    for batch in grouped:
        assert 1 <= len(batch) <= 4
        ids = [b.found.execution_id for b in batch]
        assert len(ids) == len(set(ids)), f"an id twice in one batch: {ids}"
    # As few batches as the size allows (30 in fours), each of one tenant or two where one's run ends.
    assert len(grouped) == 8
    assert all(len({b.found.tenant for b in batch}) <= 2 for batch in grouped)
    # An id of one tenant next to the same id of another starts a new batch.
    clash = [Item(Found("", t, "job-0"), Span(0.0, 600.0, False), 0.0) for t in ("a", "b")]
    assert [len(b) for b in batches(clash, 4)] == [1, 1]


def test_without_the_archive_extra_only_an_archive_there_is_warned_about(
    tmp_path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    """An install without the archive extra reads Prometheus only. The default archive.url names a SQLite file
    that an install which never archived does not have: nothing to warn of on every report and query. An
    existing file or a PostgreSQL URL is an archive the answers leave out: that is said."""
    from gpu_execution_pack.archive import reader

    monkeypatch.setitem(sys.modules, "gpu_execution_pack.archive.store", None)  # as where SQLAlchemy is missing
    monkeypatch.chdir(tmp_path)
    with caplog.at_level("WARNING", logger="gpu_execution_pack.archive"):
        assert reader.open_store("gpu-execution-pack-archive.sqlite") is None
        assert not caplog.records
        (tmp_path / "gpu-execution-pack-archive.sqlite").write_bytes(b"")
        assert reader.open_store("gpu-execution-pack-archive.sqlite") is None
        assert reader.open_store("postgresql://archive@db.internal/gpu") is None
    assert [r.getMessage() for r in caplog.records] == [
        "archive.url is set but the archive extra is not installed: reading Prometheus only"
    ] * 2
