"""The embedded audit log a policy enforcement point writes to when it is given none.

"Every evaluation is audited": an enforcement point built without an ``audit_logger``
records its decisions in one SQLite log in the state directory, shared by every such
enforcement point of the process (the log keeps its chain in the database, so several
processes may append to it too).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.audit._sqlite_log import SQLiteAuditLog

__all__ = ["default_audit_log", "default_audit_log_path"]

_OPEN: dict[tuple[int, str], SQLiteAuditLog] = {}
_LOCK = threading.Lock()


def default_audit_log_path() -> Path:
    """Return where the embedded default audit log lives.

    ``$JEVQUEUE_STATE_DIR/audit.sqlite3`` when that variable is set, else
    ``$XDG_STATE_HOME/jevqueue/audit.sqlite3`` or ``~/.local/state/jevqueue/audit.sqlite3``
    (the directory of the consumed-approval store).
    """
    from jevqueue.approvals import default_consumed_approvals_path

    return default_consumed_approvals_path().parent / "audit.sqlite3"


def default_audit_log() -> SQLiteAuditLog:
    """Return this process's embedded default log, opening it on first use.

    Raises:
        AuditWriteError: the state directory or the log cannot be created (the enforcement
            point then denies the call: nothing runs unaudited).
    """
    from jevqueue.audit._sqlite_log import SQLiteAuditLog

    path = default_audit_log_path()
    key = (os.getpid(), str(path))
    with _LOCK:
        log = _OPEN.get(key)
        if log is None:
            path.parent.mkdir(parents=True, exist_ok=True)
            log = _OPEN[key] = SQLiteAuditLog(path)
        return log
