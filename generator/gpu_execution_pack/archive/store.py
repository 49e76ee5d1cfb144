"""The archive's store: one table of execution records in SQLite or PostgreSQL, through SQLAlchemy Core.

A record is keyed by (cluster, tenant, execution id, start): written with one upsert in its own
transaction, so a rerun, two archivers at once or an archiver killed mid-run leave each record once,
the old one or the new one. The schema is versioned: ``schema_version`` holds the number of the
last step of ``MIGRATIONS`` applied, and ``Store.open`` applies the later ones in order, under a lock
where the database has one (PostgreSQL's advisory lock; SQLite's write lock on the DDL).
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

from gpu_execution_pack.config import ConfigError
from gpu_execution_pack.config.loader import redacted
from gpu_execution_pack.config.sections.archive import POSTGRES_URL_PREFIXES

MIGRATION_LOCK = 0x67707561  # PostgreSQL advisory lock id held while migrating ("gpua")
SQLITE_BUSY_SECONDS = 60  # how long a SQLite writer waits for another's lock before failing
MIGRATE_ATTEMPTS = 3  # two processes creating the tables at once: the loser retries on the created ones

DATABASE_ERRORS = (sa.exc.OperationalError, sa.exc.InterfaceError)  # the database unreachable or gone away
metadata = sa.MetaData()
schema_version = sa.Table("schema_version", metadata, sa.Column("version", sa.Integer, nullable=False))
records = sa.Table(
    "execution_records",
    metadata,
    sa.Column("cluster", sa.String(256), primary_key=True),  # "" without a cluster label
    sa.Column("tenant", sa.String(256), primary_key=True),  # "" for series without the tenant label
    sa.Column("execution_id", sa.String(512), primary_key=True),
    sa.Column("start_ms", sa.BigInteger, primary_key=True),  # the first sample, unix milliseconds
    sa.Column("end_ms", sa.BigInteger, nullable=False),  # the last sample
    sa.Column("archived_ms", sa.BigInteger, nullable=False),
    sa.Column("pack_version", sa.String(64), nullable=False),
    sa.Column("step_seconds", sa.Float, nullable=False),  # the step of the kept series
    sa.Column("document", sa.Text, nullable=False),  # the report's JSON document
    sa.Column("series", sa.LargeBinary, nullable=False),  # zlib of the served series' JSON at step_seconds
    sa.Index("ix_execution_records_end", "end_ms"),
    sa.Index("ix_execution_records_id", "execution_id"),
)


# The key's text columns and the most characters each keeps: PostgreSQL refuses a longer value (varchar), SQLite
# would keep it. A key over them is refused on both (``refused_key``) rather than widened to text, because: the
# readers never ask for it (the endpoint, report and query refuse an id, tenant or cluster over 256 characters), so
# its record could not be read back; a text key would only move PostgreSQL's refusal further (its primary key
# index takes about 2.7 kB a row); and archives written already keep their schema, with no migration to apply.
KEY_LENGTHS = {"cluster": "cluster", "tenant": "tenant", "execution_id": "execution id"}


def refused_key(cluster: str, tenant: str, execution_id: str, readers_id_length: int | None = None) -> str | None:
    """Why the archive keeps no record under this key (a value longer than its column), None where it does: the
    same answer on SQLite and PostgreSQL. ``readers_id_length``: the longest id its readers ask for, where shorter
    than the column (a record of a longer one could never be read back)."""
    for column, value in (("cluster", cluster), ("tenant", tenant), ("execution_id", execution_id)):
        most = records.c[column].type.length
        if column == "execution_id" and readers_id_length is not None:
            most = min(most, readers_id_length)
        if len(value) > most:
            what, shown = KEY_LENGTHS[column], execution_id if len(execution_id) <= 60 else f"{execution_id[:60]}..."
            return (
                f"execution {shown!r} not archived: its {what} has {len(value)} characters ({value[:20]!r}...); "
                f"accepted: at most {most} characters"
            )
    return None


def create_v1(conn: Connection) -> None:
    metadata.create_all(conn, tables=[records], checkfirst=True)


# Ordered schema steps: step k (1-based) moves the schema from version k-1 to k. Append, never edit.
MIGRATIONS: tuple[Callable[[Connection], None], ...] = (create_v1,)


@dataclass(frozen=True)
class Record:
    """One ended execution as archived: its key, span, the report's document and the series' JSON."""

    cluster: str
    tenant: str
    execution_id: str
    start: float  # unix seconds
    end: float
    step_seconds: float
    pack_version: str
    document: dict[str, Any]
    series: dict[str, Any]

    def row(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "tenant": self.tenant,
            "execution_id": self.execution_id,
            "start_ms": round(self.start * 1000),
            "end_ms": round(self.end * 1000),
            "archived_ms": round(time.time() * 1000),
            "pack_version": self.pack_version,
            "step_seconds": self.step_seconds,
            "document": json.dumps(self.document, sort_keys=True, separators=(",", ":")),
            "series": zlib.compress(json.dumps(self.series, separators=(",", ":")).encode(), 6),
        }


def record_of(row: Any) -> Record:
    """The record a row holds; its series empty where the query left them out (``Store.ended_between``)."""
    series = getattr(row, "series", None)
    return Record(
        row.cluster,
        row.tenant,
        row.execution_id,
        row.start_ms / 1000,
        row.end_ms / 1000,
        row.step_seconds,
        row.pack_version,
        json.loads(row.document),
        {} if series is None else json.loads(zlib.decompress(series)),
    )


def engine_url(url: str, source: str = "archive.url") -> str:
    """SQLAlchemy's URL for the config's ``archive.url`` (or the option named ``source`` that gave it): a PostgreSQL
    URL (on psycopg 3), else a SQLite file."""
    if url.startswith(POSTGRES_URL_PREFIXES):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if "://" in url:
        raise ConfigError(f"{source}: {url!r} is not accepted; accepted: a SQLite file path or a postgresql:// URL")
    return f"sqlite:///{Path(url).expanduser()}"


class Store:
    """An open archive: ``Store.open(url)`` (migrated to the current schema), then put and read records."""

    def __init__(self, engine: Engine, created: Path | None = None):
        self.engine = engine
        self.created = created  # the SQLite file this store's opening created (None: it existed, or PostgreSQL)

    @classmethod
    def open(cls, url: str, create: bool = True, source: str = "archive.url") -> Store | None:
        """The archive at ``url``, migrated; None where it is a SQLite file that does not exist and ``create``
        is False (a reader does not create an archive nobody writes). Errors name ``source``, the key or option
        that gave the URL."""
        if not url:
            return None
        target = engine_url(url, source)
        file = Path(target.removeprefix("sqlite:///")) if target.startswith("sqlite") else None
        if file is not None and not create and not file.exists():
            return None
        try:
            engine = sa.create_engine(target, **engine_options(target))
        except ImportError as err:
            raise ConfigError(f"{source}: {err}; install the archive extra: pip install '.[archive]'") from None
        store = cls(engine, file if file is not None and not file.exists() else None)
        try:
            store.migrate()
        except (sa.exc.OperationalError, sa.exc.DatabaseError) as err:  # DatabaseError: a file that is no SQLite
            engine.dispose()
            raise ConfigError(f"{source}: cannot open the archive {redacted(url)!r} ({one_line(err)})") from None
        return store

    def close(self) -> None:
        self.engine.dispose()

    def close_and_remove_if_new_and_empty(self) -> bool:
        """Close; then remove the SQLite file that opening this store created, where it holds no record (a pass
        that failed before writing any: it would be left a schema alone). Whether it was removed. (Another archiver
        that opened the new file meanwhile and wrote to it after the count would lose that write: two archivers
        creating one file at once, one of them failing, is what that takes.)"""
        try:
            empty = self.created is not None and self.created.exists() and self.count() == 0
        except DATABASE_ERRORS:  # unreadable now: kept, as a file that may hold records
            empty = False
        self.close()
        if not empty or self.created is None:
            return False
        for leftover in ("", "-journal", "-wal", "-shm"):
            Path(f"{self.created}{leftover}").unlink(missing_ok=True)
        return True

    def version(self, conn: Connection) -> int:
        return conn.execute(sa.select(sa.func.max(schema_version.c.version))).scalar() or 0

    def migrate(self) -> int:
        """Apply the migration steps the database has not had; the schema's version after."""
        for attempt in range(MIGRATE_ATTEMPTS):
            try:
                with self.engine.begin() as conn:
                    if conn.dialect.name == "postgresql":
                        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(MIGRATION_LOCK)))
                    metadata.create_all(conn, tables=[schema_version], checkfirst=True)
                    done = self.version(conn)
                    for number, step in enumerate(MIGRATIONS[done:], start=done + 1):
                        step(conn)
                        conn.execute(schema_version.delete())
                        conn.execute(schema_version.insert().values(version=number))
                    return max(done, len(MIGRATIONS))
            except (sa.exc.IntegrityError, sa.exc.ProgrammingError, sa.exc.OperationalError) as err:
                # Another process created the tables between our check and our CREATE (PostgreSQL: a duplicate
                # table or key; SQLite: "table ... already exists", an OperationalError): read them again.
                created_meanwhile = not isinstance(err, sa.exc.OperationalError) or "already exists" in str(err)
                if not created_meanwhile or attempt == MIGRATE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def put(self, record: Record) -> None:
        """Insert the record, or replace the one with its key: one statement, one transaction. A key longer than
        the archive keeps (``refused_key``) is a ValueError, on SQLite as on PostgreSQL."""
        if reason := refused_key(record.cluster, record.tenant, record.execution_id):
            raise ValueError(reason)
        row = record.row()
        insert = postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert
        keys = [c.name for c in records.primary_key.columns]
        statement = (
            insert(records)
            .values(**row)
            .on_conflict_do_update(index_elements=keys, set_={k: v for k, v in row.items() if k not in keys})
        )
        with self.engine.begin() as conn:
            conn.execute(statement)

    def end_of(self, cluster: str, tenant: str, execution_id: str, start: float) -> float | None:
        """The archived end of the record with this key, None if there is none."""
        c = records.c
        query = sa.select(c.end_ms).where(
            c.cluster == cluster, c.tenant == tenant, c.execution_id == execution_id, c.start_ms == round(start * 1000)
        )
        with self.engine.connect() as conn:
            end_ms = conn.execute(query).scalar()
        return None if end_ms is None else end_ms / 1000

    def find(self, execution_id: str, tenant: str | None = None, cluster: str | None = None) -> list[Record]:
        """The records of an execution id, in ``tenant`` and ``cluster`` (None: any), latest start first."""
        c = records.c
        query = sa.select(records).where(c.execution_id == execution_id)
        yield_rows = self._rows(query, tenant, cluster, c.start_ms.desc())
        return [record_of(r) for r in yield_rows]

    def ended_between(
        self, start: float, end: float, tenant: str | None = None, cluster: str | None = None
    ) -> list[Record]:
        """The records whose execution's span meets [start, end], of ``tenant`` and ``cluster`` (None: any), without
        their series: the fleet view reads the documents alone, and a year's executions' series (each the whole
        run's metrics) held at once would be gigabytes."""
        c = records.c
        documents = sa.select(*(column for column in c if column.name != "series"))
        query = documents.where(c.end_ms >= round(start * 1000), c.start_ms <= round(end * 1000))
        return [record_of(r) for r in self._rows(query, tenant, cluster, c.end_ms)]

    def ping(self) -> None:
        """Ask the database the least query there is: a DATABASE_ERRORS error where it does not answer."""
        with self.engine.connect() as conn:
            conn.execute(sa.select(1))

    def count(self) -> int:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(sa.func.count()).select_from(records)).scalar() or 0

    def _rows(self, query: sa.Select, tenant: str | None, cluster: str | None, order: Any) -> Iterator[Any]:
        c = records.c
        if tenant is not None:
            query = query.where(c.tenant == tenant)
        if cluster is not None:
            query = query.where(c.cluster == cluster)
        with self.engine.connect() as conn:
            yield from conn.execute(query.order_by(order))


def one_line(err: BaseException) -> str:
    """A database error's message on one line (psycopg's span several)."""
    return " ".join(str(getattr(err, "orig", None) or err).split())


def engine_options(target: str) -> dict[str, Any]:
    """SQLite waits for another writer's lock instead of failing at once; PostgreSQL checks a pooled
    connection before use (a restarted server)."""
    if target.startswith("sqlite"):
        return {"connect_args": {"timeout": SQLITE_BUSY_SECONDS}}
    return {"pool_pre_ping": True}
