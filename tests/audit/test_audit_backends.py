"""One conformance suite for the chained audit logs a fleet can share: SQLite and PostgreSQL.

Every test runs against both backends: the same records, the same chain, the same
verification, and the same ways of tampering found the same way.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from jevqueue.audit import (
    GENESIS_HASH,
    AuditChain,
    AuditRecord,
    ChainedAuditLog,
    SQLiteAuditLog,
    export_audit_log,
    verify_audit_log,
)
from jevqueue.cli import main
from jevqueue.errors import AuditIntegrityError, AuditWriteError

Event = Callable[..., dict[str, Any]]

pytestmark = pytest.mark.network_allowed  # the PostgreSQL server listens on 127.0.0.1


@dataclass
class Backend:
    """How a test opens, addresses and tampers with one kind of log."""

    kind: str
    target: str  # what verify_audit_log and the CLI take: a file or a URL
    schema: str
    open: Callable[[], ChainedAuditLog]
    sql: Callable[[str], None]  # runs SQL where {t} is the table prefix

    def verify(self, **expected: Any) -> Any:
        return verify_audit_log(self.target, schema=self.schema, **expected)

    @property
    def cli_options(self) -> list[str]:
        return ["--schema", self.schema] if self.kind == "postgresql" else []


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        import sqlite3

        path = tmp_path / "audit.sqlite3"

        def run_sqlite(statement: str) -> None:
            connection = sqlite3.connect(path)
            connection.executescript(statement.format(t=""))
            connection.commit()
            connection.close()

        yield Backend("sqlite", str(path), "jevqueue", lambda: SQLiteAuditLog(path), run_sqlite)
        return
    url, schema = request.getfixturevalue("postgres_schema")
    import psycopg
    from jevqueue.audit import PostgresAuditLog

    def run_postgres(statement: str) -> None:
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(statement.format(t=f'"{schema}".'))

    opened: list[ChainedAuditLog] = []

    def open_postgres() -> ChainedAuditLog:
        log = PostgresAuditLog(url, schema=schema)
        opened.append(log)
        return log

    yield Backend("postgresql", url, schema, open_postgres, run_postgres)
    for log in opened:
        log.close()


def write(backend: Backend, event: Event, count: int = 6) -> list[Any]:
    log = backend.open()
    records = [AuditChain(log).append(event(n)) for n in range(count)]
    log.close()
    return records


def kinds(report: Any) -> list[str]:
    return [problem.kind for problem in report.problems]


def test_records_read_back_as_a_valid_chain(backend: Backend, event: Event) -> None:
    log = backend.open()
    written = [AuditChain(log).append(event(n)) for n in range(5)]
    assert list(log.records()) == written
    assert len(log) == 5  # type: ignore[arg-type]
    log.close()
    assert written[0].prev_hash == GENESIS_HASH
    assert [r.prev_hash for r in written[1:]] == [r.record_hash for r in written[:-1]]
    report = backend.verify()
    assert report.ok, report.summary()
    assert (report.count, report.head_hash, report.format) == (
        5,
        written[-1].record_hash,
        backend.kind,
    )


def test_both_backends_hash_the_same_event_alike(backend: Backend, event: Event) -> None:
    """The record format and hash are the backend's no business: same input, same hash."""
    fixed = {**event(3), "decision_id": "d-1", "timestamp": "2026-01-31T12:00:00.000000Z"}
    log = backend.open()
    record = log.append(fixed)
    log.close()
    assert record == AuditRecord.chained(fixed, GENESIS_HASH)


def test_reopening_resumes_the_chain(backend: Backend, event: Event) -> None:
    last = write(backend, event, 2)[-1]
    log = backend.open()
    resumed = AuditChain(log).append(event(9))
    log.close()
    assert resumed.prev_hash == last.record_hash
    assert backend.verify().ok


def test_two_writers_keep_one_chain(backend: Backend, event: Event) -> None:
    first, second = backend.open(), backend.open()
    for n in range(10):
        (first if n % 2 else second).append(event(n))
    first.close()
    second.close()
    report = backend.verify()
    assert report.ok and report.count == 10, report.summary()


def test_threads_sharing_one_log_keep_one_chain(backend: Backend, event: Event) -> None:
    log = backend.open()
    chain = AuditChain(log)
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        for n in range(40):
            chain.append(event(n))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log.close()
    report = backend.verify()
    assert report.ok and report.count == 320, report.summary()


_WRITER = textwrap.dedent(
    """
    import sys
    from jevqueue.audit import AuditChain, PostgresAuditLog, SQLiteAuditLog
    target, schema, count, name = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if target.startswith("postgresql://"):
        log = PostgresAuditLog(target, schema=schema)
    else:
        log = SQLiteAuditLog(target)
    chain = AuditChain(log)
    for n in range(count):
        chain.append({"result": "ALLOW", "tool": name, "reasons": [str(n)]})
    log.close()
    """
)


def test_concurrent_processes_form_one_chain_without_forks_or_gaps(backend: Backend) -> None:
    backend.open().close()
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, backend.target, backend.schema, "150", f"w-{n}"]
        )
        for n in range(4)
    ]
    assert [writer.wait(timeout=180) for writer in writers] == [0, 0, 0, 0]
    report = backend.verify()
    assert report.ok, report.summary()
    assert report.count == 600
    log = backend.open()
    records = list(log.records())
    log.close()
    tools = [record.tool for record in records]
    assert all(tools.count(f"w-{n}") == 150 for n in range(4))
    # Every writer's own records are in its order: nobody's append was lost or re-ordered.
    for n in range(4):
        mine = [int(r.reasons[0]) for r in records if r.tool == f"w-{n}"]
        assert mine == list(range(150))
    assert len({record.prev_hash for record in records}) == 600  # no fork


def test_a_closed_log_refuses_with_audit_write_error(backend: Backend, event: Event) -> None:
    log = backend.open()
    log.close()
    with pytest.raises(AuditWriteError, match="closed"):
        AuditChain(log).append(event())


# --- tampering, found alike -------------------------------------------------------------


def test_an_edit_is_found_with_its_decision_id(backend: Backend, event: Event) -> None:
    records = write(backend, event)
    backend.sql("UPDATE {t}audit_log SET result = 'ALLOW', reasons = '[]' WHERE seq = 2")
    report = backend.verify()
    assert kinds(report) == ["edited"]
    assert (report.problems[0].index, report.problems[0].decision_id) == (
        2,
        records[2].decision_id,
    )


def test_a_deletion_is_found(backend: Backend, event: Event) -> None:
    records = write(backend, event)
    backend.sql("DELETE FROM {t}audit_log WHERE seq = 2")
    report = backend.verify()
    deleted = [p for p in report.problems if p.kind == "deleted" and p.index is not None]
    assert deleted and (deleted[0].index, deleted[0].decision_id) == (2, records[3].decision_id)


def test_a_reordering_is_found(backend: Backend, event: Event) -> None:
    records = write(backend, event)
    backend.sql(
        "UPDATE {t}audit_log SET seq = 100 WHERE seq = 1; "
        "UPDATE {t}audit_log SET seq = 1 WHERE seq = 2; "
        "UPDATE {t}audit_log SET seq = 2 WHERE seq = 100"
    )
    report = backend.verify()
    assert set(kinds(report)) == {"reordered"}
    assert (report.problems[0].index, report.problems[0].decision_id) == (
        1,
        records[2].decision_id,
    )


def test_a_truncated_tail_is_found(backend: Backend, event: Event) -> None:
    write(backend, event)
    backend.sql("DELETE FROM {t}audit_log WHERE seq >= 4")
    report = backend.verify()
    assert kinds(report) == ["truncated"]
    assert "2 record(s) were cut off after index 3" in report.problems[0].message


def test_truncation_with_a_forged_head_needs_an_external_anchor(
    backend: Backend, event: Event
) -> None:
    records = write(backend, event)
    head = backend.verify().head_hash
    backend.sql(
        "DELETE FROM {t}audit_log WHERE seq = 5; "
        f"UPDATE {{t}}audit_head SET count = 5, record_hash = '{records[4].record_hash}'"
    )
    assert backend.verify().ok  # the limit of any unanchored hash chain
    assert kinds(backend.verify(expected_head=head, expected_count=6)) == [
        "truncated",
        "truncated",
    ]


def test_rows_added_outside_the_log_are_found(backend: Backend, event: Event) -> None:
    write(backend, event)
    backend.sql("UPDATE {t}audit_head SET count = 4")
    assert kinds(backend.verify()) == ["inserted"]


@pytest.mark.parametrize("records", [6, 0])
def test_records_without_their_head_row_fail(backend: Backend, event: Event, records: int) -> None:
    write(backend, event, count=records)
    backend.sql("DELETE FROM {t}audit_log WHERE seq >= 3; DELETE FROM {t}audit_head")
    report = backend.verify()
    if backend.kind == "sqlite" and records == 0:
        # an SQLite file is created before its head row, so an empty one may lack it
        assert report.ok and report.notes, report.summary()
    else:
        assert kinds(report) == ["unanchored"] and "audit_head" in report.problems[0].message


def test_an_unreadable_row_is_malformed_not_a_crash(backend: Backend, event: Event) -> None:
    write(backend, event)
    backend.sql("UPDATE {t}audit_log SET reasons = 'not json' WHERE seq = 1")
    report = backend.verify()
    assert kinds(report)[0] == "malformed" and report.problems[0].index == 1


# --- the command line, and the JSONL copy -----------------------------------------------


def test_the_cli_verifies_and_names_problems(backend: Backend, event: Event) -> None:
    records = write(backend, event)
    runner = CliRunner()
    result = runner.invoke(main, ["audit", "verify", backend.target, *backend.cli_options])
    assert result.exit_code == 0, result.output
    assert f"OK: 6 records, chain intact, head {records[-1].record_hash}" in result.output
    backend.sql("UPDATE {t}audit_log SET tool = 'run_command' WHERE seq = 3")
    result = runner.invoke(main, ["audit", "verify", backend.target, *backend.cli_options])
    assert result.exit_code == 1
    assert f"edited: index 3 (decision {records[3].decision_id})" in result.output


def test_export_writes_a_jsonl_copy_that_verifies_alike(
    backend: Backend, event: Event, tmp_path: Path
) -> None:
    records = write(backend, event)
    copy = tmp_path / "copy.jsonl"
    result = CliRunner().invoke(
        main, ["audit", "export", backend.target, str(copy), *backend.cli_options]
    )
    assert result.exit_code == 0, result.output
    report = verify_audit_log(copy, expected_head=records[-1].record_hash, expected_count=6)
    assert report.ok and report.format == "jsonl" and report.count == 6, report.summary()
    assert report.head_hash == backend.verify().head_hash
    # the copy is the same chain: editing it is found the same way
    lines = copy.read_bytes().splitlines(keepends=True)
    copy.write_bytes(b"".join([*lines[:2], lines[2].replace(b'"ALLOW"', b'"DENY"'), *lines[3:]]))
    assert kinds(verify_audit_log(copy)) == ["edited"]


def test_a_broken_log_is_not_exported(backend: Backend, event: Event, tmp_path: Path) -> None:
    write(backend, event)
    backend.sql("DELETE FROM {t}audit_log WHERE seq = 2")
    with pytest.raises(AuditIntegrityError, match="deleted"):
        export_audit_log(backend.target, tmp_path / "copy.jsonl", schema=backend.schema)
    assert not (tmp_path / "copy.jsonl").exists()
    result = CliRunner().invoke(
        main,
        ["audit", "export", backend.target, str(tmp_path / "c2.jsonl"), *backend.cli_options],
    )
    assert result.exit_code == 1 and "does not verify" in result.output
