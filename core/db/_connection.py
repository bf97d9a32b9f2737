"""Reaching the database: the driver (imported on first use), connection strings, pools."""

from __future__ import annotations

import os
import re
from types import ModuleType
from typing import Any

from jevqueue.errors import ConfigurationError

__all__ = [
    "DATABASE_URL_VARIABLE",
    "database_url",
    "driver",
    "open_pool",
    "quoted_schema",
    "redacted",
]

DATABASE_URL_VARIABLE = "JEVQUEUE_DATABASE_URL"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_PASSWORD_IN_URL = re.compile(r"(://[^:/@]*:)[^@]*@")
_PASSWORD_IN_DSN = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_EXTRA = 'pip install "jevqueue[postgres]"'


def driver() -> tuple[ModuleType, ModuleType]:
    """Return the ``psycopg`` and ``psycopg_pool`` modules, importing them now.

    Raises:
        ImportError: the ``postgres`` extra is not installed; the message says how to.
    """
    try:
        import psycopg
        import psycopg_pool
    except ImportError as error:
        raise ImportError(
            f"the PostgreSQL backends need psycopg 3 and psycopg_pool: {_EXTRA}"
        ) from error
    return psycopg, psycopg_pool


def database_url(url: str | None = None) -> str:
    """Return ``url``, else ``$JEVQUEUE_DATABASE_URL``.

    Raises:
        ConfigurationError: neither is set, or the value is not a connection string.
    """
    value = url if url is not None else os.environ.get(DATABASE_URL_VARIABLE)
    if not value:
        raise ConfigurationError(
            f"no PostgreSQL database given: pass a libpq connection string "
            f"(postgresql://user@host:5432/dbname) or set ${DATABASE_URL_VARIABLE}"
        )
    if not isinstance(value, str):
        raise ConfigurationError(f"the database URL must be a string, not {type(value).__name__}")
    psycopg, _ = driver()
    try:
        psycopg.conninfo.conninfo_to_dict(value)
    except psycopg.ProgrammingError as error:
        raise ConfigurationError(
            f"{redacted(value)!r} is not a libpq connection string ({error}): write it as "
            "postgresql://user@host:5432/dbname or 'host=... dbname=...'"
        ) from None
    return value


def redacted(url: str) -> str:
    """Return ``url`` with any password replaced by ``***`` (for messages and reports)."""
    return _PASSWORD_IN_DSN.sub(r"\1***", _PASSWORD_IN_URL.sub(r"\1***@", url))


def quoted_schema(schema: str) -> str:
    """Return ``schema`` as an SQL identifier, after checking it is a plain lower-case name.

    Raises:
        ConfigurationError: the name is not ``[a-z_][a-z0-9_]*`` (at most 63 characters).
    """
    if not isinstance(schema, str) or _SCHEMA_NAME.fullmatch(schema) is None:
        raise ConfigurationError(
            f"schema {schema!r} is not a plain lower-case SQL name: use letters, digits and "
            "underscores, starting with a letter or underscore (at most 63 characters)"
        )
    return f'"{schema}"'


def session_settings(statement_timeout: float, synchronous_commit: str) -> str:
    """The ``SET`` statements every connection of a backend starts with."""
    milliseconds = max(1, int(statement_timeout * 1000))
    return (
        f"SET statement_timeout = {milliseconds}; "
        f"SET lock_timeout = {milliseconds}; "
        # A writer that stops talking inside a transaction must not hold the chain's head.
        f"SET idle_in_transaction_session_timeout = {max(1000, 2 * milliseconds)}; "
        f"SET synchronous_commit = {synchronous_commit}"
    )


def open_pool(
    url: str,
    *,
    name: str,
    max_size: int,
    connect_timeout: float,
    statement_timeout: float,
    synchronous_commit: str = "on",
) -> Any:
    """Open a :class:`psycopg_pool.ConnectionPool` of autocommit connections to ``url``.

    The pool connects in the background and keeps trying while the database is away, so a
    worker started before its database, or one whose database restarts, recovers by
    itself. Every connection runs :func:`session_settings` first.
    """
    psycopg, psycopg_pool = driver()
    setup = session_settings(statement_timeout, synchronous_commit)

    def configure(connection: Any) -> None:
        connection.execute(setup)

    pool = psycopg_pool.ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        name=name,
        open=False,
        configure=configure,
        timeout=connect_timeout,
        reconnect_timeout=3600.0,
        max_idle=300.0,
        kwargs={
            "autocommit": True,
            "connect_timeout": max(1, int(connect_timeout)),
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 3,
            "application_name": f"jevqueue {name}",
        },
    )
    pool.open(wait=False)
    del psycopg
    return pool
