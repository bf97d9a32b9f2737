"""Where used approvals are remembered, so that one approval fulfils one call only."""

from __future__ import annotations

import os
import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol, runtime_checkable

from jevqueue.approvals._record import format_timestamp
from jevqueue.errors import ConfigurationError

__all__ = [
    "ConsumedApprovalStore",
    "MemoryConsumedApprovals",
    "SQLiteConsumedApprovals",
    "default_consumed_approvals_path",
]

STATE_DIR_VARIABLE = "JEVQUEUE_STATE_DIR"


@runtime_checkable
class ConsumedApprovalStore(Protocol):
    """Remembers which approvals have been used.

    Implement :meth:`consume` only. It must be atomic: when two callers consume the same
    ``approval_id`` at once — threads or processes — exactly one of them gets ``True``.
    """

    def consume(self, approval_id: str, action_digest: str) -> bool:
        """Mark ``approval_id`` as used; return ``False`` if it had been used already."""
        ...


class MemoryConsumedApprovals:
    """A consumed-approval set held in this process's memory, for tests.

    It does **not** survive a restart: after the process ends, every approval it saw can be
    replayed. Production code uses :class:`SQLiteConsumedApprovals`.
    """

    def __init__(self) -> None:
        self._used: dict[str, str] = {}
        self._lock = threading.Lock()

    def consume(self, approval_id: str, action_digest: str) -> bool:
        """Mark ``approval_id`` as used; return ``False`` if it had been used already."""
        with self._lock:
            if approval_id in self._used:
                return False
            self._used[approval_id] = action_digest
            return True

    def __contains__(self, approval_id: object) -> bool:
        with self._lock:
            return approval_id in self._used


_SCHEMA = """
CREATE TABLE IF NOT EXISTS consumed_approvals (
    approval_id   TEXT PRIMARY KEY NOT NULL,
    action_digest TEXT NOT NULL,
    consumed_at   TEXT NOT NULL
)
"""


class SQLiteConsumedApprovals:
    """The durable consumed-approval set: one SQLite row per used approval.

    ``approval_id`` is the primary key, so consumption is a single ``INSERT`` that either
    adds the row or hits the key: atomic across threads and across processes sharing the
    file. Each consumption commits with ``synchronous=FULL`` before it returns, so a used
    approval stays used after a process crash, a restart, or a power loss. Approvals are
    rare next to decisions, so the extra ``fsync`` costs nothing noticeable.

    Args:
        path: the database file; its directory is created if missing.
        timeout: seconds to wait for another process holding the write lock.

    Raises:
        ConfigurationError: the file cannot be opened as a database.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 10.0) -> None:
        self.path = Path(path)
        self._timeout = timeout
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._connection = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(
                self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            connection.execute(_SCHEMA)
        except (sqlite3.Error, OSError) as error:
            raise ConfigurationError(
                f"cannot open the consumed-approval store {str(self.path)!r} "
                f"({type(error).__name__}: {error}): pass a writable path to a SQLite file"
            ) from error
        return connection

    def consume(self, approval_id: str, action_digest: str) -> bool:
        """Mark ``approval_id`` as used; return ``False`` if it had been used already.

        Raises:
            sqlite3.Error: the database could not be written; the caller must treat the
                approval as not fulfilled.
        """
        with self._lock:
            if os.getpid() != self._pid:  # a forked child must not share the parent's handle
                self._pid = os.getpid()
                self._connection = self._open()
            cursor = self._connection.execute(
                "INSERT OR IGNORE INTO consumed_approvals VALUES (?, ?, ?)",
                (approval_id, action_digest, format_timestamp(datetime.now(timezone.utc))),
            )
            return cursor.rowcount == 1

    def __contains__(self, approval_id: object) -> bool:
        with self._lock:
            row = self._connection.execute(
                "SELECT 1 FROM consumed_approvals WHERE approval_id = ?", (approval_id,)
            ).fetchone()
            return row is not None

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._connection.close()


def default_consumed_approvals_path() -> Path:
    """Return where the default durable consumed-approval store lives.

    ``$JEVQUEUE_STATE_DIR/consumed-approvals.sqlite3`` when that variable is set, else
    ``$XDG_STATE_HOME/jevqueue/...`` or ``~/.local/state/jevqueue/...``.
    """
    base = os.environ.get(STATE_DIR_VARIABLE)
    if base:
        return Path(base) / "consumed-approvals.sqlite3"
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "jevqueue" / "consumed-approvals.sqlite3"
