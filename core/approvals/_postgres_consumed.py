"""The fleet's consumed-approval set: an approval used on one host is refused on every other."""

from __future__ import annotations

from datetime import timedelta

from jevqueue.approvals._check import CLOCK_SKEW, DEFAULT_FRESHNESS
from jevqueue.db._connection import database_url, quoted_schema, redacted
from jevqueue.db._migrations import DEFAULT_SCHEMA
from jevqueue.db._pooled_statements import PooledStatements
from jevqueue.errors import ConfigurationError, JevRuntimeError

__all__ = ["MINIMUM_RETENTION", "ConsumedApprovalsError", "PostgresConsumedApprovals"]

MINIMUM_RETENTION = DEFAULT_FRESHNESS + 2 * CLOCK_SKEW
"""The shortest age at which a consumed approval may be forgotten by :meth:`prune`.

An approval is accepted only while ``now <= issued_at + freshness`` and
``issued_at <= now + clock_skew``; so one consumed at ``t`` is stale everywhere by
``t + freshness + clock_skew``. One more ``clock_skew`` covers a worker whose clock runs
behind the database's (``consumed_at`` is the database's clock).
"""


class ConsumedApprovalsError(JevRuntimeError):
    """The consumed-approval store could not answer; the approval is not fulfilled."""


class PostgresConsumedApprovals:
    """The consumed-approval set in PostgreSQL, shared by every worker of a fleet.

    :meth:`consume` is one call of the schema's ``consume_approval`` function — an
    ``INSERT ... ON CONFLICT (approval_id) DO NOTHING`` — committed
    (``synchronous_commit = on``) before it returns: the primary key decides, inside the
    database, which of any number of concurrent callers on any number of hosts wins — there
    is no read before the write for a race to slip between. Exactly one caller gets
    ``True``; every later or concurrent one gets ``False``. The function runs as the
    schema's owner, so a worker needs no right to write the table: it cannot rename, delete
    or back-date a used approval to use it again.

    Every failure (the server unreachable, a dropped connection, a statement timeout, a
    full disk, a failover) raises :class:`ConsumedApprovalsError`, which
    :func:`~jevqueue.approvals.check_approvals` turns into a refusal: no approval counts
    that could not be recorded as used. The connection pool reconnects by itself when
    the database is back.

    :meth:`prune` forgets approvals consumed longer ago than a retention that is never
    shorter than :data:`MINIMUM_RETENTION`, so single use holds within the freshness window
    while the table stays small. The schema's ``prune_consumed_approvals`` function does
    the deleting and refuses a shorter retention itself, whoever calls it.

    The schema must have been created with :func:`jevqueue.db.migrate`. A worker's database
    user needs ``USAGE`` on the schema, ``SELECT`` on ``consumed_approvals`` and
    ``schema_version`` and ``EXECUTE`` on ``consume_approval``; the pruning job's needs
    ``USAGE`` on the schema, ``SELECT`` on ``schema_version`` and ``EXECUTE`` on
    ``prune_consumed_approvals`` (see docs/deployment.md).

    Args:
        url: a libpq connection string; default ``$JEVQUEUE_DATABASE_URL``.
        schema: the schema holding jevqueue's tables.
        statement_timeout: seconds a statement may take before consumption fails.
        connect_timeout: seconds to wait for a connection before consumption fails.
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
        pool_size: int = 4,
    ) -> None:
        self.url = database_url(url)
        s = quoted_schema(schema)
        if not statement_timeout > 0 or not connect_timeout > 0:
            raise ConfigurationError("statement_timeout and connect_timeout must be positive")
        if type(pool_size) is not int or pool_size < 1:
            raise ConfigurationError("pool_size must be a positive integer")
        self.schema = schema
        self.statement_timeout = statement_timeout
        self.connect_timeout = connect_timeout
        self.pool_size = pool_size
        self.where = redacted(self.url)
        self._consume = f"SELECT {s}.consume_approval(%s, %s)"
        self._contains = f"SELECT 1 FROM {s}.consumed_approvals WHERE approval_id = %s"
        self._prune = f"SELECT {s}.prune_consumed_approvals(%s::interval)"
        # Trying a consumption again after a dead connection is safe: if the first attempt
        # did commit, the second answers "already used" and the approval is refused, which
        # fails closed.
        self._statements = PooledStatements(
            self.url,
            where=self.where,
            schema=schema,
            name=f"approvals-{schema}",
            max_size=pool_size,
            connect_timeout=connect_timeout,
            statement_timeout=statement_timeout,
            error=ConsumedApprovalsError,
            store="the consumed-approval store",
            until="no approval can be used",
            consequence="the approval is not fulfilled",
        )

    def consume(self, approval_id: str, action_digest: str) -> bool:
        """Mark ``approval_id`` as used; return ``False`` if it had been used already.

        Raises:
            ConsumedApprovalsError: the use could not be recorded; the caller must treat
                the approval as not fulfilled.
        """
        if type(approval_id) is not str or type(action_digest) is not str:
            raise ConsumedApprovalsError("approval_id and action_digest must be strings")
        rows = self._statements.run(
            "record the approval as used", self._consume, (approval_id, action_digest)
        )
        row = rows[0] if rows else None
        if row is None or type(row[0]) is not bool:
            raise ConsumedApprovalsError(
                f"the consumed-approval store {self.where} answered {row!r} instead of true "
                "or false (is the schema's consume_approval function damaged? run `jevqueue "
                "db migrate`); the approval is not fulfilled"
            )
        return row[0]

    def __contains__(self, approval_id: object) -> bool:
        if type(approval_id) is not str:
            return False
        return bool(self._statements.run("look the approval up", self._contains, (approval_id,)))

    def prune(self, older_than: timedelta = MINIMUM_RETENTION) -> int:
        """Forget approvals consumed more than ``older_than`` ago; return how many.

        Raises:
            ConfigurationError: ``older_than`` is shorter than :data:`MINIMUM_RETENTION`:
                a forgotten approval that is still fresh could be used again.
            ConsumedApprovalsError: the database could not be written.
        """
        if not isinstance(older_than, timedelta) or older_than < MINIMUM_RETENTION:
            raise ConfigurationError(
                f"prune(older_than={older_than!r}) would forget approvals that may still be "
                f"fresh: keep them at least {MINIMUM_RETENTION} (freshness plus twice the "
                "clock skew)"
            )
        rows = self._statements.run("prune consumed approvals", self._prune, (older_than,))
        row = rows[0] if rows else None
        return 0 if row is None or row[0] is None else int(row[0])

    def close(self) -> None:
        """Close the pool; later calls raise :class:`ConsumedApprovalsError`."""
        self._statements.close()
