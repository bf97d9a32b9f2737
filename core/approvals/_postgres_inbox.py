"""The fleet's approval inbox in PostgreSQL: every agent files, every reviewer decides, once."""

from __future__ import annotations

import os
import threading
from datetime import timedelta
from typing import Any

from jevqueue.approvals._inbox import ApprovalInbox
from jevqueue.approvals._inbox_request import (
    InboxDecision,
    InboxRequest,
    InboxState,
    Requester,
    stored_request,
)
from jevqueue.approvals._inbox_rules import refusal
from jevqueue.db._connection import database_url, driver, open_pool, quoted_schema, redacted
from jevqueue.db._failure_cause import failure_cause
from jevqueue.db._migrations import DEFAULT_SCHEMA, check_schema
from jevqueue.errors import ConfigurationError, InboxError

__all__ = ["PostgresApprovalInbox"]

_ALL_STATES = [state.value for state in InboxState]


class PostgresApprovalInbox(ApprovalInbox):
    """The approval inbox in the fleet's PostgreSQL database (schema version 5).

    Every write is one call of a function of the schema that runs as its owner and
    enforces the inbox's rules itself (see :mod:`jevqueue.db._inbox_functions`): a
    decision locks the request's row, so reviewers deciding at once on different hosts
    are judged one after the other. Times are the database's clock: filing, expiry and
    decisions agree across hosts whose clocks do not.

    An agent's database user needs ``USAGE`` on the schema, ``SELECT`` on
    ``approval_requests``, ``approval_decisions`` and ``schema_version``, and ``EXECUTE``
    on ``file_approval_request`` and ``cancel_approval_request``; a reviewer's the same
    ``SELECT`` and ``EXECUTE`` on ``decide_approval_request`` (docs/deployment.md).

    Args:
        url: a libpq connection string; default ``$JEVQUEUE_DATABASE_URL``.
        schema: the schema holding jevqueue's tables.
        statement_timeout: seconds a statement may take.
        connect_timeout: seconds to wait for a connection.
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
        pool_size: int = 2,
    ) -> None:
        self.url = database_url(url)
        s = quoted_schema(schema)
        if not statement_timeout > 0 or not connect_timeout > 0:
            raise ConfigurationError("statement_timeout and connect_timeout must be positive")
        if type(pool_size) is not int or pool_size < 1:
            raise ConfigurationError("pool_size must be a positive integer")
        self.schema = schema
        self.where = redacted(self.url)
        self._statement_timeout = statement_timeout
        self._connect_timeout = connect_timeout
        self._pool_size = pool_size
        self._file = f"SELECT {s}.file_approval_request(%s, %s, %s, %s, %s, %s)"
        self._cancel_sql = f"SELECT {s}.cancel_approval_request(%s)"
        self._decide_sql = f"SELECT {s}.decide_approval_request(%s, %s, %s, %s, %s)"
        self._select_sql = (
            "SELECT r.request_id, r.action_digest, r.tool, r.request, r.requester, "
            "r.created_at, r.expires_at, r.state, r.decided_at, coalesce(("
            "  SELECT pg_catalog.json_agg(pg_catalog.json_build_object("
            "    'reviewer', d.reviewer, 'approve', d.approve, 'reason', d.reason, "
            "    'decided_at', d.decided_at, 'record', d.record) "
            "    ORDER BY d.decided_at, d.reviewer) "
            f"  FROM {s}.approval_decisions AS d WHERE d.request_id = r.request_id"
            "), '[]'::json), pg_catalog.now() "
            f"FROM {s}.approval_requests AS r "
            "WHERE r.request_id >= %s AND r.request_id < %s "
            "AND (CASE WHEN r.state = 'pending' AND pg_catalog.now() >= r.expires_at "
            "THEN 'expired' ELSE r.state END) = ANY(%s) "
            "ORDER BY r.created_at DESC, r.request_id LIMIT %s"
        )
        self._psycopg, _ = driver()
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._pool: Any = None
        self._schema_checked = False
        self._closed = False

    # --- the store's four operations ------------------------------------------------------

    def _insert(
        self,
        request_id: str,
        document: dict[str, Any],
        requester: Requester,
        expires_in: timedelta,
    ) -> InboxRequest:
        jsonb = self._psycopg.types.json.Jsonb
        self._run(
            "file the request",
            self._file,
            (
                request_id,
                document["action_digest"],
                document["tool"],
                jsonb(document),
                jsonb(requester.to_dict()),
                expires_in,
            ),
        )
        return self.get(request_id)

    def _select(
        self, *, prefix: str, states: frozenset[InboxState] | None, limit: int
    ) -> list[InboxRequest]:
        wanted = _ALL_STATES if states is None else [state.value for state in states]
        rows = self._run(
            "read requests", self._select_sql, (prefix, prefix + "g", wanted, limit)
        ).fetchall()
        found = []
        for row in rows:
            columns = dict(
                zip(
                    (
                        "request_id",
                        "action_digest",
                        "tool",
                        "request",
                        "requester",
                        "created_at",
                        "expires_at",
                        "state",
                        "decided_at",
                    ),
                    row[:9],
                    strict=True,
                )
            )
            decisions = row[9] if isinstance(row[9], list) else []
            found.append(stored_request(self.where, columns, decisions, row[10]))
        return found

    def _decide(self, request_id: str, decision: InboxDecision) -> InboxRequest:
        jsonb = self._psycopg.types.json.Jsonb
        row = self._run(
            "record the decision",
            self._decide_sql,
            (
                request_id,
                decision.reviewer,
                decision.approve,
                decision.reason,
                None if decision.record is None else jsonb(decision.record.to_dict()),
            ),
        ).fetchone()
        code = None if row is None else row[0]
        if code == "recorded":
            return self.get(request_id)
        if code == "unknown":
            raise refusal("unknown", request_id)
        if code not in ("closed", "self", "outsider", "twice", "digest", "approver", "malformed"):
            raise InboxError(
                f"the approval inbox {self.where} answered {code!r} to a decision (is the "
                "schema's decide_approval_request function damaged? run `jevqueue db "
                "migrate`); nothing is known to be decided"
            )
        current = self.get(request_id)
        raise refusal(
            code,
            request_id,
            reviewer=decision.reviewer,
            state=current.state.value,
            digest=current.action_digest,
            quorums=current.quorums,
        )

    def _cancel(self, request_id: str) -> InboxRequest:
        self._run("cancel the request", self._cancel_sql, (request_id,))
        return self.get(request_id)

    # --- connections ------------------------------------------------------------------------

    def _pool_now(self) -> Any:
        with self._lock:
            if self._closed:
                raise InboxError(f"the approval inbox {self.where} is closed; open a new one")
            if self._pool is not None and self._pid != os.getpid():
                self._pool = None  # a forked child keeps off its parent's connections
            if self._pool is None:
                self._pid = os.getpid()
                self._pool = open_pool(
                    self.url,
                    name=f"inbox-{self.schema}",
                    max_size=self._pool_size,
                    connect_timeout=self._connect_timeout,
                    statement_timeout=self._statement_timeout,
                )
            return self._pool

    def _run(self, what: str, sql: str, parameters: tuple[Any, ...]) -> Any:
        """Run one autocommit statement; once more on a fresh connection if it was dead.

        Every write is idempotent or refused the second time (filing the same id again
        fails on the key; a decision recorded once answers ``twice``), so a retry after a
        lost answer never records anything twice.
        """
        psycopg = self._psycopg
        for attempt in (1, 2):
            pool = self._pool_now()
            try:
                connection = pool.getconn(timeout=self._connect_timeout)
            except Exception as error:
                raise self._failure(f"cannot reach the database to {what}", error) from error
            try:
                if not self._schema_checked:
                    check_schema(connection, self.url, self.schema)
                    self._schema_checked = True
                return connection.execute(sql, parameters)
            except ConfigurationError as error:
                raise InboxError(f"{error}; until then the inbox cannot be used") from error
            except psycopg.OperationalError as error:
                if attempt == 2 or not (connection.closed or connection.broken):
                    raise self._failure(f"cannot {what}", error) from error
                pool.putconn(connection)
                connection = None
            except psycopg.Error as error:
                raise self._failure(f"cannot {what}", error) from error
            finally:
                if connection is not None:
                    pool.putconn(connection)
        raise AssertionError("unreachable")  # pragma: no cover

    def _failure(self, what: str, error: BaseException) -> InboxError:
        return InboxError(
            f"the approval inbox {self.where}: {what} ({failure_cause(error)}); look the "
            "request up before acting on it"
        )

    def close(self) -> None:
        """Close the pool; later calls raise :class:`~jevqueue.errors.InboxError`."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            pool.close()
