"""Signed checkpoints of an audit log: which log, how many records, which record is last.

A hash chain alone proves nothing against someone who can rewrite the whole file: they
recompute every hash. With a signing key (an Ed25519 key such as ``jevqueue approve
keygen`` makes), :class:`~jevqueue.audit.AuditChain` keeps ``<log>.checkpoint``: a signed
statement "the log ``log_id`` holds ``count`` records and the last is ``head``".

* ``log_id`` is the ``record_hash`` of the log's first record: minted with that record
  (a fresh decision id, a timestamp to the microsecond) and part of the chain — every later
  hash commits to it — so it never changes, and another log, even one signed with the same
  key, carries another id. ``jevqueue audit verify`` prints it; pin it and pass it back
  (``--log-id``) to notice a log swapped for another genuine one.
* ``count`` and ``head`` pin the end: records cut off below ``count``, a rewritten record,
  records forged onto the end all fail ``jevqueue audit verify --key PUBLIC``.
* ``pending``: before a record is written the chain signs its hash as the next record
  (and after it, the new head). A crash between the record and its checkpoint leaves that
  one record beyond the checkpoint — provably the announced one, so it reads as a crash,
  never as a forgery; the next open with the key signs it and records the recovery.

Where this ends: a checkpoint file replaced by an *older* genuine one, together with the
log cut back to exactly that point, still verifies. Export the head (``verify`` prints it)
to storage the agent's host cannot write, and check with ``--expect-head``.

Checkpoints of the first format (``jevqueue.audit.checkpoint.v1``) signed the head alone;
``verify`` reports them as ``outdated``. The writer re-signs one in the current format when
it opens the log with its key, and ``jevqueue audit sign`` re-signs a log no writer opens.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from jevqueue.audit._record import GENESIS_HASH, AuditRecord
from jevqueue.errors import AuditIntegrityError, AuditReadError, ConfigurationError

__all__ = [
    "Checkpoint",
    "CheckpointFit",
    "LegacyCheckpoint",
    "LogEnds",
    "checkpoint_fit",
    "checkpoint_path",
    "fit_message",
    "read_checkpoint",
    "sign_audit_log",
    "sign_checkpoint",
    "write_checkpoint",
]

_DOMAIN = "jevqueue.audit.checkpoint.v2"
_LEGACY_DOMAIN = "jevqueue.audit.checkpoint.v1"
_FORMAT = 2
_TEXT_KEYS = ("log_id", "head", "pending", "signature")


def checkpoint_path(log_path: str | os.PathLike[str]) -> Path:
    """Return where the checkpoint of the log at ``log_path`` is kept (``<log>.checkpoint``)."""
    return Path(f"{os.fspath(log_path)}.checkpoint")


def _verify(public_key: Any, signature: str, data: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        public_key.verify(base64.b64decode(signature, validate=True), data)
    except (InvalidSignature, ValueError, TypeError, AttributeError):
        return False
    return True


@dataclass(frozen=True)
class Checkpoint:
    """One signed statement about a log.

    Attributes:
        log_id: the ``record_hash`` of the log's first record (for a checkpoint of an empty
            log, the hash of the first record it announces).
        count: how many records the log holds.
        head: the ``record_hash`` of record ``count - 1`` (:data:`GENESIS_HASH` if none).
        pending: the ``record_hash`` of the record being written as record ``count``, or
            ``""``: the writer signs it before writing the record.
        signature: base64 Ed25519 signature of :meth:`signed_bytes`.
    """

    log_id: str
    count: int
    head: str
    pending: str
    signature: str

    def signed_bytes(self) -> bytes:
        """The exact bytes the signature covers."""
        return _signed_bytes(self.log_id, self.count, self.head, self.pending)

    def verify(self, public_key: Any) -> bool:
        """Whether ``public_key`` (an Ed25519 public key) signed this checkpoint."""
        return _verify(public_key, self.signature, self.signed_bytes())


@dataclass(frozen=True)
class LegacyCheckpoint:
    """A checkpoint of the first format: it signed the head alone.

    It cannot tell one log from another signed with the same key: a log swapped for another
    host's genuine log, with that host's checkpoint, passed it. Read only, to report it and
    to re-sign the log it covers in the current format.
    """

    head: str
    signature: str

    def verify(self, public_key: Any) -> bool:
        """Whether ``public_key`` signed this checkpoint."""
        data = json.dumps({"domain": _LEGACY_DOMAIN, "head": self.head}, sort_keys=True)
        return _verify(public_key, self.signature, data.encode("ascii"))


def _signed_bytes(log_id: str, count: int, head: str, pending: str) -> bytes:
    return json.dumps(
        {"domain": _DOMAIN, "log_id": log_id, "count": count, "head": head, "pending": pending},
        sort_keys=True,
    ).encode("ascii")


def sign_checkpoint(
    private_key: Any, log_id: str, count: int, head: str, pending: str = ""
) -> Checkpoint:
    """Sign "log ``log_id`` holds ``count`` records ending in ``head``" with ``private_key``."""
    signature = private_key.sign(_signed_bytes(log_id, count, head, pending))
    return Checkpoint(log_id, count, head, pending, base64.b64encode(signature).decode("ascii"))


def write_checkpoint(
    path: Path, checkpoint: Checkpoint, *, sync: bool = False, sync_directory: bool = False
) -> None:
    """Replace the checkpoint file atomically (write beside it, then rename).

    Args:
        path: the checkpoint file.
        checkpoint: what to write.
        sync: flush the new file to stable storage before the rename, so a power loss
            leaves the old checkpoint or the new one, never a damaged one.
        sync_directory: also flush the rename itself before returning, so the new
            checkpoint survives a power loss.

    Raises:
        OSError: the file could not be written.
    """
    text = json.dumps(
        {
            "format": _FORMAT,
            "log_id": checkpoint.log_id,
            "count": checkpoint.count,
            "head": checkpoint.head,
            "pending": checkpoint.pending,
            "signature": checkpoint.signature,
        }
    )
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", encoding="ascii") as handle:
        handle.write(text + "\n")
        if sync:
            handle.flush()
            os.fsync(handle.fileno())
    os.replace(partial, path)
    if sync_directory:
        sync_folder(path.parent)


def sync_folder(folder: Path) -> None:
    """Flush a folder's entries (files created or renamed in it) to stable storage."""
    if os.name != "posix":  # pragma: no cover - a folder cannot be opened elsewhere
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def read_checkpoint(path: Path) -> Checkpoint | LegacyCheckpoint | None:
    """The checkpoint stored at ``path``, or ``None`` when there is none.

    Raises:
        AuditReadError: the file exists but is unreadable or malformed.
    """
    try:
        data = json.loads(path.read_text("ascii"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise AuditReadError(f"the checkpoint {str(path)!r} cannot be read ({error})") from error
    if (
        isinstance(data, dict)
        and set(data) == {"head", "signature"}
        and isinstance(data["head"], str)
        and isinstance(data["signature"], str)
    ):
        return LegacyCheckpoint(data["head"], data["signature"])
    if (
        isinstance(data, dict)
        and data.get("format") == _FORMAT
        and all(isinstance(data.get(name), str) for name in _TEXT_KEYS)
        and type(data.get("count")) is int
        and data["count"] >= 0
    ):
        return Checkpoint(
            data["log_id"], data["count"], data["head"], data["pending"], data["signature"]
        )
    raise AuditReadError(
        f"the checkpoint {str(path)!r} is not a jevqueue checkpoint: restore it from a backup, "
        "or verify the log without --key"
    )


@dataclass(frozen=True)
class LogEnds:
    """What a checkpoint is compared with: the log's length and a few of its records.

    Attributes:
        count: how many records the log holds.
        first: the ``record_hash`` of record 0 (the log id), ``None`` if none or unreadable.
        signed_end: the ``record_hash`` of the record the checkpoint names as its head
            (record ``checkpoint.count - 1``), ``None`` if absent or unreadable.
        after: the ``record_hash`` of the record after it, ``None`` if absent or unreadable.
    """

    count: int
    first: str | None
    signed_end: str | None
    after: str | None

    @classmethod
    def of(cls, records: Iterable[AuditRecord | None], signed_count: int) -> LogEnds:
        """Read the ends of ``records`` (in log order) against a checkpoint of ``signed_count``."""
        count = 0
        first = signed_end = after = None
        for index, record in enumerate(records):
            count = index + 1
            value = None if record is None else record.record_hash
            if index == 0:
                first = value
            if index == signed_count - 1:
                signed_end = value
            if index == signed_count:
                after = value
        return cls(count, first, signed_end, after)


CheckpointFit = Literal[
    "covered", "announced", "crash", "foreign", "truncated", "rewritten", "beyond"
]
"""How a log stands to its checkpoint.

``covered``: the log is exactly what the checkpoint signed. ``announced``: likewise, and
the checkpoint announces a next record that was never written (a failed write, or a crash
before it: the call it was for did not run). ``crash``: one record beyond the checkpoint,
the very record it announced — the writer stopped between the record and its checkpoint.
Anything else no crash leaves: ``foreign`` (the checkpoint is of another log),
``truncated`` (records it covers are gone), ``rewritten`` (the record it names as head is
another), ``beyond`` (records it neither covers nor announced).
"""


def checkpoint_fit(checkpoint: Checkpoint, ends: LogEnds) -> CheckpointFit:
    """Say how the log whose ends are ``ends`` stands to ``checkpoint``."""
    signed = checkpoint.count
    if signed > 0 and ends.count > 0 and ends.first != checkpoint.log_id:
        return "foreign"
    if ends.count < signed:
        return "truncated"
    if signed > 0 and ends.signed_end != checkpoint.head:
        return "rewritten"
    if ends.count == signed:
        return "announced" if checkpoint.pending else "covered"
    if ends.count == signed + 1 and checkpoint.pending and ends.after == checkpoint.pending:
        return "crash"
    return "beyond"


def fit_message(fit: CheckpointFit, checkpoint: Checkpoint, ends: LogEnds, name: str) -> str:
    """A sentence saying what ``fit`` means for this log and its checkpoint ``name``."""
    signed = checkpoint.count
    if fit == "foreign":
        return (
            f"the signed checkpoint {name} is of the log {checkpoint.log_id}, not of this log "
            f"({ends.first}): the log was swapped for another one, or another log's "
            "checkpoint was put beside it"
        )
    if fit == "truncated":
        return (
            f"the signed checkpoint covers {signed} records but the log holds {ends.count}: "
            f"{signed - ends.count} record(s) it signed were cut off"
            + (f" after index {ends.count - 1}" if ends.count else "")
        )
    if fit == "rewritten":
        return (
            f"record {signed - 1} is not the one the signed checkpoint names as the head "
            f"({checkpoint.head}): the log was rewritten"
        )
    if fit == "crash":
        return (
            "the writer stopped between this record and its signed checkpoint (a crash): it "
            "is the record the checkpoint announced before it was written; the next open of "
            "the log with the signing key signs it and records the recovery"
        )
    if fit == "announced":
        return (
            f"the signed checkpoint announces a record after index {signed - 1} that was "
            "never written (a write that failed, or a crash before it): the call it was for "
            "did not run"
        )
    if fit == "beyond":
        first = signed + 1 if ends.after == checkpoint.pending and checkpoint.pending else signed
        return (
            f"{ends.count - first} record(s) from index {first} on are not covered by the "
            "signed checkpoint: they were added by someone without the signing key (a crash "
            "leaves at most the one record a checkpoint announces)"
        )
    return "the log is what the signed checkpoint covers"


def sign_audit_log(path: str | os.PathLike[str], private_key: Any) -> Checkpoint:
    """Sign the current state of the SQLite or JSONL log at ``path`` (``jevqueue audit sign``).

    For a log written without a key so far, or one whose checkpoint is of the first format.
    The log must verify first (chain and anchor), and a checkpoint already beside it must be
    signed by this key and cover the log up to its end (an older-format one: name its last
    record): a signature never vouches for a log that was cut, rewritten or extended since.

    Returns:
        The checkpoint written (synced to disk).

    Raises:
        ConfigurationError: ``private_key`` is not an Ed25519 private key.
        AuditReadError: the log cannot be read, or is a PostgreSQL URL.
        AuditIntegrityError: the log does not verify, or does not match its checkpoint.
    """
    from jevqueue.audit._verify import _report, load_audit_log

    key = checked_signing_key(private_key)
    if isinstance(path, str) and path.startswith(("postgresql://", "postgres://")):
        raise AuditReadError(
            "signed checkpoints are kept beside a log file; a PostgreSQL log has none to sign"
        )
    loaded = load_audit_log(path)
    report = _report(*loaded, None, None)
    report.raise_for_problems()
    records = loaded[2]
    location = checkpoint_path(loaded[0])
    existing = read_checkpoint(location)
    public = key.public_key()
    if existing is not None and not existing.verify(public):
        raise AuditIntegrityError(
            f"the checkpoint {location.name} is not signed by this key: verify the log with "
            "the public half of the key that signed it; if the key was replaced on purpose, "
            "move the old checkpoint aside, then sign again"
        )
    if isinstance(existing, LegacyCheckpoint) and existing.head != report.head_hash:
        raise AuditIntegrityError(
            f"the checkpoint {location.name} names record {existing.head}, but the log ends "
            f"at {report.head_hash}: the log changed since it was signed; not re-signed"
        )
    if isinstance(existing, Checkpoint):
        ends = LogEnds.of(records, existing.count)
        fit = checkpoint_fit(existing, ends)
        if fit not in ("covered", "announced", "crash"):
            raise AuditIntegrityError(
                f"{fit_message(fit, existing, ends, location.name)}; not re-signed"
            )
    log_id = records[0].record_hash if records and records[0] is not None else ""
    checkpoint = sign_checkpoint(key, log_id, report.count, report.head_hash or GENESIS_HASH)
    try:
        write_checkpoint(location, checkpoint, sync=True, sync_directory=True)
    except OSError as error:
        raise AuditReadError(
            f"cannot write the checkpoint {str(location)!r} ({type(error).__name__}: {error})"
        ) from error
    return checkpoint


def checked_signing_key(key: Any) -> Any:
    """An Ed25519 private key from a key object, PEM/raw bytes or a key file path.

    Raises:
        ConfigurationError: anything else.
    """
    from jevqueue.approvals._keys import coerce_private_key, load_private_key

    if isinstance(key, (str, os.PathLike)):
        return load_private_key(key)
    try:
        return coerce_private_key(key, "the audit signing key")
    except ConfigurationError:
        raise
    except Exception as error:  # pragma: no cover - coerce raises ConfigurationError
        raise ConfigurationError(f"the audit signing key is not usable ({error})") from error
