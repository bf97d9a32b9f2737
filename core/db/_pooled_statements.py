"""One statement at a time on a pooled connection: what every PostgreSQL store shares.

A store (:class:`~jevqueue.approvals.PostgresConsumedApprovals`,
:class:`~jevqueue.approvals.PostgresApprovalInbox`) sends each of its calls as one
autocommit statement through :meth:`PooledStatements.run`, which

* opens the pool on first use (and again in a forked child, which must not use its
  parent's connections; the parent's pool is kept referenced, never closed from the child);
* checks once that the schema is at the version this release needs;
* sends the statement again, once, on a fresh connection when the first one was found
  dead (the server restarted, a failover, an idle connection dropped), after asking the
  pool to check the rest;
* turns every failure into the store's own error, whose message says what could not be
  done, why, and what that means for the caller.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from jevqueue.db._connection import driver, open_pool
from jevqueue.db._failure_cause import failure_cause
from jevqueue.db._migrations import check_schema
from jevqueue.errors import ConfigurationError, JevRuntimeError

__all__ = ["PooledStatements"]


class PooledStatements:
    """A lazily opened, fork-aware pool that runs one statement at a time.

    Args:
        url: the libpq connection string (already checked).
        where: the same, password redacted, for messages.
        schema: the schema whose version is checked before the first statement.
        name: the pool's name (it shows in ``pg_stat_activity`` as ``jevqueue <name>``).
        max_size: the most connections.
        connect_timeout: seconds to wait for a connection.
        statement_timeout: seconds a statement may take.
        error: the store's error type, raised for every failure.
        store: what the store is called in messages (``"the approval inbox"``).
        until: what cannot happen while the schema is at the wrong version (``"the inbox
            cannot be used"``).
        consequence: what a failure means for the caller (``"the approval is not
            fulfilled"``).
    """

    def __init__(
        self,
        url: str,
        *,
        where: str,
        schema: str,
        name: str,
        max_size: int,
        connect_timeout: float,
        statement_timeout: float,
        error: type[JevRuntimeError],
        store: str,
        until: str,
        consequence: str,
    ) -> None:
        self.url = url
        self.where = where
        self.schema = schema
        self._name = name
        self._max_size = max_size
        self._connect_timeout = connect_timeout
        self._statement_timeout = statement_timeout
        self._error = error
        self._store = store
        self._until = until
        self._consequence = consequence
        self.psycopg, _ = driver()
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._pool: Any = None
        # A forked child's copy of its parent's pool: kept referenced so that it is never
        # closed (or collected) from the child, which would close the parent's connections.
        self._abandoned: list[Any] = []
        self._schema_checked = False
        self._closed = False

    def run(self, what: str, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Run one autocommit statement and return its rows (none for a statement without).

        A connection found dead is returned to the pool, the pool checks the others, and
        the statement is sent once more on a fresh one. So each caller's statement must be
        safe to send twice: idempotent, or refused the second time.

        Raises:
            the store's error: no connection, the wrong schema version, or the statement
                failed; the message says which, and what that means for the caller.
        """
        psycopg = self.psycopg
        for attempt in (1, 2):
            pool = self._pool_now()
            try:
                connection = pool.getconn(timeout=self._connect_timeout)
            except Exception as error:
                raise self.failure(f"cannot reach the database to {what}", error) from error
            try:
                if not self._schema_checked:
                    check_schema(connection, self.url, self.schema)
                    self._schema_checked = True
                cursor = connection.execute(sql, parameters)
                return list(cursor.fetchall()) if cursor.description is not None else []
            except ConfigurationError as error:
                raise self._error(f"{error}; until then {self._until}") from error
            except psycopg.OperationalError as error:
                if attempt == 2 or not (connection.closed or connection.broken):
                    raise self.failure(f"cannot {what}", error) from error
                pool.putconn(connection)
                connection = None
                try:
                    pool.check()
                except Exception as check_error:
                    raise self.failure(f"cannot {what}", error) from check_error
            except psycopg.Error as error:
                raise self.failure(f"cannot {what}", error) from error
            finally:
                if connection is not None:
                    pool.putconn(connection)
        raise AssertionError("unreachable")  # pragma: no cover

    def failure(self, what: str, error: BaseException) -> JevRuntimeError:
        """The store's error for ``what`` failing because of ``error``."""
        return self._error(
            f"{self._store} {self.where}: {what} ({failure_cause(error)}); {self._consequence}"
        )

    def close(self) -> None:
        """Close the pool (this process's own); later calls raise the store's error."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            pool.close()

    def _pool_now(self) -> Any:
        with self._lock:
            if self._closed:
                raise self._error(f"{self._store} {self.where} is closed; open a new one")
            if self._pool is not None and self._pid != os.getpid():
                self._abandoned.append(self._pool)  # a forked child keeps off its parent's
                self._pool = None
            if self._pool is None:
                self._pid = os.getpid()
                self._pool = open_pool(
                    self.url,
                    name=self._name,
                    max_size=self._max_size,
                    connect_timeout=self._connect_timeout,
                    statement_timeout=self._statement_timeout,
                )
            return self._pool
