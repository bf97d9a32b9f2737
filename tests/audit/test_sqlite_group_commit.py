"""Threads sharing one SQLite log share its commits, and each waits for its own record."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jevqueue.audit import SQLiteAuditLog, verify_audit_log
from jevqueue.errors import AuditWriteError

Event = Callable[..., dict[str, Any]]


class Transactions:
    """Counts the records each explicit transaction of the log's connection commits.

    The first append is slowed down inside its transaction, so that the other threads
    arrive while it writes: they must queue behind it and share the next commit. A record
    appended outside ``BEGIN`` is a transaction of its own (an autocommit statement).
    """

    def __init__(self, connection: sqlite3.Connection, pause: float) -> None:
        self.connection = connection
        self.pause = pause
        self.committed: list[int] = []  # records per explicit transaction
        self._paused = False
        self._begin = 0

    def __call__(self, statement: str) -> None:
        if statement.startswith("BEGIN"):
            self._begin = self.connection.total_changes
        elif statement.startswith("COMMIT"):
            # each record changes two rows: its own and the head
            self.committed.append((self.connection.total_changes - self._begin) // 2)
        elif statement.startswith("INSERT INTO audit_log") and not self._paused:
            self._paused = True
            time.sleep(self.pause)

    def transactions(self, records: int) -> int:
        return len(self.committed) + records - sum(self.committed)


def run_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(index: int) -> None:
        barrier.wait()
        try:
            results[index] = work(index)
        except Exception as error:  # checked by the test
            results[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


@pytest.mark.parametrize("durability", ["machine", "process"])
def test_concurrent_appends_share_commits_and_each_record_is_committed_on_return(
    tmp_path: Path, event: Event, durability: str
) -> None:
    path = tmp_path / "audit.sqlite3"
    log = SQLiteAuditLog(path, durability=durability)  # type: ignore[arg-type]
    assert log._connection is not None
    transactions = Transactions(log._connection, pause=0.2)
    log._connection.set_trace_callback(transactions)
    observer = sqlite3.connect(path)

    def append(index: int) -> str:
        record_hash = log.append(event(index)).record_hash
        # Returned, so committed: another connection already sees the record.
        found = observer_lookup(path, record_hash)
        assert found, f"record {index} was not committed when append returned"
        return record_hash

    hashes = run_threads(8, append)
    assert all(isinstance(value, str) for value in hashes), hashes
    # the seven that waited behind the first shared commits
    assert max(transactions.committed) > 1
    assert transactions.transactions(8) < 8
    log.close()
    observer.close()
    report = verify_audit_log(path, expected_count=8)
    assert report.ok, report
    assert sorted(record.record_hash for record in SQLiteAuditLog(path).records()) == sorted(hashes)


def observer_lookup(path: Path, record_hash: str) -> bool:
    connection = sqlite3.connect(path)
    try:
        row = connection.execute(
            "SELECT 1 FROM audit_log WHERE record_hash = ?", (record_hash,)
        ).fetchone()
    finally:
        connection.close()
    return row is not None


def test_a_malformed_record_in_a_shared_commit_fails_alone(tmp_path: Path, event: Event) -> None:
    path = tmp_path / "audit.sqlite3"
    log = SQLiteAuditLog(path)
    assert log._connection is not None
    log._connection.set_trace_callback(Transactions(log._connection, pause=0.2))

    def append(index: int) -> object:
        if index == 3:
            return log.append({**event(index), "result": 42})  # not a string: malformed
        return log.append(event(index))

    results = run_threads(6, append)
    failures = [value for value in results if isinstance(value, Exception)]
    assert len(failures) == 1 and results[3] is failures[0], results
    log.close()
    report = verify_audit_log(path, expected_count=5)
    assert report.ok, report


def test_a_failed_commit_fails_every_caller_in_it(tmp_path: Path, event: Event) -> None:
    path = tmp_path / "audit.sqlite3"
    log = SQLiteAuditLog(path)
    log.append(event(0))
    log.close()
    results = run_threads(4, lambda index: log.append(event(index)))
    assert all(isinstance(value, AuditWriteError) for value in results), results
    assert verify_audit_log(path, expected_count=1).ok


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_a_parent_thread_writes_appends_on_its_own(
    tmp_path: Path, event: Event
) -> None:
    path = tmp_path / "audit.sqlite3"
    log = SQLiteAuditLog(path)
    log.append(event(0))
    assert log._connection is not None
    writing = threading.Event()
    release = threading.Event()

    def hold(statement: str) -> None:  # the parent's writer stops inside its commit
        if statement.startswith("INSERT INTO audit_log") and not writing.is_set():
            writing.set()
            release.wait(10)

    log._connection.set_trace_callback(hold)
    writer = threading.Thread(target=lambda: log.append(event(1)))
    writer.start()
    assert writing.wait(10)
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        signal.alarm(20)  # waiting for the parent's writer would hang: SIGALRM ends it
        try:
            log.append(event(2))
            os._exit(0)
        except BaseException:
            os._exit(4)
    release.set()
    writer.join(10)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    log.close()
    assert verify_audit_log(path, expected_count=3).ok
