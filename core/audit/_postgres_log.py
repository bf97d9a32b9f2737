"""The fleet's audit log: one hash chain in PostgreSQL, appended by many processes and hosts."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from jevqueue.audit._record import (
    GENESIS_HASH,
    AuditRecord,
    canonical_record_bytes,
    json_string_list,
)
from jevqueue.audit._sink import ChainedAuditLog
from jevqueue.audit._sqlite_log import COLUMNS
from jevqueue.db._connection import database_url, driver, open_pool, quoted_schema, redacted
from jevqueue.db._failure_cause import failure_cause
from jevqueue.db._migrations import DEFAULT_SCHEMA, check_schema
from jevqueue.errors import AuditReadError, AuditWriteError, ConfigurationError

__all__ = ["PostgresAuditLog", "read_postgres_log"]

# append_records' parameters: the split canonical JSON, then the columns but seq and hashes.
_APPEND_TYPES = ("bytea[]", "bytea[]", *("text[]" for _ in range(14)), "boolean[]")


class _Pending:
    """One caller's record waiting for the next group commit."""

    __slots__ = ("error", "record", "written")

    def __init__(self, record: AuditRecord) -> None:
        self.record = record
        self.written: AuditRecord | None = None
        self.error: AuditWriteError | None = None


class PostgresAuditLog(ChainedAuditLog):
    """Hash-chained decision records in PostgreSQL: one chain for a whole fleet.

    The records, their columns and their hashes are exactly those of
    :class:`~jevqueue.audit.SQLiteAuditLog`, so :func:`~jevqueue.audit.verify_audit_log`
    (``jevqueue audit verify postgresql://...``) checks both the same way, and
    ``jevqueue audit export`` turns either into a verifiable JSONL file.

    **One chain, whoever writes.** An append is one statement, the schema's
    ``append_records`` function: it runs as the schema's owner (``SECURITY DEFINER``, with
    a fixed ``search_path``), so a worker needs no right to write the tables and cannot put
    a row anywhere but at the end of the chain. It locks the single ``audit_head`` row
    (``SELECT ... FOR UPDATE``), hashes each record onto the one before it (this side sends
    each record's canonical JSON split around its ``prev_hash``, and checks every hash the
    server returns), inserts the records and moves the head. Every writer on every host
    queues on that row lock, so records form one chain with neither forks nor gaps; a
    statement that fails, or whose connection drops, leaves nothing behind (PostgreSQL
    rolls it back), and the head is never read before it is committed. The lock is held
    only inside the server, never across a round trip to the client.

    **Durable before the call runs.** The appending transaction commits without waiting for
    the flush (so the lock is released at once); :meth:`append` then commits a write of the
    server process's own ``audit_flush`` row (by the owner's ``flush_appends`` function)
    synchronously (``synchronous_commit = on``), which returns once the WAL — one
    sequence — is flushed past the record (on the server, and on synchronous standbys when
    configured). Only then does :meth:`append` return. A
    crash before that loses a suffix of records no caller was told were written, never one
    in the middle. Any failure — the server unreachable, a dropped connection, a statement
    or lock timeout, a full disk, a failover — raises
    :class:`~jevqueue.errors.AuditWriteError`, which the PEP turns into a denial. If the
    connection drops after the append committed, the record may be stored although the
    call is denied: the log can hold a decision that did not take effect, never lack one
    that did.

    **Group commit.** Concurrent writers share flushes: the server flushes the WAL once
    for every commit written before the flush. Threads sharing one log object also share
    one statement: the first caller becomes the leader and appends every record that
    arrived while the previous append was being flushed (at most ``max_batch``); the
    others wait for it.

    **Recovery.** Connections come from a :class:`psycopg_pool.ConnectionPool` that drops
    broken connections and reconnects in the background, so once the database is back the
    next append succeeds without a restart of the worker. A forked child opens its own pool.

    The schema must have been created with :func:`jevqueue.db.migrate`
    (``jevqueue db migrate``); it is checked on the first append. The database user needs
    ``USAGE`` on the schema, ``SELECT`` on ``audit_log``, ``audit_head`` and
    ``schema_version``, and ``EXECUTE`` on ``append_records`` and ``flush_appends`` — no
    more (see docs/deployment.md).

    Args:
        url: a libpq connection string; default ``$JEVQUEUE_DATABASE_URL``.
        schema: the schema holding jevqueue's tables.
        statement_timeout: seconds any statement (a wait for the head's lock included) may
            take before the append fails.
        connect_timeout: seconds to wait for a connection before the append fails.
        max_batch: the most records one group commit writes.
        pool_size: the most connections this object opens.

    Raises:
        ConfigurationError: no URL, a malformed one, or impossible settings.
        ImportError: the ``postgres`` extra is missing.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        schema: str = DEFAULT_SCHEMA,
        statement_timeout: float = 5.0,
        connect_timeout: float = 5.0,
        max_batch: int = 256,
        pool_size: int = 4,
    ) -> None:
        self.url = database_url(url)
        quoted_schema(schema)
        if not statement_timeout > 0 or not connect_timeout > 0:
            raise ConfigurationError("statement_timeout and connect_timeout must be positive")
        if (
            type(max_batch) is not int
            or max_batch < 1
            or type(pool_size) is not int
            or (pool_size < 1)
        ):
            raise ConfigurationError("max_batch and pool_size must be positive integers")
        self.schema = schema
        self.statement_timeout = statement_timeout
        self.connect_timeout = connect_timeout
        self.max_batch = max_batch
        self.pool_size = pool_size
        self.path = redacted(self.url)
        s = quoted_schema(schema)
        self._append = (
            f"SELECT out_seq, out_prev, out_hash FROM {s}.append_records("
            + ", ".join(f"%s::{kind}" for kind in _APPEND_TYPES)
            + ")"
        )
        self._lookup = (
            f"SELECT seq, prev_hash, record_hash FROM {s}.audit_log "
            "WHERE decision_id = ANY(%s) ORDER BY seq"
        )
        self._flush = _FLUSH.format(s=s)
        self._count = f"SELECT count FROM {s}.audit_head WHERE id = 0"
        self._psycopg, _ = driver()
        self._mutex = threading.Lock()
        self._wake = threading.Condition(self._mutex)
        self._queue: list[_Pending] = []
        self._leading = False
        self._closed = False
        self._schema_checked = False
        self._pid = os.getpid()
        self._pool: Any = None
        self._abandoned: list[Any] = []

    # --- connections ------------------------------------------------------------------

    def _pool_now(self) -> Any:
        if self._closed:
            raise AuditWriteError(
                f"the audit log {self.path} is closed; open a new PostgresAuditLog"
            )
        if self._pool is not None and self._pid != os.getpid():
            # A forked child must not talk over its parent's sockets; keep the parent's pool
            # referenced so that collecting it never closes them from here.
            self._abandoned.append(self._pool)
            self._pool = None
        if self._pool is None:
            self._pid = os.getpid()
            self._pool = open_pool(
                self.url,
                name=f"audit-{self.schema}",
                max_size=self.pool_size,
                connect_timeout=self.connect_timeout,
                statement_timeout=self.statement_timeout,
            )
        return self._pool

    def _connection(self) -> Any:
        pool = self._pool_now()
        try:
            connection = pool.getconn(timeout=self.connect_timeout)
        except Exception as error:
            raise self._failure("cannot reach the database", error) from error
        if not self._schema_checked:
            try:
                check_schema(connection, self.url, self.schema)
            except ConfigurationError as error:
                pool.putconn(connection)
                raise AuditWriteError(
                    f"{error}; until then no decision can be recorded and every call is denied"
                ) from error
            except Exception as error:
                pool.putconn(connection)
                raise self._failure("cannot read the schema version", error) from error
            self._schema_checked = True
        return connection

    def _failure(self, what: str, error: BaseException) -> AuditWriteError:
        return AuditWriteError(
            f"the audit log {self.path}: {what} ({failure_cause(error)}); the decision was "
            "not recorded and its call is denied"
        )

    # --- appending --------------------------------------------------------------------

    def append(self, event: Mapping[str, Any]) -> AuditRecord:
        """Chain one decision event and store it, committed, before returning.

        Raises:
            AuditWriteError: the event is malformed, or the record could not be committed
                (the call is denied).
        """
        # Checked and completed (decision id, timestamp) in the caller's thread, so one
        # malformed event fails alone and not the group commit it would have joined.
        pending = _Pending(AuditRecord.chained(event, GENESIS_HASH))
        with self._wake:
            if self._closed:
                raise AuditWriteError(
                    f"the audit log {self.path} is closed; open a new PostgresAuditLog"
                )
            self._queue.append(pending)
            while self._leading and pending.written is None and pending.error is None:
                self._wake.wait()
            if pending.written is not None:
                return pending.written
            if pending.error is not None:
                raise pending.error
            self._leading = True
        try:
            while pending.written is None and pending.error is None:
                with self._wake:
                    batch = self._queue[: self.max_batch]
                    del self._queue[: self.max_batch]
                try:
                    written = self._write(batch)
                except AuditWriteError as error:
                    for item in batch:
                        item.error = error
                except BaseException as error:  # interrupted: nobody may run on this batch
                    failure = self._failure("the write was interrupted", error)
                    for item in batch:
                        item.error = failure
                    raise
                else:
                    for item, record in zip(batch, written, strict=True):
                        item.written = record
                with self._wake:
                    self._wake.notify_all()
        finally:
            with self._wake:  # hand over: a waiting caller whose record is queued leads next
                self._leading = False
                self._wake.notify_all()
        if pending.error is not None:
            raise pending.error
        assert pending.written is not None
        return pending.written

    def _write(self, batch: list[_Pending]) -> list[AuditRecord]:
        """Append ``batch`` in one server-side transaction, then make it durable.

        The canonical JSON of each record is built here, split around its ``prev_hash``;
        the server's ``append_records`` locks the head, hashes each record onto the one
        before, inserts them and moves the head in one statement, so the head's lock is
        held for microseconds rather than across round trips to a busy client. Each hash
        the server computed is checked here against the record it describes.

        A pooled connection the server dropped while idle (a restart, a failover,
        ``pg_terminate_backend``) is replaced and the append tried once more — after
        looking the batch's decision ids up, so a batch that did commit before its
        connection died is never stored twice.
        """
        psycopg = self._psycopg
        arrays: list[list[Any]] = [[] for _ in range(17)]
        for item in batch:
            for column, value in zip(arrays, _parts(item.record), strict=True):
                column.append(value)
        ids = arrays[2]
        for attempt in (1, 2):
            connection = self._connection()
            pool = self._pool
            try:
                cursor = connection.cursor()
                rows: list[Any] = []
                if attempt == 2:
                    cursor.execute(self._lookup, (ids,))
                    rows = cursor.fetchall()
                if not rows:
                    cursor.execute(self._append, arrays)
                    rows = cursor.fetchall()
                records = self._checked(batch, rows)
                cursor.execute(self._flush)
            except AuditWriteError:
                pool.putconn(connection)
                raise
            except psycopg.OperationalError as error:
                broken = connection.closed or connection.broken
                pool.putconn(connection)
                if attempt == 2 or not broken:
                    raise self._failure("the write failed", error) from error
                try:
                    pool.check()
                except Exception as check_error:
                    raise self._failure("the write failed", error) from check_error
                continue
            except psycopg.Error as error:
                pool.putconn(connection)
                raise self._failure("the write failed", error) from error
            except BaseException:
                connection.close()  # interrupted mid-statement: never hand it back
                pool.putconn(connection)
                raise
            pool.putconn(connection)
            return records
        raise AssertionError("unreachable")  # pragma: no cover

    def _checked(self, batch: list[_Pending], rows: list[Any]) -> list[AuditRecord]:
        """The stored records, each hash the server computed checked against its record."""
        if len(rows) != len(batch):
            raise AuditWriteError(
                f"the audit log {self.path} stored {len(rows)} of {len(batch)} records (a "
                "batch is stored whole or not at all: is the schema damaged? run `jevqueue "
                "audit verify`); the calls are denied"
            )
        records: list[AuditRecord] = []
        for item, (_, previous, stored_hash) in zip(batch, rows, strict=True):
            record = AuditRecord.chained(item.record.to_dict(), previous)
            if record.record_hash != stored_hash:
                raise AuditWriteError(
                    f"the audit log {self.path} stored record {record.decision_id} under the "
                    f"hash {stored_hash}, not {record.record_hash}: the server's "
                    "append_records function was altered; run `jevqueue audit verify`. The "
                    "call is denied"
                )
            records.append(record)
        return records

    # --- reading ----------------------------------------------------------------------

    def records(self) -> Iterator[AuditRecord]:
        """Yield the stored records in chain order (oldest first).

        Raises:
            AuditReadError: the database cannot be read.
        """
        from jevqueue.audit._sqlite_log import row_to_record

        rows, _ = read_postgres_log(self.url, schema=self.schema)
        for row in rows:
            yield row_to_record(row)

    def __len__(self) -> int:
        psycopg = self._psycopg
        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as connection:
                row = connection.execute(self._count).fetchone()
        except psycopg.Error as error:
            raise AuditReadError(
                f"cannot read the audit log {self.path} ({failure_cause(error)})"
            ) from error
        return 0 if row is None else int(row[0])

    def close(self) -> None:
        """Close the pool; later appends raise :class:`AuditWriteError`."""
        with self._wake:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            pool.close()


# The durability step after an asynchronously committed chaining transaction: a write of
# this server process's own row (so writers never contend for it), by the schema owner's
# flush_appends function, in a transaction that commits synchronously (the session's
# setting; the function sets nothing but its search_path). It returns once the WAL is
# flushed — on the primary, and on synchronous standbys when configured — up to its own
# commit record, which lies after the chaining transaction's. WAL is one sequence, so the
# record is durable then; and concurrent writers share flushes (one flush covers every
# commit written before it).
# Should the server crash before the flush, the chaining transaction and every one after it
# are lost together: the chain loses a suffix of unacknowledged records, never a middle.
_FLUSH = "SELECT {s}.flush_appends()"


_PREV_KEY = b',"prev_hash":"'
_PREV_MARK = _PREV_KEY + GENESIS_HASH.encode("ascii") + b'"'


def _parts(record: AuditRecord) -> tuple[Any, ...]:
    """The ``append_records`` arguments for ``record``, whose ``prev_hash`` is the genesis.

    Its canonical JSON is split around the value of ``prev_hash``: the server hashes
    ``prefix + prev_hash + suffix``. In canonical JSON a quote inside a value is escaped,
    so the unescaped ``,"prev_hash":"`` occurs exactly once, as the key.
    """
    text = canonical_record_bytes(record.to_dict())
    cut = text.index(_PREV_MARK)
    return (
        text[: cut + len(_PREV_KEY)],
        text[cut + len(_PREV_MARK) - 1 :],
        *_row(0, record)[1:-2],
    )


def _row(seq: int, record: AuditRecord) -> tuple[Any, ...]:
    return (
        seq,
        record.decision_id,
        record.timestamp,
        record.action_digest,
        record.tool,
        record.result,
        json_string_list(record.reasons),
        json_string_list(record.obligations),
        json_string_list(record.rule_ids),
        record.policy_revision,
        record.task_id,
        record.actor_id,
        record.environment,
        record.workspace,
        record.git_sha,
        record.allowed,
        record.prev_hash,
        record.record_hash,
    )


def read_postgres_log(
    url: str, *, schema: str = DEFAULT_SCHEMA
) -> tuple[list[tuple[Any, ...]], tuple[int, str] | None]:
    """Read every ``audit_log`` row (in :data:`COLUMNS` order, by ``seq``) and the head.

    Both are read in one repeatable-read snapshot, so a log being appended to is seen as
    of one instant: rows and head agree.

    Raises:
        AuditReadError: the database cannot be reached or holds no jevqueue audit log.
    """
    target = redacted(url)
    s = quoted_schema(schema)
    psycopg, _ = driver()
    try:
        with psycopg.connect(url, autocommit=False, connect_timeout=10) as connection:
            connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            found = connection.execute(
                "SELECT to_regclass(%s), to_regclass(%s)",
                (f"{s}.audit_log", f"{s}.audit_head"),
            ).fetchone()
            if found is None or found[0] is None:
                raise AuditReadError(
                    f"{target} has no jevqueue audit log in schema {schema!r}: check the URL "
                    "and --schema, or create it with `jevqueue db migrate`"
                )
            rows = connection.execute(
                f"SELECT {', '.join(COLUMNS)} FROM {s}.audit_log ORDER BY seq"
            ).fetchall()
            head_row = (
                connection.execute(
                    f"SELECT count, record_hash FROM {s}.audit_head WHERE id = 0"
                ).fetchone()
                if found[1] is not None
                else None
            )
            connection.rollback()
    except psycopg.Error as error:
        raise AuditReadError(
            f"cannot read the audit log {target} ({failure_cause(error)}): check the "
            "connection string and that the server is up"
        ) from error
    head = None if head_row is None else (int(head_row[0]), str(head_row[1]))
    return [tuple(row) for row in rows], head
