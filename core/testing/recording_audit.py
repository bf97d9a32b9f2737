"""An audit sink that keeps every record in memory, for tests."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["RecordingAuditSink"]


class RecordingAuditSink:
    """Collects audit records in :attr:`events`, in the order they were appended.

    Hand it to ``PolicyEnforcementPoint(pdp, audit_logger=sink)``: the PEP's
    :class:`~jevqueue.audit.AuditChain` gives it complete, hash-chained records. Call
    :meth:`fail_with` to make the next appends raise, and check that the call is denied.

    Attributes:
        events: every record appended, as plain dicts.
    """

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._failure: BaseException | None = None
        self._lock = threading.Lock()

    def append(self, event: Mapping[str, Any]) -> None:
        """Keep ``event``; raise the configured failure instead, if any."""
        with self._lock:
            if self._failure is not None:
                raise self._failure
            self.events.append(dict(event))

    log = append

    def fail_with(self, error: BaseException | None) -> None:
        """Make every later append raise ``error`` (``None`` restores normal appends)."""
        with self._lock:
            self._failure = error

    @property
    def results(self) -> list[str]:
        """The ``result`` of every record, in order (e.g. ``["ALLOW", "DENY"]``)."""
        with self._lock:
            return [str(event.get("result", "")) for event in self.events]

    def __len__(self) -> int:
        with self._lock:
            return len(self.events)
