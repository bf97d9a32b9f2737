"""The hash chain in front of any audit sink."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from jevqueue.audit._record import GENESIS_HASH, AuditRecord, decision_event
from jevqueue.audit._sink import ChainedAuditLog
from jevqueue.errors import AuditWriteError, ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.action import Action
    from jevqueue.verdict import Verdict

__all__ = ["AuditChain"]


class AuditChain:
    """Turns decision events into hash-chained audit records and writes them to a sink.

    The sink may be:

    * a :class:`~jevqueue.audit.ChainedAuditLog` such as
      :class:`~jevqueue.audit.SQLiteAuditLog` or :class:`~jevqueue.audit.JsonlAuditLog`:
      the log keeps the chain itself (durably, resumed on reopen, shared by processes);
    * any object with ``append(event)`` or ``log(event)``: the chain is kept here, in
      memory, starting at :data:`~jevqueue.audit.GENESIS_HASH` (or ``prev_hash``), and
      the sink receives each complete record as a dict.

    Appends are serialized by a lock, so records from several threads form one chain.

    With ``signing_key`` (an Ed25519 private key, its PEM or raw bytes, or the path of a
    key file ``jevqueue approve keygen`` wrote), every record is followed by a signed
    checkpoint of the new head in ``<log>.checkpoint``; ``jevqueue audit verify --key
    PUBLIC`` then detects a rewrite of the chain by anyone without the key. One writing
    process per signed log.

    Args:
        sink: where records go.
        prev_hash: for an in-memory chain, the hash to continue from.
        signing_key: sign a checkpoint of the head after every record (needs a
            :class:`~jevqueue.audit.SQLiteAuditLog` or :class:`~jevqueue.audit.JsonlAuditLog`).

    Raises:
        ConfigurationError: ``sink`` has neither ``append`` nor ``log``, or a signing key
            is given for a sink without a file, or is not an Ed25519 private key.
    """

    def __init__(
        self, sink: Any, *, prev_hash: str = GENESIS_HASH, signing_key: Any = None
    ) -> None:
        if isinstance(sink, AuditChain):
            if signing_key is None:
                signing_key = sink._signing_key
            sink = sink.sink
        self._signing_key: Any = None
        self._checkpoint_file: Any = None
        if signing_key is not None:
            from jevqueue.audit._checkpoint import checked_signing_key, checkpoint_path

            path = getattr(sink, "path", None)
            if not isinstance(sink, ChainedAuditLog) or path is None:
                raise ConfigurationError(
                    "a signing key needs a log file to sign the head of: pass an "
                    f"SQLiteAuditLog or JsonlAuditLog, not {type(sink).__name__}"
                )
            self._signing_key = checked_signing_key(signing_key)
            self._checkpoint_file = checkpoint_path(path)
        self.sink: Any = sink
        self._log: ChainedAuditLog | None = sink if isinstance(sink, ChainedAuditLog) else None
        self._write: Callable[[Any], object] | None = None
        if self._log is None:
            write = getattr(sink, "append", None) or getattr(sink, "log", None)
            if not callable(write):
                raise ConfigurationError(
                    f"an audit sink needs an append(event) or log(event) method; "
                    f"{type(sink).__name__} has neither"
                )
            self._write = write
        self._head = prev_hash
        self._lock = threading.Lock()

    @property
    def head(self) -> str:
        """The hash of the last record this chain wrote (or the starting hash)."""
        return self._head

    def append(self, event: Mapping[str, Any]) -> AuditRecord:
        """Chain ``event`` and write it; return the written record.

        Raises:
            AuditWriteError: the event is malformed or the sink failed. Nothing was
                recorded, so the decision it describes must not take effect.
        """
        with self._lock:
            if self._log is not None:
                record = self._write_to_log(self._log, event)
                if self._signing_key is not None:
                    self._checkpoint(record.record_hash)
            else:
                record = AuditRecord.chained(event, self._head)
                try:
                    assert self._write is not None
                    self._write(record.to_dict())
                except Exception as error:
                    raise AuditWriteError(
                        f"the audit sink {type(self.sink).__name__} failed "
                        f"({type(error).__name__}: {error}); the decision was not recorded "
                        "and its call is denied"
                    ) from error
            self._head = record.record_hash
            return record

    def record_decision(
        self, verdict: Verdict, action: Action | None = None, *, decision_id: str | None = None
    ) -> AuditRecord:
        """Append the record of ``verdict`` about ``action`` (see :func:`decision_event`).

        Raises:
            AuditWriteError: as :meth:`append`.
        """
        return self.append(decision_event(verdict, action, decision_id=decision_id))

    # the seed's logger shape: a chain can itself be handed to code that calls .log(event)
    log = append

    def _decision_appender(self) -> Callable[..., None] | None:
        """The enforcement point's faster route into an exact :class:`SQLiteAuditLog`.

        Returns a function taking the fields of :meth:`SQLiteAuditLog._append_decision`
        that appends them exactly as :meth:`append` would append them as an event, or
        ``None`` when the sink is anything else (subclasses included: they may store
        records their own way).
        """
        log = self._log
        # An SQLiteAuditLog exists only once its module is loaded: no import here.
        module = sys.modules.get("jevqueue.audit._sqlite_log")
        if module is None or type(log) is not module.SQLiteAuditLog:
            return None
        append_decision: Callable[..., str] = getattr(log, "_append_decision")  # noqa: B009
        lock = self._lock
        signing = self._signing_key is not None

        def append(*fields: Any) -> None:
            with lock:
                try:
                    self._head = append_decision(*fields)
                    if signing:
                        self._checkpoint(self._head)
                except AuditWriteError:
                    raise
                except Exception as error:
                    raise AuditWriteError(
                        f"the audit log {type(log).__name__} failed ({type(error).__name__}: "
                        f"{error}); the decision was not recorded and its call is denied"
                    ) from error

        return append

    def _checkpoint(self, head: str) -> None:
        """Sign the new head (under the chain's lock: one writer per signed log)."""
        from jevqueue.audit._checkpoint import sign_checkpoint, write_checkpoint

        try:
            write_checkpoint(self._checkpoint_file, sign_checkpoint(self._signing_key, head))
        except Exception as error:
            raise AuditWriteError(
                f"the signed checkpoint {str(self._checkpoint_file)!r} could not be written "
                f"({type(error).__name__}: {error}); the call is denied"
            ) from error

    @staticmethod
    def _write_to_log(log: ChainedAuditLog, event: Mapping[str, Any]) -> AuditRecord:
        try:
            return log.append(event)
        except AuditWriteError:
            raise
        except Exception as error:
            raise AuditWriteError(
                f"the audit log {type(log).__name__} failed ({type(error).__name__}: {error}); "
                "the decision was not recorded and its call is denied"
            ) from error
