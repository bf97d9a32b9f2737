"""The PostgreSQL database that a fleet of agent workers shares.

One database holds the fleet's audit chain (:class:`jevqueue.audit.PostgresAuditLog`), its
consumed approvals (:class:`jevqueue.approvals.PostgresConsumedApprovals`) and its approval
inbox (:class:`jevqueue.approvals.PostgresApprovalInbox`). It is named
by a libpq connection string, passed in code or taken from ``$JEVQUEUE_DATABASE_URL``.
The library creates and upgrades its tables itself, in a schema of their own (``jevqueue``
unless told otherwise), by numbered migrations recorded in ``<schema>.schema_version``:
:func:`migrate` (``jevqueue db migrate``) is idempotent and safe to run from several
hosts at once. The role that migrates owns the tables; workers write them only through
the schema's functions, which run as that owner, and need no right to write any table
(the grants each role needs are in docs/deployment.md).

* :func:`migrate` — bring the schema to :data:`SCHEMA_VERSION`; returns a
  :class:`MigrationReport`.
* :func:`database_url` — the connection string in force (argument, else the variable).
* :func:`redacted` — a connection string with its password hidden, for messages.

Requires the ``postgres`` extra: ``pip install "jevqueue[postgres]"``. Importing this
package does not import the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jevqueue._lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.db._connection import DATABASE_URL_VARIABLE, database_url, redacted
    from jevqueue.db._migrations import (
        DEFAULT_SCHEMA,
        SCHEMA_VERSION,
        MigrationReport,
        migrate,
        schema_version,
    )

_EXPORTS: dict[str, str] = {
    "DATABASE_URL_VARIABLE": "jevqueue.db._connection",
    "DEFAULT_SCHEMA": "jevqueue.db._migrations",
    "MigrationReport": "jevqueue.db._migrations",
    "SCHEMA_VERSION": "jevqueue.db._migrations",
    "database_url": "jevqueue.db._connection",
    "migrate": "jevqueue.db._migrations",
    "redacted": "jevqueue.db._connection",
    "schema_version": "jevqueue.db._migrations",
}

__all__ = [
    "DATABASE_URL_VARIABLE",
    "DEFAULT_SCHEMA",
    "SCHEMA_VERSION",
    "MigrationReport",
    "database_url",
    "migrate",
    "redacted",
    "schema_version",
]

__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
