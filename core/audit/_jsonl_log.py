"""An audit log as a JSON Lines file: one hash-chained record per line."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from jevqueue.audit._record import GENESIS_HASH, AuditRecord, key_names
from jevqueue.audit._sink import ChainedAuditLog
from jevqueue.errors import AuditWriteError, ConfigurationError

try:  # POSIX: appends from several processes are serialized by an advisory lock
    import fcntl
except ImportError:  # pragma: no cover - Windows: one writing process per file
    fcntl = None  # type: ignore[assignment]

__all__ = ["RECOVERY_RULE", "JsonlAuditLog", "head_path"]

RECOVERY_RULE = "jevqueue.audit.recovery"
"""The rule id of the record that says a torn last line was cut off when the log opened."""

_TAIL_CHUNK = 8192


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


class JsonlAuditLog(ChainedAuditLog):
    """Hash-chained decision records, one JSON object per line, in an append-only file.

    Each :meth:`append` takes an exclusive ``flock`` on the file, reads the last line's
    ``record_hash`` (only when the file changed since this object last wrote), writes the
    new line with a single ``write`` to a descriptor opened with ``O_APPEND``, and then
    overwrites the head anchor ``<path>.head`` (the newest ``record_hash``), which lets
    :func:`~jevqueue.audit.verify_audit_log` notice records cut off the end. Reopening a
    file resumes its chain; several processes may append to one file (on POSIX).

    Durability (the ``fsync`` policy): with ``fsync=True`` (default) every record is
    flushed to stable storage (``os.fsync``) before :meth:`append` returns, so it survives
    a power loss; with ``fsync=False`` a record is handed to the operating system before
    :meth:`append` returns (there is no user-space buffer), so it survives a crash of the
    process but not of the machine. The head anchor is never synced: after a machine crash
    it may lag the log, which verification reports as a note, not a failure.

    A file whose last line is incomplete (a torn write) is recovered when it is opened:
    the torn bytes move to ``<path>.torn`` and the first record appended is one that says
    so (rule ``jevqueue.audit.recovery``). A torn line that appears while the log is open
    (another process failing half-way) is refused for appending until the log is reopened.

    Args:
        path: the ``.jsonl`` file; created (with its directory) if missing.
        fsync: whether each record is synced to disk before :meth:`append` returns.

    Raises:
        ConfigurationError: the file cannot be opened for appending.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o640)
            self._head_fd = os.open(head_path(self.path), os.O_RDWR | os.O_CREAT, 0o640)
        except OSError as error:
            raise ConfigurationError(
                f"cannot open the audit log {str(self.path)!r} ({type(error).__name__}: "
                f"{error}): pass a writable path"
            ) from error
        # ((inode, size), last record_hash) as of this object's last write: when the file
        # is unchanged since, the tail need not be read again.
        self._known: tuple[tuple[int, int], str] = ((-1, -1), GENESIS_HASH)
        self.recovered: int = 0
        """Bytes of a torn last line this open cut off (kept in ``<path>.torn``)."""
        self._recover_torn_tail()

    def _recover_torn_tail(self) -> None:
        """Cut off a torn last line, keep its bytes, and record the recovery in the log.

        A write that failed half-way leaves a last line without its newline; appending
        after it would glue the next record to it. The bytes go to ``<path>.torn`` and a
        record (rule ``jevqueue.audit.recovery``) says how many were removed, so the
        recovery is never silent.

        Raises:
            ConfigurationError: the file cannot be repaired.
        """
        fd = self._fd
        assert fd is not None
        torn = b""
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                size = os.fstat(fd).st_size
                if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
                    return
                start = size
                while start > 0:
                    start = max(0, start - _TAIL_CHUNK)
                    chunk = os.pread(fd, size - start, start)
                    cut = chunk.rfind(b"\n")
                    if cut >= 0:
                        start += cut + 1
                        break
                torn = os.pread(fd, size - start, start)
                with open(f"{self.path}.torn", "ab") as kept:
                    kept.write(torn + b"\n")
                    kept.flush()
                    os.fsync(kept.fileno())
                os.ftruncate(fd, start)
                if self.fsync:
                    os.fsync(fd)
            finally:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError as error:
            raise ConfigurationError(
                f"the audit log {str(self.path)!r} ends in a torn line that cannot be cut off "
                f"({error}): inspect it with `jevqueue audit verify`"
            ) from error
        self.recovered = len(torn)
        self.append(
            {
                "tool": "jevqueue.audit",
                "result": "DENY",
                "allowed": False,
                "reasons": [
                    f"recovered the log: a torn last line of {len(torn)} bytes (a write that "
                    f"failed half-way) was cut off and kept in {self.path.name}.torn"
                ],
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
        )

    def _tail_hash(self, fd: int, size: int) -> str:
        if size == 0:
            return GENESIS_HASH
        start = size
        while True:
            start = max(0, start - _TAIL_CHUNK)
            tail = os.pread(fd, size - start, start)
            if tail.count(b"\n") >= 2 or start == 0:
                break
        if not tail.endswith(b"\n"):
            raise AuditWriteError(
                f"the audit log {str(self.path)!r} ends in an incomplete record (a torn "
                "write); run `jevqueue audit verify` on it and repair it before appending"
            )
        last = tail[:-1].rsplit(b"\n", 1)[-1]
        try:
            value = json.loads(last)["record_hash"]
        except (ValueError, KeyError, TypeError):
            value = None
        if not isinstance(value, str):
            raise AuditWriteError(
                f"the last line of the audit log {str(self.path)!r} is not an audit record; "
                "run `jevqueue audit verify` on it before appending"
            )
        return value

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
                        prev_hash = self._tail_hash(fd, size)
                    record = AuditRecord.chained(event, prev_hash)
                    line = record_line(record)
                    written = os.write(fd, line)
                    if written != len(line):
                        raise OSError(f"short write: {written} of {len(line)} bytes")
                    if self.fsync:
                        os.fsync(fd)
                    self._known = ((status.st_ino, size + written), record.record_hash)
                    anchor = record.record_hash.encode("ascii") + b"\n"
                    os.pwrite(self._head_fd, anchor, 0)
                    os.ftruncate(self._head_fd, len(anchor))
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
                os.close(self._fd)
                os.close(self._head_fd)
                self._fd = None
