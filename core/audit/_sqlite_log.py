"""The default audit log: one SQLite row per decision, hash-chained, shared by processes."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from jevqueue.audit._record import (
    GENESIS_HASH,
    AuditRecord,
    json_string_list,
    plain_list,
    plain_record_hash,
)
from jevqueue.audit._sink import ChainedAuditLog
from jevqueue.errors import AuditReadError, AuditWriteError, ConfigurationError

__all__ = ["SQLiteAuditLog"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS audit_log (
    seq             INTEGER PRIMARY KEY,
    decision_id     TEXT NOT NULL,
    timestamp       TEXT NOT NULL,
    action_digest   TEXT NOT NULL,
    tool            TEXT NOT NULL,
    result          TEXT NOT NULL,
    reasons         TEXT NOT NULL,
    obligations     TEXT NOT NULL,
    rule_ids        TEXT NOT NULL,
    policy_revision TEXT NOT NULL,
    task_id         TEXT NOT NULL,
    actor_id        TEXT NOT NULL,
    environment     TEXT NOT NULL,
    workspace       TEXT NOT NULL,
    git_sha         TEXT NOT NULL,
    allowed         INTEGER NOT NULL,
    prev_hash       TEXT NOT NULL,
    record_hash     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS audit_head (
    id          INTEGER PRIMARY KEY CHECK (id = 0),
    count       INTEGER NOT NULL,
    record_hash TEXT NOT NULL
);
"""
COLUMNS = (
    "seq",
    "decision_id",
    "timestamp",
    "action_digest",
    "tool",
    "result",
    "reasons",
    "obligations",
    "rule_ids",
    "policy_revision",
    "task_id",
    "actor_id",
    "environment",
    "workspace",
    "git_sha",
    "allowed",
    "prev_hash",
    "record_hash",
)
_INSERT = f"INSERT INTO audit_log ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
_HEAD = "SELECT count, record_hash FROM audit_head WHERE id = 0"
_MOVE_HEAD = "UPDATE audit_head SET count = ?, record_hash = ? WHERE id = 0"
# One statement appends a record: the row is inserted only while the stored head is the
# record's prev_hash (so a writer whose cached head is stale inserts nothing and retries),
# its seq is the head's count, and a trigger on this connection moves the head in the same
# statement, hence the same transaction. The trigger is TEMP: the file's schema is unchanged,
# and other connections (other processes, older writers) are not affected by it.
_APPEND = (
    f"INSERT INTO audit_log ({', '.join(COLUMNS)}) SELECT count, "
    f"{', '.join('?' * (len(COLUMNS) - 1))} FROM audit_head WHERE id = 0 AND record_hash = ?"
)
_HEAD_TRIGGER = """
CREATE TEMP TRIGGER IF NOT EXISTS jevqueue_audit_head AFTER INSERT ON main.audit_log
BEGIN
    UPDATE audit_head SET count = NEW.seq + 1, record_hash = NEW.record_hash WHERE id = 0;
END
"""


# Each durability setting as SQLite's synchronous level (WAL mode).
_SYNCHRONOUS = {"machine": "FULL", "process": "NORMAL"}

# How many forks this process is away from the one that imported this module: a handle
# opened in a parent must not be used in a child. Counted at fork time, so the check on
# every append costs no system call.
_forks = 0


def _count_fork() -> None:
    global _forks
    _forks += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_count_fork)


def _is_busy(error: sqlite3.OperationalError) -> bool:
    """Whether ``error`` is SQLite's "database is locked" (or "is busy")."""
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (any extended code)
    text = str(error)
    return "database is locked" in text or "database is busy" in text or "is locked" in text


def row_to_record(row: tuple[Any, ...]) -> AuditRecord:
    """Turn an ``audit_log`` row (in :data:`COLUMNS` order) into a record.

    Raises:
        ValueError: a column holds something no writer of this log produces.
    """
    data = dict(zip(COLUMNS[1:], row[1:], strict=True))
    for name in ("reasons", "obligations", "rule_ids"):
        data[name] = json.loads(data[name])
    if data["allowed"] not in (0, 1):
        raise ValueError("column 'allowed' is neither 0 nor 1")
    data["allowed"] = bool(data["allowed"])
    return AuditRecord.from_dict(data)


def _row(record: AuditRecord) -> tuple[Any, ...]:
    """The :data:`_APPEND` parameters for ``record`` (every column but ``seq``)."""
    return (
        record.decision_id,
        record.timestamp,
        record.action_digest,
        record.tool,
        record.result,
        json_string_list(record.reasons) if record.reasons else "[]",
        json_string_list(record.obligations) if record.obligations else "[]",
        json_string_list(record.rule_ids) if record.rule_ids else "[]",
        record.policy_revision,
        record.task_id,
        record.actor_id,
        record.environment,
        record.workspace,
        record.git_sha,
        int(record.allowed),
        record.prev_hash,
        record.record_hash,
        record.prev_hash,
    )


# Builds one record's row from the hash it chains to: (APPEND parameters, record hash,
# what the caller gets back).
_Build = Callable[[str], tuple[tuple[Any, ...], str, object]]


class _Entry:
    """One record waiting for a group commit, and what became of it."""

    __slots__ = ("build", "done", "error", "result")

    def __init__(self, build: _Build) -> None:
        self.build = build
        self.done = False
        self.result: object = None
        self.error: BaseException | None = None


class SQLiteAuditLog(ChainedAuditLog):
    """Hash-chained decision records in one SQLite file (WAL), one row per decision.

    Each record is stored together with the chain head (count and last hash, kept in
    ``audit_head``) in one committed transaction. A record is stored only if the head is
    still its ``prev_hash``; when another writer moved it in the meantime, the writer takes
    the write lock (``BEGIN IMMEDIATE``), reads the head and chains the record to it. So
    several threads and several processes can append to the same file and still form a
    single chain, and reopening the file resumes it. The head also anchors the end of the
    log: rows deleted from the tail show up in :func:`~jevqueue.audit.verify_audit_log`.

    Group commit: threads appending at the same time share one transaction and one sync
    (the first becomes the writer, the others queue behind it and go into the next
    commit), and each :meth:`append` returns only once the transaction holding its own
    record has committed. A record that cannot be built fails alone; a commit that fails
    fails every record in it, and none of them is stored.

    Durability is a named setting:

    * ``"machine"`` (the default): the WAL is synced to the disk (``synchronous=FULL``)
      before :meth:`append` returns, so a record survives a power loss or an
      operating-system crash, as the decision it justifies may already have taken effect.
      It costs one ``fsync`` per commit (shared by concurrent callers).
    * ``"process"`` (``synchronous=NORMAL`` in WAL mode): a committed record is in the WAL
      file before :meth:`append` returns, so it survives a crash of the process; a power
      loss can lose the records committed since the last WAL sync. No sync per commit.

    **What a crash leaves.** Nothing to recover: a record and the head that anchors it are
    one statement in one transaction, so a writer killed mid-append, or a machine that
    loses power, leaves the log as of its last commit, rows and head together, and the
    transaction it was writing rolled back. (With ``"process"``, a power loss can take back
    the last commits, rows and head alike: the log is shorter but consistent.) So
    :func:`~jevqueue.audit.verify_audit_log` never reports a crash of an SQLite log: a
    head that disagrees with the rows is always tampering. A signed log's checkpoint is a
    file beside the database, written after the commit: a crash between them is reported,
    and recovered on the next open with the key, as :class:`~jevqueue.audit.AuditChain`
    describes.

    Args:
        path: the database file; its directory is created if missing.
        durability: ``"machine"`` (default) or ``"process"``, as above.
        timeout: seconds to wait for another writer before the append fails.

    Raises:
        ConfigurationError: the file cannot be opened as an audit log.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Literal["machine", "process"] = "machine",
        timeout: float = 10.0,
    ) -> None:
        if durability not in _SYNCHRONOUS:
            raise ConfigurationError(
                f'durability must be "machine" (fsync before the call may run) or "process" '
                f"(survives a crash of the process), not {durability!r}"
            )
        self.path = Path(path)
        self.durability: Literal["machine", "process"] = durability
        self.synchronous = _SYNCHRONOUS[durability]
        self._timeout = timeout
        # _io guards the connection; _queue the records waiting for a group commit.
        self._io = threading.Lock()
        self._queue = threading.Condition(threading.Lock())
        self._pending: list[_Entry] = []
        self._leading = False
        self._forks = _forks
        # The last record_hash this connection saw at the head: the prev_hash to try first.
        self._head: str | None = None
        self._connection: sqlite3.Connection | None = self._open()

    def _open(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(
                self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
            deadline = time.monotonic() + self._timeout
            pause = 0.001
            while True:
                try:
                    self._prepare(connection)
                    break
                except sqlite3.OperationalError as error:
                    # Processes creating the same new log at once: switching the file to WAL
                    # needs a lock that SQLite does not wait for (its busy handler is
                    # skipped where waiting could deadlock), so it answers "database is
                    # locked" at once. The other process finishes in microseconds: retry.
                    if not _is_busy(error) or time.monotonic() >= deadline:
                        raise
                time.sleep(pause * (0.5 + random.random()))
                pause = min(pause * 2, 0.05)
            self._cursor = connection.cursor()
        except (sqlite3.Error, OSError) as error:
            if connection is not None:
                connection.close()
            raise ConfigurationError(
                f"cannot open the audit log {str(self.path)!r} ({type(error).__name__}: "
                f"{error}): pass a writable path to a SQLite file (or a new file name)"
            ) from error
        return connection

    def _prepare(self, connection: sqlite3.Connection) -> None:
        """WAL mode, the durability level, the schema, the head row and the trigger.

        Every step is idempotent, so a step that found the file locked is simply rerun.
        """
        mode = connection.execute("PRAGMA journal_mode=WAL").fetchone()
        if mode is None or str(mode[0]).lower() != "wal":
            raise sqlite3.DatabaseError("the file system does not support WAL mode")
        connection.execute(f"PRAGMA synchronous={self.synchronous}")
        connection.executescript(SCHEMA)
        # The head row exists from the start, so each append moves it with a cheap UPDATE.
        if connection.execute(_HEAD).fetchone() is None:
            connection.execute(
                "INSERT OR IGNORE INTO audit_head (id, count, record_hash) VALUES (0, 0, ?)",
                (GENESIS_HASH,),
            )
        connection.execute(_HEAD_TRIGGER)

    def _current(self) -> sqlite3.Connection:
        if self._connection is None:
            raise AuditWriteError(
                f"the audit log {str(self.path)!r} is closed; open a new SQLiteAuditLog"
            )
        if self._forks != _forks:  # a forked child must not reuse the parent's handle
            self._forks = _forks
            self._head = None
            self._connection = self._open()
        return self._connection

    def append(self, event: Mapping[str, Any]) -> AuditRecord:
        """Chain and store one decision event; return once it is durable.

        Appends from several threads at once share one transaction and one sync (group
        commit); each still returns only after the transaction holding its record has
        committed, and a record that fails to build fails alone.

        Raises:
            AuditWriteError: the record could not be written; nothing was stored.
        """

        def build(prev_hash: str) -> tuple[tuple[Any, ...], str, object]:
            record = AuditRecord.chained(event, prev_hash)
            return _row(record), record.record_hash, record

        result: AuditRecord = self._commit(build)  # type: ignore[assignment]
        return result

    def _append_decision(
        self,
        decision_id: str,
        timestamp: str,
        action_digest: str,
        tool: str,
        result: str,
        allowed: bool,
        reasons: Any,
        obligations: Any,
        rule_ids: Any,
        policy_revision: str,
        task_id: str,
        actor_id: str,
        environment: str,
        workspace: str,
        git_sha: str,
    ) -> str:
        """:meth:`append` for one decision given field by field; return its record hash.

        The enforcement point's route: the record is the one :meth:`append` would store
        for the same fields as an event, without building the event, the record object
        or the lists' JSON twice. ``timestamp`` must already be in the record's form
        (``YYYY-MM-DDTHH:MM:SS.ffffffZ``). Anything unusual (a value that is not an exact
        ``str``, a list of something else) takes the general route.

        Raises:
            AuditWriteError: the record could not be written; nothing was stored.
        """
        reasons_json = plain_list(reasons)
        obligations_json = plain_list(obligations)
        rule_ids_json = plain_list(rule_ids)
        if (
            reasons_json is None
            or obligations_json is None
            or rule_ids_json is None
            or type(decision_id) is not str
            or not decision_id
            or type(timestamp) is not str
            or type(action_digest) is not str
            or type(tool) is not str
            or type(result) is not str
            or not result
            or (allowed is not True and allowed is not False)
            or type(policy_revision) is not str
            or type(task_id) is not str
            or type(actor_id) is not str
            or type(environment) is not str
            or type(workspace) is not str
            or type(git_sha) is not str
        ):
            event = {
                "decision_id": decision_id,
                "timestamp": timestamp,
                "action_digest": action_digest,
                "tool": tool,
                "result": result,
                "allowed": allowed,
                "reasons": reasons,
                "obligations": obligations,
                "rule_ids": rule_ids,
                "policy_revision": policy_revision,
                "task_id": task_id,
                "actor_id": actor_id,
                "environment": environment,
                "workspace": workspace,
                "git_sha": git_sha,
            }
            return self.append(event).record_hash
        allowed_column = 1 if allowed else 0

        def build(prev_hash: str) -> tuple[tuple[Any, ...], str, object]:
            record_hash = plain_record_hash(
                decision_id,
                timestamp,
                action_digest,
                tool,
                result,
                allowed,
                reasons_json,
                obligations_json,
                rule_ids_json,
                policy_revision,
                task_id,
                actor_id,
                environment,
                workspace,
                git_sha,
                prev_hash,
            )
            row = (
                decision_id,
                timestamp,
                action_digest,
                tool,
                result,
                reasons_json,
                obligations_json,
                rule_ids_json,
                policy_revision,
                task_id,
                actor_id,
                environment,
                workspace,
                git_sha,
                allowed_column,
                prev_hash,
                record_hash,
                prev_hash,
            )
            return row, record_hash, record_hash

        record_hash: str = self._commit(build)  # type: ignore[assignment]
        return record_hash

    # --- group commit -----------------------------------------------------------------
    #
    # A caller queues its record and, when no other thread is writing, becomes the
    # leader: it takes every queued record and stores them in one transaction with one
    # sync. Callers that arrive meanwhile queue up for the next transaction. Every caller
    # returns only once the transaction with its record has committed.

    def _commit(self, build: _Build) -> object:
        if self._forks != _forks:
            self._after_fork()
        entry = _Entry(build)
        with self._queue:
            self._pending.append(entry)
            while self._leading and not entry.done:
                self._queue.wait()
            if not entry.done:
                self._leading = True
                batch, self._pending = self._pending, []
            else:
                batch = []
        if batch:
            try:
                self._write(batch)
            finally:
                with self._queue:
                    self._leading = False
                    self._queue.notify_all()
        if entry.error is not None:
            raise entry.error
        return entry.result

    def _after_fork(self) -> None:
        """In a forked child: forget the parent's queue and locks.

        A parent thread that was writing when the process forked does not exist in the
        child, but its queue entries, its leadership and its held locks were copied; the
        child starts over with its own (its connection is reopened by :meth:`_current`).
        """
        self._io = threading.Lock()
        self._queue = threading.Condition(threading.Lock())
        self._pending = []
        self._leading = False

    def _write(self, batch: list[_Entry]) -> None:
        """Store ``batch`` in one transaction; mark every entry done (result or error)."""
        try:
            with self._io:
                connection = self._current()
                if len(batch) == 1 and self._head is not None and self._append_one(batch[0]):
                    return
                self._append_locked(connection, batch)
        except AuditWriteError as error:
            for entry in batch:
                if not entry.done:
                    entry.error = error
        finally:
            for entry in batch:
                entry.done = True

    def _append_one(self, entry: _Entry) -> bool:
        """One record in one autocommit statement, chained to the cached head.

        Returns False when another writer moved the head (nothing was stored).
        """
        prev_hash = self._head
        assert prev_hash is not None
        try:
            row, record_hash, result = entry.build(prev_hash)
        except Exception as error:  # the record itself is malformed: it alone fails
            entry.error = error
            return True
        connection = self._connection
        assert connection is not None
        try:
            before = connection.total_changes
            self._cursor.execute(_APPEND, row)
            changes = connection.total_changes - before
        except sqlite3.Error as error:
            self._head = None
            raise self._write_error(error) from error
        if changes == 2:  # the row and the head
            self._head = record_hash
            entry.result = result
            return True
        self._head = None  # another writer moved the head: read it under the lock
        if changes != 0:  # pragma: no cover - a trigger of the file interfered
            raise AuditWriteError(
                f"the audit log {str(self.path)!r} did not store the record and move "
                "its head together as expected (a trigger in the file?); the call is "
                "denied: check the log with `jevqueue audit verify`"
            )
        return False

    def _append_locked(self, connection: sqlite3.Connection, batch: list[_Entry]) -> None:
        """Append ``batch`` under ``BEGIN IMMEDIATE``, chained to the head read inside it."""
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            self._head = None
            raise AuditWriteError(
                f"cannot lock the audit log {str(self.path)!r} ({error}); the decision "
                "was not recorded and its call is denied"
            ) from error
        stored: list[tuple[_Entry, object]] = []
        try:
            head = connection.execute(_HEAD).fetchone()
            if head is None:
                raise sqlite3.DatabaseError("the audit_head row is missing")
            prev_hash = head[1]
            for entry in batch:
                try:
                    row, record_hash, result = entry.build(prev_hash)
                except Exception as error:  # a malformed record fails alone
                    entry.error = error
                    entry.done = True
                    continue
                before = connection.total_changes
                self._cursor.execute(_APPEND, row)
                if connection.total_changes - before != 2:
                    raise sqlite3.DatabaseError("the record or the head was not stored")
                stored.append((entry, result))
                prev_hash = record_hash
            connection.execute("COMMIT")
        except BaseException as error:
            self._head = None
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            if not isinstance(error, Exception):
                raise
            raise self._write_error(error) from error
        self._head = prev_hash
        for entry, result in stored:
            entry.result = result

    def _write_error(self, error: BaseException) -> AuditWriteError:
        return AuditWriteError(
            f"cannot write to the audit log {str(self.path)!r} "
            f"({type(error).__name__}: {error}); the decision was not recorded and "
            "its call is denied"
        )

    def records(self) -> Iterator[AuditRecord]:
        """Yield the stored records in chain order (oldest first)."""
        if self._forks != _forks:
            self._after_fork()
        with self._io:
            rows = (
                self._current()
                .execute(f"SELECT {', '.join(COLUMNS)} FROM audit_log ORDER BY seq")
                .fetchall()
            )
        for row in rows:
            yield row_to_record(row)

    def _record_hashes(self) -> Iterator[str]:
        """Every record's ``record_hash`` in chain order, streamed from a read-only connection.

        For checking a signed log against its checkpoint without holding every row.

        Raises:
            AuditReadError: the database cannot be read.
        """
        try:
            connection = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
            try:
                rows = connection.execute("SELECT record_hash FROM audit_log ORDER BY seq")
                for (value,) in rows:
                    yield value
            finally:
                connection.close()
        except sqlite3.Error as error:
            raise AuditReadError(
                f"cannot read the audit log {str(self.path)!r} ({type(error).__name__}: {error})"
            ) from error

    def __len__(self) -> int:
        if self._forks != _forks:
            self._after_fork()
        with self._io:
            head = self._current().execute(_HEAD).fetchone()
        return 0 if head is None else int(head[0])

    def close(self) -> None:
        """Close the connection; later appends raise :class:`AuditWriteError`."""
        with self._io:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
