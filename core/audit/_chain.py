"""The hash chain in front of any audit sink."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from jevqueue.audit._record import (
    _UTC_Z,
    GENESIS_HASH,
    AuditRecord,
    decision_event,
    plain_list,
    plain_record_hash,
)
from jevqueue.audit._sink import ChainedAuditLog
from jevqueue.errors import AuditWriteError, ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._action import Action
    from jevqueue.policy._verdict import Verdict

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
        """The hash of the last record this chain wrote (or the starting hash).

        Over a :class:`~jevqueue.audit.ChainedAuditLog` written by several threads at once,
        it is the hash of a record of the latest commit, not necessarily its last record:
        the log itself holds the chain's order.
        """
        return self._head

    def append(self, event: Mapping[str, Any]) -> AuditRecord:
        """Chain ``event`` and write it; return the written record.

        Raises:
            AuditWriteError: the event is malformed or the sink failed. Nothing was
                recorded, so the decision it describes must not take effect.
        """
        if self._log is not None:
            # The log keeps the chain itself, and several threads appending at once share
            # one commit: holding this chain's lock around the write would defeat that.
            record = self._write_to_log(self._log, event)
            with self._lock:
                self._head = record.record_hash
                if self._signing_key is not None:
                    self._checkpoint(record.record_hash)
            return record
        with self._lock:
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
        """The enforcement point's faster route, field by field, into the sink.

        Returns a function taking the fields of :meth:`SQLiteAuditLog._append_decision`
        that appends them exactly as :meth:`append` would append them as an event: into
        an exact :class:`SQLiteAuditLog`, or into a plain ``append``/``log`` sink through
        the in-memory chain. ``None`` for any other chained log (subclasses included: they
        may store records their own way).
        """
        log = self._log
        if log is None:
            return self._memory_appender()
        # An SQLiteAuditLog exists only once its module is loaded: no import here.
        module = sys.modules.get("jevqueue.audit._sqlite_log")
        if module is None or type(log) is not module.SQLiteAuditLog:
            return None
        append_decision: Callable[..., str] = getattr(log, "_append_decision")  # noqa: B009
        lock = self._lock
        signing = self._signing_key is not None

        def append(*fields: Any) -> None:
            # No chain lock around the write: concurrent decisions share one commit.
            try:
                record_hash = append_decision(*fields)
            except AuditWriteError:
                raise
            except Exception as error:
                raise AuditWriteError(
                    f"the audit log {type(log).__name__} failed ({type(error).__name__}: "
                    f"{error}); the decision was not recorded and its call is denied"
                ) from error
            with lock:
                self._head = record_hash
                if signing:
                    self._checkpoint(record_hash)

        return append

    def _memory_appender(self) -> Callable[..., None]:
        """The in-memory chain's route: the record's dict built from the fields directly.

        The sink receives the very dict :meth:`append` would give it (``to_dict()`` of the
        record, same keys in the same order), without the event dict and the record
        object in between. Fields of any other shape take :meth:`append` itself.
        """
        write = self._write
        assert write is not None
        lock = self._lock
        sink_name = type(self.sink).__name__

        def append(
            decision_id: Any,
            timestamp: Any,
            action_digest: Any,
            tool: Any,
            result: Any,
            allowed: Any,
            reasons: Any,
            obligations: Any,
            rule_ids: Any,
            policy_revision: Any,
            task_id: Any,
            actor_id: Any,
            environment: Any,
            workspace: Any,
            git_sha: Any,
        ) -> None:
            reasons_json = plain_list(reasons)
            obligations_json = plain_list(obligations)
            rule_ids_json = plain_list(rule_ids)
            if (
                reasons_json is None
                or obligations_json is None
                or rule_ids_json is None
                or type(decision_id) is not str
                or not decision_id
                or type(timestamp) is not str
                or type(action_digest) is not str
                or type(tool) is not str
                or type(result) is not str
                or not result
                or (allowed is not True and allowed is not False)
                or type(policy_revision) is not str
                or type(task_id) is not str
                or type(actor_id) is not str
                or type(environment) is not str
                or type(workspace) is not str
                or type(git_sha) is not str
                or _UTC_Z.fullmatch(timestamp) is None
            ):
                self.append(
                    {
                        "decision_id": decision_id,
                        "timestamp": timestamp,
                        "action_digest": action_digest,
                        "tool": tool,
                        "result": result,
                        "allowed": allowed,
                        "reasons": reasons,
                        "obligations": obligations,
                        "rule_ids": rule_ids,
                        "policy_revision": policy_revision,
                        "task_id": task_id,
                        "actor_id": actor_id,
                        "environment": environment,
                        "workspace": workspace,
                        "git_sha": git_sha,
                    }
                )
                return
            with lock:
                prev_hash = self._head
                record_hash = plain_record_hash(
                    decision_id,
                    timestamp,
                    action_digest,
                    tool,
                    result,
                    allowed,
                    reasons_json,
                    obligations_json,
                    rule_ids_json,
                    policy_revision,
                    task_id,
                    actor_id,
                    environment,
                    workspace,
                    git_sha,
                    prev_hash,
                )
                # The keys and their order of AuditRecord.to_dict().
                record = {
                    "decision_id": decision_id,
                    "timestamp": timestamp,
                    "action_digest": action_digest,
                    "tool": tool,
                    "result": result,
                    "policy_revision": policy_revision,
                    "task_id": task_id,
                    "actor_id": actor_id,
                    "environment": environment,
                    "workspace": workspace,
                    "git_sha": git_sha,
                    "prev_hash": prev_hash,
                    "reasons": list(reasons),
                    "obligations": list(obligations),
                    "rule_ids": list(rule_ids),
                    "allowed": allowed,
                    "record_hash": record_hash,
                }
                try:
                    write(record)
                except Exception as error:
                    raise AuditWriteError(
                        f"the audit sink {sink_name} failed ({type(error).__name__}: "
                        f"{error}); the decision was not recorded and its call is denied"
                    ) from error
                self._head = record_hash

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
