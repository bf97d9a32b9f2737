"""SQLite and JSONL audit logs: durable, resumed on reopen, shared by processes, fail closed."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jevqueue.audit import (
    GENESIS_HASH,
    AuditChain,
    ChainedAuditLog,
    JsonlAuditLog,
    SQLiteAuditLog,
    verify_audit_log,
)
from jevqueue.errors import AuditWriteError, ConfigurationError

Event = Callable[..., dict[str, Any]]
KINDS = ["sqlite", "jsonl"]


def open_log(kind: str, path: Path) -> ChainedAuditLog:
    return SQLiteAuditLog(path) if kind == "sqlite" else JsonlAuditLog(path, fsync=False)


def log_path(kind: str, tmp_path: Path) -> Path:
    return tmp_path / ("audit.sqlite3" if kind == "sqlite" else "audit.jsonl")


@pytest.mark.parametrize("kind", KINDS)
def test_records_read_back_as_a_valid_chain(kind: str, tmp_path: Path, event: Event) -> None:
    path = log_path(kind, tmp_path)
    with open_log(kind, path) as log:
        written = [AuditChain(log).append(event(n)) for n in range(5)]
        assert list(log.records()) == written
    assert written[0].prev_hash == GENESIS_HASH
    report = verify_audit_log(path)
    assert report.ok, report.summary()
    assert (report.count, report.head_hash, report.format) == (5, written[-1].record_hash, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_reopening_resumes_the_chain(kind: str, tmp_path: Path, event: Event) -> None:
    path = log_path(kind, tmp_path)
    with open_log(kind, path) as log:
        last = log.append(event(1))
    with open_log(kind, path) as log:
        resumed = AuditChain(log).append(event(2))
    assert resumed.prev_hash == last.record_hash
    assert verify_audit_log(path).ok


@pytest.mark.parametrize("kind", KINDS)
def test_two_writers_on_one_file_keep_one_chain(kind: str, tmp_path: Path, event: Event) -> None:
    path = log_path(kind, tmp_path)
    first, second = open_log(kind, path), open_log(kind, path)
    for n in range(10):
        (first if n % 2 else second).append(event(n))
    first.close()
    second.close()
    report = verify_audit_log(path)
    assert report.ok and report.count == 10, report.summary()


_WRITER = textwrap.dedent(
    """
    import sys
    from jevqueue.audit import AuditChain, JsonlAuditLog, SQLiteAuditLog
    path, count, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    log = SQLiteAuditLog(path) if path.endswith(".sqlite3") else JsonlAuditLog(path, fsync=False)
    chain = AuditChain(log)
    for n in range(count):
        chain.append({"result": "ALLOW", "tool": name, "reasons": [str(n)]})
    log.close()
    """
)


@pytest.mark.parametrize("kind", KINDS)
def test_concurrent_processes_keep_a_valid_chain(kind: str, tmp_path: Path) -> None:
    path = log_path(kind, tmp_path)
    open_log(kind, path).close()
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), "300", f"writer-{n}"])
        for n in range(2)
    ]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0]
    report = verify_audit_log(path)
    assert report.ok, report.summary()
    assert report.count == 600
    with open_log(kind, path) as log:
        tools = [record.tool for record in log.records()]
    assert tools.count("writer-0") == tools.count("writer-1") == 300


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_opens_its_own_sqlite_handle(tmp_path: Path, event: Event) -> None:
    path = log_path("sqlite", tmp_path)
    log = SQLiteAuditLog(path)
    log.append(event(1))
    parents_handle = log._connection
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            log.append(event(2))
            os._exit(0 if log._connection is not parents_handle else 3)
        except BaseException:
            os._exit(4)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert log._connection is parents_handle
    log.append(event(3))
    log.close()
    report = verify_audit_log(path)
    assert report.ok and report.count == 3, report.summary()


@pytest.mark.parametrize("kind", KINDS)
def test_threads_sharing_one_log_keep_a_valid_chain(
    kind: str, tmp_path: Path, event: Event
) -> None:
    path = log_path(kind, tmp_path)
    log = open_log(kind, path)
    chain = AuditChain(log)
    threads = [
        threading.Thread(target=lambda: [chain.append(event(n)) for n in range(50)])
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log.close()
    report = verify_audit_log(path)
    assert report.ok and report.count == 200, report.summary()


@pytest.mark.parametrize("kind", KINDS)
def test_a_closed_log_refuses_with_audit_write_error(
    kind: str, tmp_path: Path, event: Event
) -> None:
    log = open_log(kind, log_path(kind, tmp_path))
    log.close()
    with pytest.raises(AuditWriteError, match="closed"):
        AuditChain(log).append(event())


def test_sqlite_write_failure_raises_and_stores_nothing(tmp_path: Path, event: Event) -> None:
    path = tmp_path / "audit.sqlite3"
    log = SQLiteAuditLog(path)
    log.append(event(0))
    # Another connection holds the write lock: the append cannot take it in time.
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    impatient = SQLiteAuditLog(path, timeout=0.05)
    with pytest.raises(AuditWriteError, match="denied"):
        AuditChain(impatient).append(event(1))
    blocker.execute("ROLLBACK")
    blocker.close()
    # A broken table (dropped by someone) also fails closed, with the transaction undone.
    side = sqlite3.connect(path)
    side.execute("ALTER TABLE audit_log RENAME TO moved_away")
    side.commit()
    side.close()
    with pytest.raises(AuditWriteError, match="cannot write"):
        log.append(event(2))
    assert len(log) == 1
    log.close()
    impatient.close()


@pytest.mark.parametrize(("durability", "level"), [("machine", 2), ("process", 1)])
def test_sqlite_uses_wal_and_the_durability_it_is_given(
    tmp_path: Path, durability: str, level: int
) -> None:
    log = SQLiteAuditLog(tmp_path / "a.sqlite3", durability=durability)  # type: ignore[arg-type]
    assert log.durability == durability
    # synchronous is a setting of the connection: read it on the log's own (2 = FULL).
    assert log._connection is not None
    assert log._connection.execute("PRAGMA synchronous").fetchone()[0] == level
    connection = sqlite3.connect(tmp_path / "a.sqlite3")
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    connection.close()
    log.close()


def test_sqlite_refuses_an_unknown_durability(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match='durability must be "machine"'):
        SQLiteAuditLog(tmp_path / "b.sqlite3", durability="FULL")  # type: ignore[arg-type]
    assert not (tmp_path / "b.sqlite3").exists()


def test_sqlite_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    path.write_text("this is not a database, but it is long enough to be read as one" * 20)
    with pytest.raises(ConfigurationError, match="cannot open the audit log"):
        SQLiteAuditLog(path)


def test_jsonl_fsync_policy_and_line_format(tmp_path: Path, event: Event) -> None:
    path = tmp_path / "audit.jsonl"
    with JsonlAuditLog(path) as log:
        assert isinstance(log, JsonlAuditLog) and log.fsync is True
        record = log.append(event())
    lines = path.read_bytes().splitlines()
    assert len(lines) == 1 and b'"record_hash":"' + record.record_hash.encode() in lines[0]
    assert path.with_name("audit.jsonl.head").read_text().strip() == record.record_hash


def test_jsonl_refuses_to_append_after_a_line_torn_while_open(tmp_path: Path, event: Event) -> None:
    path = tmp_path / "audit.jsonl"
    with JsonlAuditLog(path) as log:
        log.append(event())
        with path.open("ab") as handle:  # another writer failing half-way
            handle.write(b'{"decision_id": "half')
        with pytest.raises(AuditWriteError, match="incomplete"):
            log.append(event())


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        (lambda line: line[:-2] + b',"approved_by":"ciso"}\n', "not record fields"),
        (lambda line: b'{"tool":"other",' + line[1:], "more than once"),
    ],
    ids=["extra-key", "duplicate-key"],
)
def test_jsonl_reader_refuses_keys_the_hash_does_not_cover(
    change: Callable[[bytes], bytes], complaint: str, tmp_path: Path, event: Event
) -> None:
    path = tmp_path / "audit.jsonl"
    with JsonlAuditLog(path, fsync=False) as log:
        log.append(event())
    path.write_bytes(change(path.read_bytes()))
    with JsonlAuditLog(path, fsync=False) as log, pytest.raises(ValueError, match=complaint):
        list(log.records())


def test_jsonl_refuses_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot open"):
        JsonlAuditLog(tmp_path)


def test_jsonl_disk_full_raises_audit_write_error(tmp_path: Path, event: Event) -> None:
    path = tmp_path / "audit.jsonl"
    path.symlink_to("/dev/full")  # every write fails with ENOSPC
    with JsonlAuditLog(path) as log, pytest.raises(AuditWriteError, match="denied"):
        AuditChain(log).append(event())
