"""The hash chain in front of any audit sink."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
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
from jevqueue.errors import (
    AuditIntegrityError,
    AuditReadError,
    AuditWriteError,
    ConfigurationError,
)

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.audit._checkpoint import Checkpoint, LogEnds
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
    key file ``jevqueue approve keygen`` wrote), the chain keeps a signed checkpoint in
    ``<log>.checkpoint`` (see :mod:`jevqueue.audit._checkpoint`): before each record it
    signs the record it is about to write, after it the new end of the log — which log (its
    first record's hash), how many records, which is last. ``jevqueue audit verify --key
    PUBLIC`` then detects a rewrite of the chain, records cut off or forged onto the end, and
    a log swapped for another one, by anyone without the key; a crash between a record and
    its checkpoint is told apart, because the record is the one announced. Appends to a
    signed log are serialized (one record and its two checkpoints at a time), and the
    checkpoints are synced to disk when the log syncs its records. One writing process per
    signed log.

    Opening a signed chain checks the log against its checkpoint first. A record the writer
    announced and wrote but did not sign before it stopped is signed, and a record says so
    (rule ``jevqueue.audit.recovery``); a checkpoint of the first format (the head alone)
    is re-signed in the current format. Anything else — a checkpoint of another key or
    another log, records cut off, rewritten or added without the key, records but no
    checkpoint at all — is refused: a new signature would vouch for it. Check such a log
    with ``jevqueue audit verify --key``; ``jevqueue audit sign`` starts signing a log
    written without a key.

    Args:
        sink: where records go.
        prev_hash: for an in-memory chain, the hash to continue from.
        signing_key: sign a checkpoint around every record (needs a
            :class:`~jevqueue.audit.SQLiteAuditLog` or :class:`~jevqueue.audit.JsonlAuditLog`).

    Raises:
        ConfigurationError: ``sink`` has neither ``append`` nor ``log``, or a signing key
            is given for a sink without a file, or is not an Ed25519 private key, or the
            log cannot be read to check it against its checkpoint.
        AuditIntegrityError: with a signing key: the log does not match its checkpoint in a
            way no crash leaves.
    """

    def __init__(
        self, sink: Any, *, prev_hash: str = GENESIS_HASH, signing_key: Any = None
    ) -> None:
        signer: _Signer | None = None
        if isinstance(sink, AuditChain):
            if signing_key is None:
                signer = sink._signer
            sink = sink.sink
        if signing_key is not None:
            path = getattr(sink, "path", None)
            if not isinstance(sink, ChainedAuditLog) or not isinstance(path, os.PathLike):
                raise ConfigurationError(
                    "a signing key needs a log file to sign the head of: pass an "
                    f"SQLiteAuditLog or JsonlAuditLog, not {type(sink).__name__}"
                )
            signer = _Signer(sink, signing_key)
        self._signer: _Signer | None = signer
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
        if self._signer is not None:
            record = self._signer.append(event)
            with self._lock:
                self._head = record.record_hash
            return record
        if self._log is not None:
            # The log keeps the chain itself, and several threads appending at once share
            # one commit: holding this chain's lock around the write would defeat that.
            record = self._write_to_log(self._log, event)
            with self._lock:
                self._head = record.record_hash
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
        may store records their own way), and for a signed chain, whose records go one by one
        between their checkpoints.
        """
        log = self._log
        if self._signer is not None:
            return None
        if log is None:
            return self._memory_appender()
        # An SQLiteAuditLog exists only once its module is loaded: no import here.
        module = sys.modules.get("jevqueue.audit._sqlite_log")
        if module is None or type(log) is not module.SQLiteAuditLog:
            return None
        append_decision: Callable[..., str] = getattr(log, "_append_decision")  # noqa: B009
        lock = self._lock

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


class _Signer:
    """The signed checkpoints of one log, kept around each record a chain writes to it.

    It tracks the log's id, length and head itself (one writing process per signed log):
    before a record it signs the record's hash as the one to come, after it the new end.
    """

    def __init__(self, log: ChainedAuditLog, signing_key: Any) -> None:
        from jevqueue.audit._checkpoint import checked_signing_key, checkpoint_path

        self._key = checked_signing_key(signing_key)
        self._log = log
        self._location = checkpoint_path(getattr(log, "path"))  # noqa: B009
        self._durable = getattr(log, "fsync", None) is True or (
            getattr(log, "durability", None) == "machine"
        )
        self._lock = threading.Lock()
        self._broken: str | None = None
        self._log_id = ""
        self._count = 0
        self._head = GENESIS_HASH
        self._open()

    def _open(self) -> None:
        """Check the log against its checkpoint; recover what a crash left; else refuse."""
        from jevqueue.audit._checkpoint import (
            Checkpoint,
            checkpoint_fit,
            fit_message,
            read_checkpoint,
        )
        from jevqueue.audit._jsonl_log import recovery_event

        where = str(self._location)
        advice = f"check the log with `jevqueue audit verify {self._log_path()} --key PUBLIC`"
        try:
            checkpoint = read_checkpoint(self._location)
        except AuditReadError as error:
            raise AuditIntegrityError(f"{error}; {advice}") from error
        if checkpoint is not None and not checkpoint.verify(self._key.public_key()):
            raise AuditIntegrityError(
                f"the checkpoint {where!r} is not signed by this key: it was forged, or the "
                f"log was signed with another key; {advice} (if the key was replaced on "
                "purpose, check the log with the old key's public half, move the old "
                "checkpoint aside and run `jevqueue audit sign`)"
            )
        signed_count = checkpoint.count if isinstance(checkpoint, Checkpoint) else 0
        scan = _Scan(self._hashes(), signed_count)
        self._log_id, self._count, self._head = scan.first or "", scan.count, scan.last
        # What the checkpoint was written against: the log before the record in which this
        # very open of the log recovered from a crash, if it wrote one.
        recovery = getattr(self._log, "recovery", None)
        own = isinstance(recovery, AuditRecord) and recovery.record_hash == scan.last
        ends, last = scan.before_last() if own else (scan.ends(), scan.last)
        if checkpoint is None:
            if ends.count:
                raise AuditIntegrityError(
                    f"the audit log {self._log_path()!r} holds {ends.count} records but has no "
                    f"signed checkpoint {self._location.name}: it was written without a key, "
                    f"or its checkpoint was removed; {advice}, then start signing it with "
                    "`jevqueue audit sign`"
                )
            if scan.count:
                self._sign_end()
            return
        if not isinstance(checkpoint, Checkpoint):  # the first format: the head alone
            if checkpoint.head != last:
                raise AuditIntegrityError(
                    f"the log does not end at the record its checkpoint {where!r} names "
                    f"({checkpoint.head}): records were cut off or added; {advice}"
                )
            self._sign_end()
            return
        fit = checkpoint_fit(checkpoint, ends)
        if fit not in ("covered", "announced", "crash"):
            raise AuditIntegrityError(
                f"{fit_message(fit, checkpoint, ends, self._location.name)}; no crash leaves "
                f"this, so the log is not signed again: {advice}"
            )
        if fit == "crash":
            self.append(
                recovery_event(
                    [
                        f"recovered the signed checkpoint: record {checkpoint.pending} (index "
                        f"{checkpoint.count}) was written, as its checkpoint had announced, "
                        "but the writer stopped before signing it (a crash); it is signed now"
                    ]
                )
            )
        elif (checkpoint.count, checkpoint.head, checkpoint.pending) != (
            self._count,
            self._head,
            "",
        ):
            self._sign_end()

    def _log_path(self) -> str:
        return str(getattr(self._log, "path", ""))

    def _hashes(self) -> Iterator[str]:
        """Every record's hash in log order, streamed (a log may be large)."""
        stream = getattr(self._log, "_record_hashes", None)
        try:
            if callable(stream):
                yield from stream()
            else:
                for record in self._log.records():
                    yield record.record_hash
        except (AuditReadError, ValueError, TypeError, OSError) as error:
            raise ConfigurationError(
                f"the audit log {self._log_path()!r} cannot be read to check it against its "
                f"signed checkpoint ({type(error).__name__}: {error}): run `jevqueue audit "
                "verify` on it"
            ) from error

    def _write(self, checkpoint: Checkpoint, *, before_record: bool) -> None:
        from jevqueue.audit._checkpoint import write_checkpoint

        try:
            write_checkpoint(
                self._location,
                checkpoint,
                sync=self._durable,
                sync_directory=self._durable and before_record,
            )
        except OSError as error:
            raise AuditWriteError(
                f"the signed checkpoint {str(self._location)!r} could not be written "
                f"({type(error).__name__}: {error}); the call is denied"
            ) from error

    def _sign_end(self) -> None:
        from jevqueue.audit._checkpoint import sign_checkpoint

        checkpoint = sign_checkpoint(self._key, self._log_id, self._count, self._head)
        self._write(checkpoint, before_record=False)

    def append(self, event: Mapping[str, Any]) -> AuditRecord:
        """Announce the record in a signed checkpoint, write it, then sign the new end.

        Raises:
            AuditWriteError: the record or a checkpoint could not be written, or another
                writer appended to the log (the chain refuses from then on).
        """
        from jevqueue.audit._checkpoint import sign_checkpoint

        with self._lock:
            if self._broken is not None:
                raise AuditWriteError(self._broken)
            record = AuditRecord.chained(event, self._head)
            log_id = self._log_id or record.record_hash
            self._write(
                sign_checkpoint(self._key, log_id, self._count, self._head, record.record_hash),
                before_record=True,
            )
            written = AuditChain._write_to_log(self._log, record.to_dict())
            if written.record_hash != record.record_hash:
                self._broken = (
                    f"the signed audit log {self._log_path()!r} was appended to by another "
                    f"writer (record {written.record_hash} follows {written.prev_hash}, not "
                    f"{self._head}): a signed log has one writing process; its records are no "
                    "longer signed and every call is denied. Check it with `jevqueue audit "
                    "verify --key`"
                )
                raise AuditWriteError(self._broken)
            self._log_id, self._count, self._head = log_id, self._count + 1, record.record_hash
            self._sign_end()
            return written


class _Scan:
    """One pass over a log: its length and the hashes a checkpoint is compared with."""

    def __init__(self, hashes: Iterator[str], signed_count: int) -> None:
        self.signed_count = signed_count
        self.count = 0
        self.first: str | None = None
        self.signed_end: str | None = None
        self.after: str | None = None
        self.last = self.before = GENESIS_HASH
        for index, value in enumerate(hashes):
            if index == 0:
                self.first = value
            if index == signed_count - 1:
                self.signed_end = value
            if index == signed_count:
                self.after = value
            self.before, self.last = self.last, value
            self.count = index + 1

    def ends(self) -> LogEnds:
        from jevqueue.audit._checkpoint import LogEnds

        return LogEnds(self.count, self.first, self.signed_end, self.after)

    def before_last(self) -> tuple[LogEnds, str]:
        """The ends of the log without its last record, and the hash it then ends in."""
        from jevqueue.audit._checkpoint import LogEnds

        held = self.count - 1
        return (
            LogEnds(
                held,
                self.first if held > 0 else None,
                self.signed_end if self.signed_count - 1 < held else None,
                self.after if self.signed_count < held else None,
            ),
            self.before,
        )
