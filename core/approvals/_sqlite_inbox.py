"""The approval inbox in one SQLite file: every agent and reviewer on one host shares it.

The file holds the judged arguments of every call that asked for approval, which may be
secret: it is created readable and writable by its owner only (mode 0600; SQLite gives its
``-wal`` and ``-shm`` files the same mode). Agents and reviewers running as other users
share it through a group: see docs/approvals.md, "Where the inbox lives".
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from jevqueue.approvals._inbox import ApprovalInbox, default_inbox_path
from jevqueue.approvals._inbox_request import (
    InboxDecision,
    InboxRequest,
    InboxState,
    Requester,
    stored_or_damaged,
    stored_request,
)
from jevqueue.approvals._inbox_rules import next_state, refusal, refusal_code
from jevqueue.approvals._record import format_timestamp
from jevqueue.errors import ConfigurationError, InboxCorruptionError, InboxError

__all__ = ["SQLiteApprovalInbox"]

_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS approval_requests (
        request_id    TEXT PRIMARY KEY NOT NULL,
        action_digest TEXT NOT NULL,
        tool          TEXT NOT NULL,
        request       TEXT NOT NULL,
        requester     TEXT NOT NULL,
        actor_id      TEXT NOT NULL,
        created_at    TEXT NOT NULL,
        expires_at    TEXT NOT NULL,
        state         TEXT NOT NULL,
        decided_at    TEXT
    )
    """,
    "CREATE INDEX IF NOT EXISTS approval_requests_created_at ON approval_requests (created_at)",
    # listings ask for one state (pending, mostly), newest first
    "CREATE INDEX IF NOT EXISTS approval_requests_state_created_at "
    "ON approval_requests (state, created_at)",
    """
    CREATE TABLE IF NOT EXISTS approval_decisions (
        request_id TEXT NOT NULL REFERENCES approval_requests (request_id),
        reviewer   TEXT NOT NULL,
        approve    INTEGER NOT NULL,
        reason     TEXT NOT NULL,
        decided_at TEXT NOT NULL,
        record     TEXT,
        PRIMARY KEY (request_id, reviewer)
    )
    """,
)
_COLUMNS = (
    "request_id, action_digest, tool, request, requester, created_at, expires_at, state, decided_at"
)
_DECISION_COLUMNS = "request_id, reviewer, approve, reason, decided_at, record"
_SETTLED = (InboxState.APPROVED, InboxState.DENIED, InboxState.CANCELLED)
_PRIVATE = 0o600


class SQLiteApprovalInbox(ApprovalInbox):
    """The approval inbox in a SQLite file (WAL, ``synchronous=FULL``).

    Every read is one snapshot (a deferred transaction), so a request and its decisions
    are always read as they stood together. Every decision is one ``BEGIN IMMEDIATE``
    transaction: it takes the file's write lock, reads the request, checks the rules and
    writes the decision and the new state, so two reviewers deciding at once — threads or
    processes — are judged one after the other.
    Agents and reviewers on one host share the file; a fleet uses
    :class:`~jevqueue.approvals.PostgresApprovalInbox`.

    A listing filters by state and limits in SQL (an index on ``(state, created_at)``),
    and reads the decisions of every request it returns in one more statement.

    Args:
        path: the database file (default :func:`~jevqueue.approvals.default_inbox_path`);
            its directory is created if missing, the file with mode 0600 (an existing
            file keeps its mode).
        timeout: seconds to wait for another process holding the write lock.

    Raises:
        ConfigurationError: the file cannot be opened as a database.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, timeout: float = 10.0
    ) -> None:
        self.path = Path(path) if path is not None else default_inbox_path()
        self.where = str(self.path)
        self._timeout = timeout
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._connection = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _create_private(self.path)
            connection = sqlite3.connect(
                self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
            connection.row_factory = sqlite3.Row
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            connection.execute("PRAGMA foreign_keys=ON")
            connection.execute("PRAGMA secure_delete=ON")  # deleted arguments are zeroed
            for statement in _SCHEMA:
                connection.execute(statement)
        except (sqlite3.Error, OSError) as error:
            raise ConfigurationError(
                f"cannot open the approval inbox {str(self.path)!r} ({type(error).__name__}: "
                f"{error}): pass a writable path to a SQLite file"
            ) from error
        return connection

    @contextmanager
    def _session(self, what: str, write: bool = False) -> Iterator[sqlite3.Connection]:
        """The connection in one transaction; store errors as InboxError.

        A read is a transaction too: in WAL mode it reads one snapshot, so a request row
        and its decisions never straddle a decision another connection commits between
        the two statements. A write takes the file's write lock first (``IMMEDIATE``).
        """
        with self._lock:
            if os.getpid() != self._pid:  # a forked child must not share the parent's handle
                self._pid = os.getpid()
                self._connection = self._open()
            connection = self._connection
            try:
                connection.execute("BEGIN IMMEDIATE" if write else "BEGIN DEFERRED")
                try:
                    yield connection
                except BaseException:
                    connection.execute("ROLLBACK")
                    raise
                connection.execute("COMMIT")
            except sqlite3.Error as error:
                raise InboxError(
                    f"the approval inbox {self.where} could not {what} ({type(error).__name__}: "
                    f"{error}); nothing was decided: check the file and its permissions"
                ) from error

    def _insert(
        self,
        request_id: str,
        document: dict[str, Any],
        requester: Requester,
        expires_in: timedelta,
    ) -> InboxRequest:
        created = datetime.now(timezone.utc)
        with self._session("file the request", write=True) as connection:
            connection.execute(
                f"INSERT INTO approval_requests ({_COLUMNS}, actor_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', NULL, ?)",
                (
                    request_id,
                    document["action_digest"],
                    document["tool"],
                    json.dumps(document, sort_keys=True),
                    json.dumps(requester.to_dict(), sort_keys=True),
                    format_timestamp(created),
                    format_timestamp(created + expires_in),
                    requester.actor_id,
                ),
            )
            return self._read(connection, request_id, created)

    def _select(
        self, *, prefix: str, states: frozenset[InboxState] | None, limit: int
    ) -> Sequence[InboxRequest | InboxCorruptionError]:
        now = datetime.now(timezone.utc)
        where, parameters = _where(prefix, states, format_timestamp(now))
        chosen = (
            f"SELECT {_COLUMNS} FROM approval_requests WHERE {where} "
            "ORDER BY created_at DESC, request_id LIMIT ?"
        )
        with self._session("read requests") as connection:
            rows = connection.execute(chosen, (*parameters, limit)).fetchall()
            if not rows:
                return []
            # the decisions of exactly those rows, in the same snapshot
            decided: dict[str, list[dict[str, Any]]] = {}
            for each in connection.execute(
                f"SELECT {_DECISION_COLUMNS} FROM approval_decisions WHERE request_id IN "
                f"(SELECT request_id FROM ({chosen})) ORDER BY decided_at, reviewer",
                (*parameters, limit),
            ):
                decided.setdefault(each["request_id"], []).append(dict(each))
        return [
            stored_or_damaged(self.where, dict(row), decided.get(row["request_id"], []), now)
            for row in rows
        ]

    def _decide(self, request_id: str, decision: InboxDecision) -> InboxRequest:
        with self._session("record the decision", write=True) as connection:
            now = datetime.now(timezone.utc)
            current = self._read(connection, request_id, now)
            code = refusal_code(current, decision, now)
            if code is not None:
                raise refusal(
                    code,
                    request_id,
                    reviewer=decision.reviewer,
                    state=current.state.value,
                    digest=current.action_digest,
                    quorums=current.quorums,
                )
            decided = InboxDecision(
                decision.reviewer, decision.approve, decision.reason, now, decision.record
            )
            connection.execute(
                "INSERT INTO approval_decisions VALUES (?, ?, ?, ?, ?, ?)",
                (
                    request_id,
                    decided.reviewer,
                    int(decided.approve),
                    decided.reason,
                    format_timestamp(now),
                    None if decided.record is None else json.dumps(decided.record.to_dict()),
                ),
            )
            state = next_state(current.quorums, (*current.decisions, decided))
            if state is not InboxState.PENDING:
                connection.execute(
                    "UPDATE approval_requests SET state = ?, decided_at = ? WHERE request_id = ?",
                    (state.value, format_timestamp(now), request_id),
                )
            return self._read(connection, request_id, now)

    def _cancel(self, request_id: str) -> InboxRequest:
        with self._session("cancel the request", write=True) as connection:
            now = datetime.now(timezone.utc)
            connection.execute(
                "UPDATE approval_requests SET state = 'cancelled', decided_at = ? "
                "WHERE request_id = ? AND state = 'pending' AND expires_at > ?",
                (format_timestamp(now), request_id, format_timestamp(now)),
            )
            return self._read(connection, request_id, now)

    def _prune(self, older_than: timedelta) -> int:
        now = datetime.now(timezone.utc)
        # not pending, or pending past its expiry; a row whose state is not one a store
        # writes is damaged and goes as well once it is old
        settled = "created_at < ? AND (state <> 'pending' OR expires_at <= ?)"
        parameters = (format_timestamp(now - older_than), format_timestamp(now))
        with self._session("prune requests", write=True) as connection:
            connection.execute(
                "DELETE FROM approval_decisions WHERE request_id IN "
                f"(SELECT request_id FROM approval_requests WHERE {settled})",
                parameters,
            )
            removed = connection.execute(
                f"DELETE FROM approval_requests WHERE {settled}", parameters
            ).rowcount
        if removed:
            self._forget_deleted()
        return removed

    def _purge(self, request_id: str) -> InboxRequest | None:
        with self._session("remove the damaged request", write=True) as connection:
            now = datetime.now(timezone.utc)
            row = connection.execute(
                f"SELECT {_COLUMNS} FROM approval_requests WHERE request_id = ?", (request_id,)
            ).fetchone()
            if row is None:
                raise refusal("unknown", request_id)
            entry = stored_or_damaged(self.where, dict(row), self._decisions(connection, row), now)
            if isinstance(entry, InboxRequest):
                return entry
            connection.execute("DELETE FROM approval_decisions WHERE request_id = ?", (request_id,))
            connection.execute("DELETE FROM approval_requests WHERE request_id = ?", (request_id,))
        self._forget_deleted()
        return None

    def _forget_deleted(self) -> None:
        """Move what was deleted out of the write-ahead log and empty it, so that deleted
        arguments do not linger in the ``-wal`` file (``secure_delete`` zeroes them in the
        database file). Best effort: a reader still on an older snapshot is waited for up
        to the store's timeout, and then the log is left as it is."""
        with self._lock, suppress(sqlite3.Error):
            self._connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _read(self, connection: sqlite3.Connection, request_id: str, now: datetime) -> InboxRequest:
        row = connection.execute(
            f"SELECT {_COLUMNS} FROM approval_requests WHERE request_id = ?", (request_id,)
        ).fetchone()
        if row is None:
            raise refusal("unknown", request_id)
        return self._build(connection, row, now)

    def _build(
        self, connection: sqlite3.Connection, row: sqlite3.Row, now: datetime
    ) -> InboxRequest:
        return stored_request(self.where, dict(row), self._decisions(connection, row), now)

    def _decisions(self, connection: sqlite3.Connection, row: sqlite3.Row) -> list[dict[str, Any]]:
        decisions = connection.execute(
            f"SELECT {_DECISION_COLUMNS} FROM approval_decisions "
            "WHERE request_id = ? ORDER BY decided_at, reviewer",
            (row["request_id"],),
        ).fetchall()
        return [dict(each) for each in decisions]

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._connection.close()


def _where(
    prefix: str, states: frozenset[InboxState] | None, now: str
) -> tuple[str, tuple[str, ...]]:
    """The WHERE clause choosing ids that start with ``prefix`` whose stored state can read
    as one of ``states``, and its parameters (timestamps are fixed-width UTC text, so they
    compare as text)."""
    clauses: list[str] = []
    parameters: list[str] = []
    if prefix:
        clauses.append("request_id >= ? AND request_id < ?")
        parameters += [prefix, prefix + "g"]  # ids are hex: 'g' sorts after every digit
    if states is not None:
        either: list[str] = []
        settled = [state.value for state in _SETTLED if state in states]
        if settled:
            either.append(f"state IN ({', '.join('?' for _ in settled)})")
            parameters += settled
        if InboxState.PENDING in states and InboxState.EXPIRED in states:
            either.append("state = 'pending'")
        elif InboxState.PENDING in states:
            either.append("(state = 'pending' AND expires_at > ?)")
            parameters.append(now)
        elif InboxState.EXPIRED in states:
            either.append("(state = 'pending' AND expires_at <= ?)")
            parameters.append(now)
        clauses.append(f"({' OR '.join(either)})" if either else "0")
    return (" AND ".join(clauses) or "1"), tuple(parameters)


def _create_private(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists; an existing file keeps the
    mode its owner gave it (a group-shared inbox, say)."""
    if str(path) == ":memory:":
        return
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, _PRIVATE)
    except FileExistsError:
        return
    try:
        if hasattr(os, "fchmod"):  # the umask may have taken bits; 0600 exactly
            os.fchmod(descriptor, _PRIVATE)
    finally:
        os.close(descriptor)
