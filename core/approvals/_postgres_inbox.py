"""The fleet's approval inbox in PostgreSQL: every agent files, every reviewer decides, once."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from jevqueue.approvals._inbox import ApprovalInbox
from jevqueue.approvals._inbox_request import (
    InboxDecision,
    InboxRequest,
    InboxState,
    Requester,
    stored_or_damaged,
    stored_request,
)
from jevqueue.approvals._inbox_rules import refusal
from jevqueue.db._connection import database_url, driver, quoted_schema, redacted
from jevqueue.db._migrations import DEFAULT_SCHEMA
from jevqueue.db._pooled_statements import PooledStatements
from jevqueue.errors import (
    ConfigurationError,
    InboxCorruptionError,
    InboxError,
    UnknownRequestError,
)

__all__ = ["PostgresApprovalInbox"]

_ALL_STATES = [state.value for state in InboxState]
_COLUMNS = (
    "request_id",
    "action_digest",
    "tool",
    "request",
    "requester",
    "created_at",
    "expires_at",
    "state",
    "decided_at",
)


class PostgresApprovalInbox(ApprovalInbox):
    """The approval inbox in the fleet's PostgreSQL database (schema version 5).

    Every write is one call of a function of the schema that runs as its owner and
    enforces the inbox's rules itself (see :mod:`jevqueue.db._inbox_functions`): a
    decision locks the request's row, so reviewers deciding at once on different hosts
    are judged one after the other. Times are the database's clock: filing, expiry and
    decisions agree across hosts whose clocks do not.

    Every read is a call of ``read_approval_requests``, which answers a database user the
    requests it filed itself, and every request only to a user that may ``SELECT`` the
    table (a reviewer). Filing is idempotent on the request's id, so filing again after a
    lost answer returns the request filed; only the database user that filed a request may
    withdraw it; each decision keeps the database user that recorded it
    (``approval_decisions.decided_by``). :meth:`prune` deletes requests that can no longer
    change, with their decisions, through ``prune_approval_requests``.

    An agent's database user needs ``USAGE`` on the schema, ``SELECT`` on
    ``schema_version``, and ``EXECUTE`` on ``read_approval_requests``,
    ``file_approval_request`` and ``cancel_approval_request``; a reviewer's the same
    ``USAGE``, ``SELECT`` on ``approval_requests``, ``approval_decisions`` and
    ``schema_version``, and ``EXECUTE`` on ``read_approval_requests`` and
    ``decide_approval_request``; the pruning job's ``EXECUTE`` on
    ``prune_approval_requests`` (docs/deployment.md).

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
        self._file_sql = (
            f"SELECT * FROM {s}.file_approval_request(%s, %s, %s, %s, %s, %s::interval)"
        )
        self._cancel_sql = f"SELECT {s}.cancel_approval_request(%s)"
        self._decide_sql = f"SELECT {s}.decide_approval_request(%s, %s, %s, %s, %s)"
        self._prune_sql = f"SELECT {s}.prune_approval_requests(%s::interval)"
        self._select_sql = f"SELECT * FROM {s}.read_approval_requests(%s, %s, %s, %s)"
        self._psycopg, _ = driver()
        # Every write may be sent twice (after a dead connection) and records nothing twice:
        # filing the same id again answers the row filed; a decision recorded once answers
        # ``twice``; a cancelled request stays cancelled.
        self._statements = PooledStatements(
            self.url,
            where=self.where,
            schema=schema,
            name=f"inbox-{schema}",
            max_size=pool_size,
            connect_timeout=connect_timeout,
            statement_timeout=statement_timeout,
            error=InboxError,
            store="the approval inbox",
            until="the inbox cannot be used",
            consequence="look the request up before acting on it",
        )

    # --- the store's four operations ------------------------------------------------------

    def _insert(
        self,
        request_id: str,
        document: dict[str, Any],
        requester: Requester,
        expires_in: timedelta,
    ) -> InboxRequest:
        jsonb = self._psycopg.types.json.Jsonb
        rows = self._statements.run(
            "file the request",
            self._file_sql,
            (
                request_id,
                document["action_digest"],
                document["tool"],
                jsonb(document),
                jsonb(requester.to_dict()),
                expires_in,
            ),
        )
        if len(rows) != 1:
            raise InboxError(
                f"the approval inbox {self.where} filed request {request_id} but answered "
                f"{len(rows)} rows for it (is the schema's file_approval_request function "
                "damaged? run `jevqueue db migrate`); look the request up before acting on it"
            )
        return stored_request(self.where, *_parts(rows[0]))

    def _select(
        self, *, prefix: str, states: frozenset[InboxState] | None, limit: int
    ) -> list[InboxRequest | InboxCorruptionError]:
        wanted = _ALL_STATES if states is None else [state.value for state in states]
        rows = self._statements.run(
            "read requests", self._select_sql, (prefix, prefix + "g", wanted, limit)
        )
        return [stored_or_damaged(self.where, *_parts(row)) for row in rows]

    def _decide(self, request_id: str, decision: InboxDecision) -> InboxRequest:
        jsonb = self._psycopg.types.json.Jsonb
        rows = self._statements.run(
            "record the decision",
            self._decide_sql,
            (
                request_id,
                decision.reviewer,
                decision.approve,
                decision.reason,
                None if decision.record is None else jsonb(decision.record.to_dict()),
            ),
        )
        code = rows[0][0] if rows else None
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
        rows = self._statements.run("cancel the request", self._cancel_sql, (request_id,))
        code = rows[0][0] if rows else None
        if code == "unknown":
            raise UnknownRequestError(
                f"no approval request {request_id} filed by this database user in the inbox "
                f"{self.where}: a request is withdrawn only by the database user that filed "
                "it; cancel it with that user's connection string"
            )
        if code not in ("cancelled", "unchanged"):
            raise InboxError(
                f"the approval inbox {self.where} answered {code!r} to a cancellation (is the "
                "schema's cancel_approval_request function damaged? run `jevqueue db "
                "migrate`); look the request up before acting on it"
            )
        return self.get(request_id)

    def _prune(self, older_than: timedelta) -> int:
        """Delete requests no longer pending and filed more than ``older_than`` ago, with
        their decisions, through the schema's ``prune_approval_requests``; return how many.

        Raises:
            InboxError: the database could not be written (the pruning job's user needs
                ``EXECUTE`` on ``prune_approval_requests``).
        """
        rows = self._statements.run("prune requests", self._prune_sql, (older_than,))
        row = rows[0] if rows else None
        if row is None or type(row[0]) is not int:
            raise InboxError(
                f"the approval inbox {self.where} answered {row!r} to pruning instead of a "
                "count (is the schema's prune_approval_requests function damaged? run "
                "`jevqueue db migrate`)"
            )
        return row[0]

    def close(self) -> None:
        """Close the pool; later calls raise :class:`~jevqueue.errors.InboxError`."""
        self._statements.close()


def _parts(
    row: tuple[Any, ...],
) -> tuple[dict[str, Any], list[Mapping[str, Any]], datetime]:
    """A row of the read functions (nine columns, the decisions as a JSON array, the
    database's clock) as :func:`stored_request` takes it."""
    decisions = row[9] if isinstance(row[9], list) else []
    return dict(zip(_COLUMNS, row[:9], strict=True)), decisions, row[10]
