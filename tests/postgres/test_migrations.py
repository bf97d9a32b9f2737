"""The schema is the library's: versioned migrations, idempotent, safe from several hosts."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
from click.testing import CliRunner
from jevqueue.cli import main
from jevqueue.db import SCHEMA_VERSION, migrate, redacted, schema_version
from jevqueue.errors import AuditWriteError, ConfigurationError

psycopg = pytest.importorskip("psycopg")

pytestmark = pytest.mark.network_allowed  # the session's server listens on 127.0.0.1


def test_migrate_creates_every_version_once_and_is_idempotent(postgres_server: Any) -> None:
    url = postgres_server.url
    first = migrate(url, schema="m_once")
    assert (first.before, first.after, len(first.applied)) == (0, SCHEMA_VERSION, SCHEMA_VERSION)
    again = migrate(url, schema="m_once")
    assert (again.before, again.after, again.applied) == (SCHEMA_VERSION, SCHEMA_VERSION, ())
    assert "up to date" in again.summary()
    assert schema_version(url, schema="m_once") == SCHEMA_VERSION
    with psycopg.connect(url) as connection:
        versions = connection.execute("SELECT version FROM m_once.schema_version").fetchall()
    assert sorted(v for (v,) in versions) == list(range(1, SCHEMA_VERSION + 1))


_MIGRATOR = textwrap.dedent(
    """
    import sys
    from jevqueue.db import migrate
    print(len(migrate(sys.argv[1], schema="m_race").applied))
    """
)


def test_hosts_migrating_at_once_apply_each_step_exactly_once(postgres_server: Any) -> None:
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _MIGRATOR, postgres_server.url], stdout=subprocess.PIPE
        )
        for _ in range(4)
    ]
    applied = sorted(int(child.communicate(timeout=120)[0]) for child in children)
    assert applied == [0, 0, 0, SCHEMA_VERSION]


def test_an_older_schema_is_upgraded_and_a_newer_one_refused(postgres_server: Any) -> None:
    from jevqueue.audit import PostgresAuditLog

    url = postgres_server.url
    migrate(url, schema="m_old")
    with psycopg.connect(url, autocommit=True) as connection:  # as an older release left it
        connection.execute("DROP FUNCTION m_old.append_records")
        connection.execute("DROP TABLE m_old.audit_flush")
        connection.execute("DROP INDEX m_old.audit_log_decision_id")
        connection.execute("DELETE FROM m_old.schema_version WHERE version = 3")
    log = PostgresAuditLog(url, schema="m_old")
    with pytest.raises(AuditWriteError, match="run `jevqueue db migrate`"):
        log.append({"result": "ALLOW"})
    assert migrate(url, schema="m_old").applied == (
        "3: appends chained inside the server, decisions found by id, a row per server "
        "process to flush commits",
    )
    assert log.append({"result": "ALLOW"}).prev_hash.startswith("sha256:")
    log.close()
    with psycopg.connect(url, autocommit=True) as connection:  # as a newer release leaves it
        connection.execute("INSERT INTO m_old.schema_version VALUES (99, 'from the future')")
    with pytest.raises(ConfigurationError, match="upgrade jevqueue"):
        migrate(url, schema="m_old")


def test_the_command_migrates_from_the_environment(
    postgres_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JEVQUEUE_DATABASE_URL", postgres_server.url)
    runner = CliRunner()
    result = runner.invoke(main, ["db", "migrate", "--schema", "m_cli"])
    assert result.exit_code == 0, result.output
    assert f"migrated from version 0 to {SCHEMA_VERSION}" in result.output
    result = runner.invoke(main, ["db", "migrate", "--schema", "m_cli"])
    assert result.exit_code == 0 and "up to date" in result.output


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        (["db", "migrate", "--url", "postgresql://nobody@127.0.0.1:1/none"], "cannot migrate"),
        (["db", "migrate", "--url", "host='unterminated"], "not a libpq connection string"),
        (["db", "migrate", "--url", "postgresql://x@127.0.0.1/x", "--schema", "Bad-Name"], "plain"),
    ],
)
def test_bad_databases_are_clear_errors(arguments: list[str], complaint: str) -> None:
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 2
    assert complaint in result.output


def test_no_url_anywhere_says_how_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from jevqueue.approvals import PostgresConsumedApprovals
    from jevqueue.audit import PostgresAuditLog

    monkeypatch.delenv("JEVQUEUE_DATABASE_URL", raising=False)
    for backend in (PostgresAuditLog, PostgresConsumedApprovals):
        with pytest.raises(ConfigurationError, match="JEVQUEUE_DATABASE_URL"):
            backend()
    result = CliRunner().invoke(main, ["db", "migrate"])
    assert result.exit_code == 2 and "JEVQUEUE_DATABASE_URL" in result.output


def test_passwords_never_reach_messages() -> None:
    assert redacted("postgresql://app:s3cret@db:5432/x") == "postgresql://app:***@db:5432/x"
    assert redacted("host=db password='s3 cret' dbname=x") == "host=db password=*** dbname=x"


def test_the_core_does_not_import_the_driver_until_a_backend_is_used() -> None:
    probe = textwrap.dedent(
        """
        import sys
        import jevqueue, jevqueue.audit, jevqueue.approvals, jevqueue.db, jevqueue.cli
        jevqueue.audit.verify_audit_log, jevqueue.approvals.check_approvals
        assert "psycopg" not in sys.modules, "psycopg was imported"
        sys.modules["psycopg"] = None  # as if the extra were not installed
        try:
            jevqueue.audit.PostgresAuditLog("postgresql://x@127.0.0.1/x")
        except ImportError as error:
            print(error)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert 'pip install "jevqueue[postgres]"' in done.stdout


def test_a_worker_role_without_update_or_delete_on_the_log_can_append(
    postgres_server: Any,
) -> None:
    """The grants docs/deployment.md recommends suffice, and the log stays append-only."""
    from jevqueue.audit import PostgresAuditLog, verify_audit_log

    url = postgres_server.url
    migrate(url, schema="m_grants")
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS fleet_worker")
        admin.execute("CREATE ROLE fleet_worker LOGIN")
        admin.execute("GRANT USAGE ON SCHEMA m_grants TO fleet_worker")
        admin.execute("GRANT SELECT, INSERT ON m_grants.audit_log TO fleet_worker")
        admin.execute(
            "GRANT SELECT, INSERT, UPDATE ON m_grants.audit_head, m_grants.audit_flush, "
            "m_grants.consumed_approvals, m_grants.schema_version TO fleet_worker"
        )
    worker_url = url.replace("postgres@", "fleet_worker@")
    log = PostgresAuditLog(worker_url, schema="m_grants")
    for n in range(3):
        log.append({"result": "ALLOW", "reasons": [str(n)]})
    log.close()
    with psycopg.connect(worker_url, autocommit=True) as worker:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            worker.execute("UPDATE m_grants.audit_log SET result = 'DENY'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            worker.execute("DELETE FROM m_grants.audit_log")
    assert verify_audit_log(url, schema="m_grants").count == 3
