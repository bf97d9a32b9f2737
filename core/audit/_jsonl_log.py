"""An audit log as a JSON Lines file: one hash-chained record per line."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from jevqueue.audit._checkpoint import sync_folder
from jevqueue.audit._record import GENESIS_HASH, AuditRecord, key_names
from jevqueue.audit._sink import ChainedAuditLog
from jevqueue.errors import AuditIntegrityError, AuditWriteError, ConfigurationError

try:  # POSIX: appends from several processes are serialized by an advisory lock
    import fcntl
except ImportError:  # pragma: no cover - Windows: one writing process per file
    fcntl = None  # type: ignore[assignment]

__all__ = ["RECOVERY_RULE", "JsonlAuditLog", "head_path", "recovery_event"]

RECOVERY_RULE = "jevqueue.audit.recovery"
"""The rule id of a record that says what was recovered after a crash: a torn last line cut
off, a record its anchor (or its signed checkpoint) had not caught up with."""

_TAIL_CHUNK = 8192
_HASH = re.compile(r"sha256:[0-9a-f]{64}")


def head_path(path: str | os.PathLike[str]) -> Path:
    """Return the head-anchor file kept beside a JSONL audit log (``<path>.head``)."""
    return Path(f"{os.fspath(path)}.head")


def parse_line(line: bytes) -> tuple[Any, list[str]]:
    """Parse one JSONL line; also return every object key that occurs more than once.

    ``json.loads`` keeps the last of repeated keys while other parsers keep the first, so
    a line with a repeated key can say two different things; readers of the log refuse it.

    Raises:
        ValueError: the line is not JSON.
    """
    repeated: list[str] = []

    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    repeated.append(key)
                seen.add(key)
        return result

    return json.loads(line, object_pairs_hook=build), repeated


def record_line(record: AuditRecord) -> bytes:
    """Return the JSONL line for ``record`` (sorted keys, no spaces, newline-terminated)."""
    text = json.dumps(record.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8") + b"\n"


def recovery_event(reasons: Sequence[str]) -> dict[str, Any]:
    """The event of a record that says what a log recovered from a crash (a denial)."""
    return {
        "tool": "jevqueue.audit",
        "result": "DENY",
        "allowed": False,
        "reasons": list(reasons),
        "obligations": [],
        "rule_ids": [RECOVERY_RULE],
        "policy_revision": "",
        "task_id": "",
        "actor_id": "",
        "environment": "local",
        "workspace": "",
        "git_sha": "",
        "action_digest": "",
    }


def _torn_line_start(fd: int, size: int) -> int:
    """Where the file's last, unterminated line starts."""
    start = size
    while start > 0:
        start = max(0, start - _TAIL_CHUNK)
        chunk = os.pread(fd, size - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
    return 0


def _last_line(fd: int, size: int) -> tuple[int, bytes]:
    """Where the last line of a file ending in a newline starts, and the line (no newline)."""
    end = size - 1
    start = end
    while True:
        start = max(0, start - _TAIL_CHUNK)
        chunk = os.pread(fd, end - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1, chunk[cut + 1 :]
        if start == 0:
            return 0, chunk


def _hashes(line: bytes) -> tuple[str | None, str | None]:
    """A line's ``record_hash`` (``None`` unless a well-formed hash) and ``prev_hash``."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return None, None
    if not isinstance(data, dict):
        return None, None
    record_hash, prev_hash = data.get("record_hash"), data.get("prev_hash")
    if not isinstance(record_hash, str) or _HASH.fullmatch(record_hash) is None:
        return None, None
    return record_hash, prev_hash if isinstance(prev_hash, str) else None


def _sync_data(descriptor: int) -> None:
    getattr(os, "fdatasync", os.fsync)(descriptor)


class JsonlAuditLog(ChainedAuditLog):
    """Hash-chained decision records, one JSON object per line, in an append-only file.

    Each :meth:`append` takes an exclusive ``flock`` on the file, reads the last line's
    ``record_hash`` (only when the file changed since this object last wrote), writes the
    new line with a single ``write`` to a descriptor opened with ``O_APPEND``, and then
    overwrites the head anchor ``<path>.head`` (the newest ``record_hash``), which lets
    :func:`~jevqueue.audit.verify_audit_log` notice records cut off the end. Reopening a
    file resumes its chain; several processes may append to one file (on POSIX).

    Durability (the ``fsync`` policy): with ``fsync=True`` (default) every record, and then
    its anchor, is flushed to stable storage (``os.fsync``) before :meth:`append` returns,
    so both survive a power loss; with ``fsync=False`` a record is handed to the operating
    system before :meth:`append` returns (there is no user-space buffer), so it survives a
    crash of the process but not of the machine.

    **What a crash leaves.** A writer that stops — killed, or (with ``fsync=True``) the
    machine losing power — leaves at most two things: a torn last line (a write it did not
    finish), and one complete record beyond the anchor, whose ``prev_hash`` is the anchored
    head (it stopped between the record and its anchor). :func:`~jevqueue.audit.verify_audit_log`
    reports exactly these as ``crash``, not as tampering, and the next open recovers them:
    the torn bytes move to ``<path>.torn``, the anchor is brought to the end, and the first
    record written is one that says what was recovered (rule ``jevqueue.audit.recovery``),
    so a recovery is never silent. A writer that finds a peer stopped that way while it
    has the log open recovers it the same way before its own record. No crash leaves
    anything else — an anchor further behind, an anchor naming a record the log does not
    hold, a missing anchor — so a log in such a state is refused (the records it would add
    would hide what was removed): run ``jevqueue audit verify`` on it. After a machine crash
    of a log written with ``fsync=False`` any of those can happen, and then it is refused
    too: its last records may be gone.

    A torn line that appears while the log is open (another process failing half-way) is
    refused for appending until the log is reopened.

    Args:
        path: the ``.jsonl`` file; created (with its directory) if missing.
        fsync: whether each record and its anchor are synced to disk before :meth:`append`
            returns.

    Raises:
        ConfigurationError: the file cannot be opened for appending.
        AuditIntegrityError: the log's end contradicts its head anchor in a way no crash
            leaves (records cut off or added outside the log).
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._head_fd = -1
        anchor = head_path(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o640)
            try:
                self._head_fd = os.open(anchor, os.O_RDWR)
                anchor_missing = False
            except FileNotFoundError:
                self._head_fd = os.open(anchor, os.O_RDWR | os.O_CREAT, 0o640)
                anchor_missing = True
            if fsync:  # the new files' names survive a power loss before any record does
                sync_folder(self.path.parent)
        except OSError as error:
            self._close_files()
            raise ConfigurationError(
                f"cannot open the audit log {str(self.path)!r} ({type(error).__name__}: "
                f"{error}): pass a writable path"
            ) from error
        # ((inode, size), last record_hash) as of this object's last write: when the file
        # is unchanged since, the tail need not be read again.
        self._known: tuple[tuple[int, int], str] = ((-1, -1), GENESIS_HASH)
        self.recovered: int = 0
        """Bytes of a torn last line this open cut off (kept in ``<path>.torn``)."""
        self.recovery: AuditRecord | None = None
        """The record this open wrote to say what it recovered, if it recovered anything."""
        try:
            self._recover(anchor_missing)
        except BaseException:
            self._close_files()
            raise

    def _close_files(self) -> None:
        for descriptor in (self._fd, self._head_fd):
            if descriptor is not None and descriptor >= 0:
                os.close(descriptor)
        self._fd = None
        self._head_fd = -1

    def _recover(self, anchor_missing: bool) -> None:
        """Recover what a crash left, and record the recovery in the log.

        A torn last line is cut off (its bytes kept in ``<path>.torn``); a record beyond
        the anchor that chains from it is accepted; then one record says what was done.

        Raises:
            AuditIntegrityError: the log's end contradicts its anchor beyond a crash.
            ConfigurationError: the file cannot be repaired.
        """
        fd = self._fd
        assert fd is not None
        torn = b""
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                status = os.fstat(fd)
                complete = status.st_size
                if complete and os.pread(fd, 1, complete - 1) != b"\n":
                    complete = _torn_line_start(fd, complete)
                    torn = os.pread(fd, status.st_size - complete, complete)
                prev_hash, lag = self._chain_end(fd, complete, anchor_missing=anchor_missing)
                reasons: list[str] = []
                if torn:
                    with open(f"{self.path}.torn", "ab") as kept:
                        kept.write(torn + b"\n")
                        kept.flush()
                        os.fsync(kept.fileno())
                    os.ftruncate(fd, complete)
                    if self.fsync:
                        os.fsync(fd)
                    reasons.append(
                        f"recovered the log: a torn last line of {len(torn)} bytes (a write "
                        f"that failed half-way) was cut off and kept in {self.path.name}.torn"
                    )
                if lag is not None:
                    reasons.append(lag)
                if reasons:
                    record = AuditRecord.chained(recovery_event(reasons), prev_hash)
                    self._write_record(fd, status.st_ino, complete, record)
                    self.recovery = record
            finally:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError as error:
            raise ConfigurationError(
                f"the audit log {str(self.path)!r} cannot be recovered from a crash ({error}): "
                "inspect it with `jevqueue audit verify`"
            ) from error
        self.recovered = len(torn)

    def _read_anchor(self) -> str:
        raw = os.pread(self._head_fd, 256, 0)
        return raw.decode("ascii", errors="replace").strip()

    def _chain_end(
        self, fd: int, size: int, *, anchor_missing: bool = False
    ) -> tuple[str, str | None]:
        """The hash the next record chains to, and what to recover first (or ``None``).

        ``size`` ends on a line boundary. The anchor must name the last record, or — as a
        crash leaves it — the record before it, which the last record chains from.

        Raises:
            AuditIntegrityError: any other end.
        """
        anchor = self._read_anchor()
        where = str(self.path)
        name = head_path(self.path).name
        advice = (
            f"run `jevqueue audit verify {where}` to see what changed, then restore the log "
            "from a backup, or move the log and its anchor aside to start a new one"
        )
        if size == 0:
            if anchor:
                raise AuditIntegrityError(
                    f"the audit log {where!r} is empty but its head anchor {name} names record "
                    f"{anchor!r}: its records were removed; {advice}"
                )
            return GENESIS_HASH, None
        start, line = _last_line(fd, size)
        last_hash, prev_hash = _hashes(line)
        if last_hash is None:
            raise AuditIntegrityError(
                f"the last line of the audit log {where!r} is not an audit record; {advice}"
            )
        if anchor == last_hash:
            return last_hash, None
        if anchor_missing:
            raise AuditIntegrityError(
                f"the head anchor {name} of the audit log {where!r} is missing, so records cut "
                f"off its end cannot be noticed; {advice}"
            )
        if prev_hash == (anchor or GENESIS_HASH) and (anchor or start == 0):
            return last_hash, (
                f"recovered the log: the writer stopped between record {last_hash} and its "
                "head anchor (a crash); the anchor named the record before it and now names "
                "the log's end"
            )
        raise AuditIntegrityError(
            f"the end of the audit log {where!r} does not match its head anchor {name} "
            f"({anchor!r}), and no crash leaves it so: records were cut off the end or added "
            f"outside the log; {advice}"
        )

    def _write_record(self, fd: int, inode: int, size: int, record: AuditRecord) -> int:
        """Write ``record``'s line, then its anchor; return the file's new size."""
        line = record_line(record)
        written = os.write(fd, line)
        if written != len(line):
            raise OSError(f"short write: {written} of {len(line)} bytes")
        if self.fsync:
            os.fsync(fd)
        anchor = record.record_hash.encode("ascii") + b"\n"
        os.pwrite(self._head_fd, anchor, 0)
        os.ftruncate(self._head_fd, len(anchor))
        if self.fsync:
            _sync_data(self._head_fd)
        self._known = ((inode, size + written), record.record_hash)
        return size + written

    def append(self, event: Mapping[str, Any]) -> AuditRecord:
        """Chain one decision event and append it as a line.

        Raises:
            AuditWriteError: the record could not be written; nothing was stored.
        """
        with self._lock:
            fd = self._fd
            if fd is None:
                raise AuditWriteError(
                    f"the audit log {str(self.path)!r} is closed; open a new JsonlAuditLog"
                )
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    status = os.fstat(fd)
                    size = status.st_size
                    known_shape, known_hash = self._known
                    if (status.st_ino, size) == known_shape:
                        prev_hash = known_hash
                    else:
                        prev_hash, size = self._resume(fd, status.st_ino, size)
                    record = AuditRecord.chained(event, prev_hash)
                    self._write_record(fd, status.st_ino, size, record)
                finally:
                    if fcntl is not None:
                        fcntl.flock(fd, fcntl.LOCK_UN)
            except AuditWriteError:
                raise
            except (OSError, ValueError) as error:
                raise AuditWriteError(
                    f"cannot write to the audit log {str(self.path)!r} "
                    f"({type(error).__name__}: {error}); the decision was not recorded and "
                    "its call is denied"
                ) from error
            return record

    def _resume(self, fd: int, inode: int, size: int) -> tuple[str, int]:
        """After another writer: the hash to chain to, and the size, once any crash is recovered.

        Raises:
            AuditWriteError: the log ends in a torn line, or contradicts its anchor.
        """
        if size and os.pread(fd, 1, size - 1) != b"\n":
            raise AuditWriteError(
                f"the audit log {str(self.path)!r} ends in an incomplete record (a torn "
                "write); run `jevqueue audit verify` on it, and reopen it to recover it"
            )
        try:
            prev_hash, lag = self._chain_end(fd, size)
        except AuditIntegrityError as error:
            raise AuditWriteError(
                f"{error}. The decision was not recorded and its call is denied"
            ) from error
        if lag is None:
            return prev_hash, size
        recovery = AuditRecord.chained(recovery_event([lag]), prev_hash)
        return recovery.record_hash, self._write_record(fd, inode, size, recovery)

    def records(self) -> Iterator[AuditRecord]:
        """Yield the stored records, oldest first.

        Raises:
            ValueError: a line is not a valid audit record (including a line with a key
                that is not a record field, or with a key given twice).
        """
        with self.path.open("rb") as handle:
            for line in handle:
                if line.strip():
                    data, repeated = parse_line(line)
                    if repeated:
                        raise ValueError(f"keys given more than once: {key_names(repeated)}")
                    yield AuditRecord.from_dict(data)

    def close(self) -> None:
        """Close the file; later appends raise :class:`AuditWriteError`."""
        with self._lock:
            if self._fd is not None:
                self._close_files()
