"""Faults of a real PostgreSQL server: every one is a denial, nothing half-written, recovery.

Each test runs its own server (it kills, stops, fills or stalls it), through the real
enforcement point: a decision that cannot be recorded is denied and its tool never runs;
an approval whose use cannot be recorded is refused; once the database is back, the same
objects work again without a restart, and the chain verifies.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue.approvals import ApprovalAuthority, ConsumedApprovalsError, SignedApprovalVerifier
from jevqueue.audit import AuditChain, verify_audit_log
from jevqueue.errors import AuditWriteError
from jevqueue.policy import (
    Action,
    PolicyEnforcementPoint,
    VerdictKind,
    create_default_policy_decision_point,
    generic_registry,
)

psycopg = pytest.importorskip("psycopg")

pytestmark = pytest.mark.network_allowed  # each test's server listens on 127.0.0.1

CONTEXT = {
    "task_id": "task-42",
    "actor_id": "coding-agent",
    "workspace": "/workspace/project",
    "git_sha": "0123456789abcdef0123456789abcdef01234567",
}


@pytest.fixture
def server(postgres_server: Any, allow_loopback: Any) -> Iterator[Any]:
    """A server of this test's own (the session's one is only used to prove binaries exist)."""
    from jevqueue.db import migrate
    from jevqueue.testing.postgres_server import TemporaryPostgres

    own = TemporaryPostgres()
    try:
        own.start()
        migrate(own.url)
        yield own
    finally:
        own.close()


@pytest.fixture
def fleet(server: Any) -> Iterator[dict[str, Any]]:
    """A PEP wired to the server's audit log and consumed-approval set."""
    from jevqueue.approvals import PostgresConsumedApprovals
    from jevqueue.audit import PostgresAuditLog

    log = PostgresAuditLog(server.url, statement_timeout=1.0, connect_timeout=1.0)
    consumed = PostgresConsumedApprovals(server.url, statement_timeout=1.0, connect_timeout=1.0)
    authority = ApprovalAuthority(Ed25519PrivateKey.generate(), "alice")
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=log,
        approval_verifier=SignedApprovalVerifier({"alice": authority.public_key}),
        consumed_approvals=consumed,
    )
    yield {"log": log, "consumed": consumed, "authority": authority, "pep": pep}
    log.close()
    consumed.close()


def write_action(n: int = 0) -> Action:
    return Action.build(
        generic_registry(),
        "write_to_file",
        {"TargetFile": f"/workspace/project/src/f{n}.py", "CodeContent": "x = 1\n"},
        CONTEXT,
    )


def command_action() -> Action:
    return Action.build(
        generic_registry(),
        "run_command",
        {"CommandLine": "make test", "Cwd": "/workspace/project"},
        CONTEXT,
    )


def assert_denied_for_audit(pep: PolicyEnforcementPoint, n: int = 0) -> None:
    verdict = pep.evaluate(write_action(n))
    assert verdict.kind is VerdictKind.DENY and not verdict.allowed
    assert any("audit record could not be written" in reason for reason in verdict.reasons)


def assert_allowed(pep: PolicyEnforcementPoint, n: int = 0) -> None:
    verdict = pep.evaluate(write_action(n))
    assert verdict.allowed, verdict.reasons


def recovers(pep: PolicyEnforcementPoint, within: float = 20.0) -> int:
    """Evaluate until a decision is allowed again; return how many were denied meanwhile."""
    denied = 0
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if pep.evaluate(write_action(1000 + denied)).allowed:
            return denied
        denied += 1
        time.sleep(0.1)
    raise AssertionError(f"the writer did not recover within {within} s")


def store_recovers(consumed: Any, within: float = 20.0) -> None:
    """Look an approval up until the store answers again (a lookup consumes nothing)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            "probe" in consumed  # noqa: B015 - asked for its side effect: an answer
            return
        except ConsumedApprovalsError:
            time.sleep(0.1)
    raise AssertionError(f"the consumed-approval store did not recover within {within} s")


def chain_ok(server: Any, at_least: int) -> None:
    report = verify_audit_log(server.url)
    assert report.ok, report.summary()
    assert report.count >= at_least


def sql(server: Any, statement: str, parameters: tuple[Any, ...] = ()) -> list[Any]:
    with psycopg.connect(server.url, autocommit=True) as connection:
        cursor = connection.execute(statement, parameters)
        return cursor.fetchall() if cursor.description else []


# --- the database unreachable -------------------------------------------------------------


def test_a_database_that_is_down_denies_and_the_writer_recovers_by_itself(
    server: Any, fleet: dict[str, Any]
) -> None:
    pep = fleet["pep"]
    assert_allowed(pep)
    server.stop()
    assert_denied_for_audit(pep, 1)
    # an approval whose use cannot be recorded is refused, and so is the call
    action = command_action()
    record = fleet["authority"].issue(action.digest)
    verdict = pep.evaluate(action, [record])
    assert verdict.kind is VerdictKind.DENY and not verdict.allowed
    with pytest.raises(ConsumedApprovalsError, match="the approval is not fulfilled"):
        fleet["consumed"].consume(record.approval_id, action.digest)
    server.start()
    recovers(pep)
    store_recovers(fleet["consumed"])
    # the approval was not burnt by the failed attempt: it is usable once, now
    first_use = pep.evaluate(action, [record])
    assert first_use.allowed, first_use.reasons
    assert not pep.evaluate(action, [record]).allowed
    chain_ok(server, 3)


def test_an_outage_logs_one_line_per_denied_call_and_the_traceback_only_at_debug(
    server: Any, fleet: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    from jevqueue.adapters import GenericAdapter
    from jevqueue.errors import JevError

    pep = fleet["pep"]
    assert_allowed(pep)
    server.stop()
    caplog.clear()
    actions = [write_action(n) for n in range(3)]
    for action in actions:
        verdict = pep.evaluate(action)
        assert verdict.kind is VerdictKind.DENY and not verdict.allowed
    with pytest.raises(JevError):  # refused before evaluation; its record cannot be written
        GenericAdapter(pep).intercept_tool_call("no_such_tool", {}, CONTEXT)
    lines = [record for record in caplog.records if record.name == "jevqueue.pep"]
    assert len(lines) == 4, [record.getMessage() for record in lines]
    for record in lines:
        message = record.getMessage()
        assert record.levelno == logging.ERROR and record.exc_info is None
        assert "\n" not in message and "Traceback" not in message
        assert "AuditWriteError: the audit log postgresql://" in message, message
        assert "the decision was not recorded" in message
    for record, action in zip(lines, actions, strict=False):
        assert f"denying the write_to_file call {action.digest}" in record.getMessage()
    assert "the no_such_tool call refused before evaluation stays refused" in (
        lines[3].getMessage()
    )

    caplog.clear()
    caplog.set_level(logging.DEBUG, logger="jevqueue.pep")
    assert not pep.evaluate(write_action(4)).allowed
    lines = [record for record in caplog.records if record.name == "jevqueue.pep"]
    assert [record.levelno for record in lines] == [logging.ERROR, logging.DEBUG]
    assert lines[0].exc_info is None
    assert lines[1].exc_info is not None and lines[1].exc_info[0] is AuditWriteError
    assert "Traceback (most recent call last)" in caplog.text
    server.start()
    recovers(pep)


def test_a_worker_started_before_its_database_denies_until_it_is_up(server: Any) -> None:
    from jevqueue.audit import PostgresAuditLog

    server.stop()
    log = PostgresAuditLog(server.url, connect_timeout=0.5)
    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=log)
    assert_denied_for_audit(pep)
    server.start()
    recovers(pep)
    log.close()
    chain_ok(server, 1)


# --- a crash or a failover: the server dies under load ------------------------------------


def test_a_server_killed_under_load_loses_no_acknowledged_record(server: Any) -> None:
    """Writers in threads; the server is SIGKILLed and restarted on the same data.

    Every append that returned is in the log after the crash (it was committed), every
    one that raised was a denial, and the chain verifies: no fork, no gap, no torn record.
    """
    from jevqueue.audit import PostgresAuditLog

    log = PostgresAuditLog(server.url, statement_timeout=1.0, connect_timeout=0.5)
    chain = AuditChain(log)
    acknowledged: list[str] = []
    failures: list[str] = []
    stop = threading.Event()

    def work(worker: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            try:
                record = chain.append(
                    {"result": "ALLOW", "tool": f"w{worker}", "reasons": [str(n)]}
                )
            except AuditWriteError as error:
                failures.append(str(error))
                time.sleep(0.05)
            else:
                acknowledged.append(record.decision_id)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    server.kill()
    time.sleep(0.5)
    server.start()
    deadline = time.monotonic() + 20
    before = len(acknowledged)
    while len(acknowledged) < before + 50 and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for thread in threads:
        thread.join()
    log.close()
    assert failures, "the kill should have failed some appends"
    assert all("denied" in message for message in failures)
    assert len(acknowledged) >= before + 50, "the writers did not recover after the restart"
    report = verify_audit_log(server.url)
    assert report.ok, report.summary()
    stored = {row[0] for row in sql(server, "SELECT decision_id FROM jevqueue.audit_log")}
    assert set(acknowledged) <= stored  # durable before it returned
    # at most the appends whose COMMIT acknowledgement was lost are stored without an ack
    assert len(stored) - len(acknowledged) <= len(failures)


# --- a connection dropped mid-transaction, a statement timeout ----------------------------


def _stall_inserts(server: Any, seconds: float) -> None:
    """Make every insert into the log sleep inside its transaction (rows written, no commit)."""
    sql(
        server,
        "CREATE FUNCTION jevqueue.stall() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$ BEGIN PERFORM pg_sleep({seconds}); RETURN NULL; END $$",
    )
    sql(
        server,
        "CREATE TRIGGER stall AFTER INSERT ON jevqueue.audit_log "
        "FOR EACH STATEMENT EXECUTE FUNCTION jevqueue.stall()",
    )


def _unstall(server: Any) -> None:
    sql(server, "DROP TRIGGER stall ON jevqueue.audit_log")


def test_a_connection_terminated_mid_transaction_leaves_nothing_half_written(
    server: Any, fleet: dict[str, Any]
) -> None:
    pep = fleet["pep"]
    assert_allowed(pep)
    _stall_inserts(server, 30)
    outcome: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: outcome.update(v=pep.evaluate(write_action(7))))
    worker.start()
    # wait until the writer's rows are inserted and it sleeps before COMMIT
    deadline = time.monotonic() + 10
    pids: list[Any] = []
    while not pids and time.monotonic() < deadline:
        pids = sql(
            server,
            "SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT out_seq%%' "
            "AND state = 'active'",
        )
        time.sleep(0.05)
    assert pids, "the writer never reached its insert"
    sql(server, "SELECT pg_terminate_backend(%s)", (pids[0][0],))
    worker.join(timeout=30)
    verdict = outcome["v"]
    assert verdict.kind is VerdictKind.DENY and not verdict.allowed
    _unstall(server)
    assert sql(server, "SELECT count(*) FROM jevqueue.audit_log") == [(1,)]
    assert sql(server, "SELECT count FROM jevqueue.audit_head") == [(1,)]
    recovers(pep)
    chain_ok(server, 2)


def test_terminated_idle_connections_are_replaced_without_a_denial(
    server: Any, fleet: dict[str, Any]
) -> None:
    """pg_terminate_backend on every pooled connection, as a failover or restart does."""
    pep, consumed = fleet["pep"], fleet["consumed"]
    assert_allowed(pep)
    assert consumed.consume("apr-0", "sha256:" + "ab" * 32)
    terminated = sql(
        server,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name LIKE 'jevqueue %%'",
    )
    assert len(terminated) >= 2
    time.sleep(0.2)
    assert_allowed(pep, 1)  # the dead connection failed before anything could commit
    assert consumed.consume("apr-1", "sha256:" + "ab" * 32) is True
    assert consumed.consume("apr-0", "sha256:" + "ab" * 32) is False
    chain_ok(server, 2)


def test_a_statement_timeout_is_a_denial_and_stores_nothing(
    server: Any, fleet: dict[str, Any]
) -> None:
    pep = fleet["pep"]
    assert_allowed(pep)
    _stall_inserts(server, 3)  # longer than the log's statement_timeout of 1 s
    started = time.monotonic()
    verdict = pep.evaluate(write_action(2))
    assert time.monotonic() - started < 3
    assert verdict.kind is VerdictKind.DENY
    assert any("audit record could not be written" in reason for reason in verdict.reasons)
    with pytest.raises(AuditWriteError, match="QueryCanceled: canceling statement due to"):
        fleet["log"].append({"result": "ALLOW"})
    _unstall(server)
    assert sql(server, "SELECT count(*) FROM jevqueue.audit_log") == [(1,)]
    recovers(pep)
    chain_ok(server, 2)


def test_a_writer_holding_the_head_too_long_times_the_others_out(
    server: Any, fleet: dict[str, Any]
) -> None:
    """A stuck writer on another host holds the head's lock: others deny, never fork."""
    pep = fleet["pep"]
    assert_allowed(pep)
    with psycopg.connect(server.url) as stuck:
        stuck.execute("SELECT * FROM jevqueue.audit_head FOR UPDATE")
        assert_denied_for_audit(pep, 3)
        stuck.rollback()
    recovers(pep)
    chain_ok(server, 2)


# --- a full disk ---------------------------------------------------------------------------


@pytest.fixture
def small_disk(server: Any) -> Iterator[Path]:
    """A 4 MiB tmpfs the log's table is moved onto (needs root, as in CI)."""
    if os.geteuid() != 0:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("the full-disk test needs root to mount a small file system")
        pytest.skip("the full-disk test needs root to mount a small file system")
    mount = server.base / "small"
    mount.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0777", "tmpfs", str(mount)], check=True
    )
    try:
        space = mount / "space"
        space.mkdir()
        os.chown(space, *_owner(server.data_dir))
        sql(server, f"CREATE TABLESPACE small LOCATION '{space}'")
        sql(server, "ALTER TABLE jevqueue.audit_log SET TABLESPACE small")
        yield mount
    finally:
        server.stop("immediate")
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _owner(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_uid, status.st_gid


def test_a_full_disk_is_a_denial_and_the_writer_recovers_when_space_returns(
    server: Any, fleet: dict[str, Any], small_disk: Path
) -> None:
    pep = fleet["pep"]
    assert_allowed(pep)
    filler = small_disk / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
    denials = 0
    for n in range(400):  # until the table needs a page the disk cannot give
        verdict = pep.evaluate(write_action(n))
        if not verdict.allowed:
            denials += 1
            assert verdict.kind is VerdictKind.DENY
            assert any("audit record could not be written" in r for r in verdict.reasons)
            break
    assert denials == 1, "the full disk never refused a record"
    filler.unlink()
    recovers(pep)
    chain_ok(server, 2)


# --- a schema that was never migrated -----------------------------------------------------


def test_an_unmigrated_database_denies_and_says_to_migrate(server: Any) -> None:
    from jevqueue.audit import PostgresAuditLog

    log = PostgresAuditLog(server.url, schema="never_migrated")
    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=log)
    verdict = pep.evaluate(write_action())
    assert verdict.kind is VerdictKind.DENY
    with pytest.raises(AuditWriteError, match="jevqueue db migrate"):
        log.append({"result": "ALLOW"})
    log.close()


# --- a real failover: the primary dies, its synchronous standby is promoted ---------------


@pytest.fixture
def standby(server: Any) -> Iterator[Any]:
    from jevqueue.testing.postgres_server import TemporaryPostgres

    replica = TemporaryPostgres.standby_of(server)
    try:
        replica.start()
        sql(server, "ALTER SYSTEM SET synchronous_standby_names = '*'")
        sql(server, "SELECT pg_reload_conf()")
        deadline = time.monotonic() + 30
        while sql(server, "SELECT sync_state FROM pg_stat_replication") != [("sync",)]:
            if time.monotonic() > deadline:
                raise AssertionError("the standby never became synchronous")
            time.sleep(0.1)
        yield replica
    finally:
        replica.close()


def test_a_failover_to_a_synchronous_standby_keeps_every_acknowledged_record(
    server: Any, standby: Any
) -> None:
    """Writers in threads on a two-host URL; the primary is killed, the standby promoted.

    Every append that returned is on the new primary (it was flushed there before the
    primary acknowledged it), the others were denials, the writers carry on against the
    new primary by themselves, and the chain there verifies.
    """
    from jevqueue.audit import PostgresAuditLog

    url = (
        f"postgresql://postgres@127.0.0.1:{server.port},127.0.0.1:{standby.port}/postgres"
        "?target_session_attrs=read-write"
    )
    log = PostgresAuditLog(url, statement_timeout=2.0, connect_timeout=1.0)
    chain = AuditChain(log)
    acknowledged: list[str] = []
    failures: list[str] = []
    stop = threading.Event()

    def work(worker: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            try:
                record = chain.append(
                    {"result": "ALLOW", "tool": f"w{worker}", "reasons": [str(n)]}
                )
            except AuditWriteError as error:
                failures.append(str(error))
                time.sleep(0.05)
            else:
                acknowledged.append(record.decision_id)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    server.kill()
    before = len(acknowledged)
    standby.promote()
    deadline = time.monotonic() + 30
    while len(acknowledged) < before + 50 and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for thread in threads:
        thread.join()
    log.close()
    assert before > 0, "nothing was written before the failover"
    assert len(acknowledged) >= before + 50, "the writers did not carry on after the failover"
    assert all("denied" in message for message in failures)
    report = verify_audit_log(standby.url)
    assert report.ok, report.summary()
    stored = {row[0] for row in sql(standby, "SELECT decision_id FROM jevqueue.audit_log")}
    assert set(acknowledged) <= stored
