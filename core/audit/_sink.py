"""Where audit records go: any sink, and the logs that keep the hash chain themselves."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from jevqueue.audit._record import AuditRecord

__all__ = ["AuditSink", "ChainedAuditLog"]


@runtime_checkable
class AuditSink(Protocol):
    """Anything that accepts audit events: one method, ``append(event)``.

    :class:`~jevqueue.audit.AuditChain` gives it complete records as mappings (hashes
    included). An object with ``log(event)`` instead — the logger shape of the adapter
    guide — is accepted too. Raising from ``append`` makes the decision fail closed.
    """

    def append(self, event: Mapping[str, Any]) -> object:
        """Store one audit record."""
        ...


class ChainedAuditLog(ABC):
    """A durable log that keeps its own hash chain, so several writers can share it.

    Subclasses override :meth:`append` (read the chain's head, build the record with
    :meth:`AuditRecord.chained`, store it and move the head — atomically with respect to
    every other writer of the same storage) and :meth:`records`. Override :meth:`close`
    when there is something to release. :class:`~jevqueue.audit.AuditChain` hands events
    straight to such a log instead of chaining them in memory.
    """

    @abstractmethod
    def append(self, event: Mapping[str, Any]) -> AuditRecord:
        """Chain and store one event; return the stored record.

        Raises:
            AuditWriteError: the record could not be written (the call is denied).
        """

    @abstractmethod
    def records(self) -> Iterator[AuditRecord]:
        """Yield the stored records, oldest first."""

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release the log's resources."""

    def __enter__(self) -> ChainedAuditLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
