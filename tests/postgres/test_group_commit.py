"""Concurrent writers share a flush of the WAL instead of queueing for one each."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest
from jevqueue.audit import verify_audit_log

psycopg = pytest.importorskip("psycopg")

pytestmark = pytest.mark.network_allowed  # the session's server listens on 127.0.0.1


def _wal_syncs(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
    return int(row[0])


def test_threads_sharing_a_log_share_statements_and_flushes(
    postgres_schema: tuple[str, str],
) -> None:
    from jevqueue.audit import PostgresAuditLog

    url, schema = postgres_schema
    log = PostgresAuditLog(url, schema=schema)
    log.append({"result": "ALLOW"})  # connected, schema checked
    statements = []
    write = log._write

    def counting(batch: Any) -> Any:
        statements.append(len(batch))
        return write(batch)

    log._write = counting  # type: ignore[method-assign]
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        for n in range(50):
            log.append({"result": "ALLOW", "reasons": [str(n)]})

    before = _wal_syncs(url)
    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    syncs = _wal_syncs(url) - before
    log.close()
    assert sum(statements) == 400
    assert len(statements) <= 200, f"{len(statements)} appends for 400 records"
    assert syncs <= 200, f"{syncs} WAL flushes for 400 records"
    report = verify_audit_log(url, schema=schema)
    assert report.ok and report.count == 401, report.summary()


_WRITER = textwrap.dedent(
    """
    import sys
    from jevqueue.audit import PostgresAuditLog
    log = PostgresAuditLog(sys.argv[1], schema=sys.argv[2])
    log.append({"result": "ALLOW"})
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.readline()
    for n in range(100):
        log.append({"result": "ALLOW", "reasons": [str(n)]})
    log.close()
    """
)


def test_processes_share_flushes(postgres_schema: tuple[str, str]) -> None:
    url, schema = postgres_schema
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, url, schema],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    for writer in writers:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
    before = _wal_syncs(url)
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
    assert [writer.wait(timeout=120) for writer in writers] == [0] * 8
    syncs = _wal_syncs(url) - before
    assert syncs < 800, f"{syncs} WAL flushes for 800 records: no flush was shared"
    report = verify_audit_log(url, schema=schema)
    assert report.ok and report.count == 808, report.summary()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_opens_its_own_pool(postgres_schema: tuple[str, str]) -> None:
    from jevqueue.audit import PostgresAuditLog

    url, schema = postgres_schema
    log = PostgresAuditLog(url, schema=schema)
    log.append({"result": "ALLOW"})
    parents_pool = log._pool
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            log.append({"result": "ALLOW", "tool": "child"})
            os._exit(0 if log._pool is not parents_pool else 3)
        except BaseException:
            os._exit(4)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert log._pool is parents_pool
    log.append({"result": "ALLOW", "tool": "parent"})  # the parent's connections still work
    log.close()
    report = verify_audit_log(url, schema=schema)
    assert report.ok and report.count == 3, report.summary()
