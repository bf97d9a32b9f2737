"""The schema is the library's: versioned migrations, idempotent, safe from several hosts."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from jevqueue.cli import main
from jevqueue.db import SCHEMA_VERSION, migrate, redacted, schema_version
from jevqueue.db._migrations import MIGRATIONS
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


def _migrate_as_release(url: str, schema: str, version: int) -> None:
    """Create ``schema`` as the release whose schema version was ``version`` left it."""
    quoted = f'"{schema}"'
    with psycopg.connect(url) as connection:
        connection.execute(f"CREATE SCHEMA {quoted}")
        connection.execute(
            f"CREATE TABLE {quoted}.schema_version (version integer PRIMARY KEY, "
            "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for number, description, sql in MIGRATIONS[:version]:
            connection.execute(sql.format(s=quoted))
            connection.execute(
                f"INSERT INTO {quoted}.schema_version (version, description) VALUES (%s, %s)",
                (number, description),
            )


def test_an_older_schema_is_upgraded_and_a_newer_one_refused(postgres_server: Any) -> None:
    from jevqueue.audit import PostgresAuditLog

    url = postgres_server.url
    _migrate_as_release(url, "m_old", 2)
    log = PostgresAuditLog(url, schema="m_old")
    with pytest.raises(AuditWriteError, match="run `jevqueue db migrate`"):
        log.append({"result": "ALLOW"})
    assert [step.split(":")[0] for step in migrate(url, schema="m_old").applied] == ["3", "4", "5"]
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


# --- who may write (and read the inbox): only the owner's functions ------------------

WRITE_FUNCTIONS = {
    "append_records",
    "flush_appends",
    "consume_approval",
    "prune_consumed_approvals",
    "file_approval_request",
    "cancel_approval_request",
    "decide_approval_request",
    "read_approval_requests",
    "prune_approval_requests",
}


def _direct_writers(connection: Any, schema: str) -> list[tuple[str, str, str]]:
    """(table, privilege, role) for every privilege but SELECT a non-owner holds."""
    rows = connection.execute(
        """
        SELECT c.relname, a.privilege_type, a.grantee::regrole::text
        FROM pg_class AS c, LATERAL aclexplode(c.relacl) AS a
        WHERE c.relnamespace = %s::regnamespace AND a.grantee <> c.relowner
            AND a.privilege_type <> 'SELECT'
        UNION
        SELECT c.relname, a.privilege_type, a.grantee::regrole::text
        FROM pg_class AS c JOIN pg_attribute AS t ON t.attrelid = c.oid,
            LATERAL aclexplode(t.attacl) AS a
        WHERE c.relnamespace = %s::regnamespace AND a.grantee <> c.relowner
            AND a.privilege_type <> 'SELECT'
        ORDER BY 1, 2, 3
        """,
        (f'"{schema}"', f'"{schema}"'),
    ).fetchall()
    return [tuple(row) for row in rows]


def test_every_function_runs_as_the_owner_with_a_fixed_search_path(
    postgres_schema: tuple[str, str],
) -> None:
    url, schema = postgres_schema
    with psycopg.connect(url, autocommit=True) as connection:
        functions = connection.execute(
            """
            SELECT p.proname, p.prosecdef, p.proconfig, p.proowner,
                EXISTS (SELECT 1 FROM aclexplode(p.proacl) AS a WHERE a.grantee = 0),
                p.proacl IS NULL
            FROM pg_proc AS p WHERE p.pronamespace = %s::regnamespace
            """,
            (f'"{schema}"',),
        ).fetchall()
        owners = connection.execute(
            "SELECT DISTINCT relowner FROM pg_class "
            "WHERE relnamespace = %s::regnamespace AND relkind = 'r'",
            (f'"{schema}"',),
        ).fetchall()
        writers = _direct_writers(connection, schema)
    assert {name for name, *_ in functions} == WRITE_FUNCTIONS
    assert len(owners) == 1
    for name, definer, config, owner, public, default_acl in functions:
        assert definer, f"{name} runs with its caller's rights"
        # nothing else: the flush must commit with the session's synchronous_commit
        assert config == ["search_path=pg_catalog, pg_temp"], (name, config)
        assert owner == owners[0][0], f"{name} is not owned by the tables' owner"
        assert not public and not default_acl, f"PUBLIC may execute {name}"
    assert writers == []


def test_the_server_refuses_to_prune_approvals_that_may_still_be_fresh(
    postgres_schema: tuple[str, str],
) -> None:
    from jevqueue.approvals import MINIMUM_RETENTION

    url, schema = postgres_schema
    prune = f'SELECT "{schema}".prune_consumed_approvals(%s::interval)'
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            f'INSERT INTO "{schema}".consumed_approvals VALUES '
            "('old', 'sha256:0', now() - interval '1 hour'), ('fresh', 'sha256:0', now())"
        )
        for too_short in (MINIMUM_RETENTION - timedelta(seconds=1), timedelta(0), None):
            with pytest.raises(psycopg.errors.InvalidParameterValue, match="may still be fresh"):
                connection.execute(prune, (too_short,))
        assert connection.execute(prune, (MINIMUM_RETENTION,)).fetchone() == (1,)
        left = connection.execute(f'SELECT approval_id FROM "{schema}".consumed_approvals')
        assert left.fetchall() == [("fresh",)]


@pytest.fixture
def role_names(postgres_server: Any) -> Iterator[Callable[[str], str]]:
    """Make login roles with unique names; drop them (and their grants) afterwards."""
    made: list[str] = []

    def make(stem: str) -> str:
        name = f"{stem}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(postgres_server.url, autocommit=True) as admin:
            admin.execute(f"CREATE ROLE {name} LOGIN")
        made.append(name)
        return name

    yield make
    with psycopg.connect(postgres_server.url, autocommit=True) as admin:
        for name in reversed(made):
            admin.execute(f"DROP OWNED BY {name} CASCADE")
            admin.execute(f"DROP ROLE {name}")


def _as(url: str, role: str) -> str:
    return url.replace("//postgres@", f"//{role}@", 1)


def test_an_upgrade_moves_an_older_release_s_roles_onto_the_functions(
    postgres_server: Any, role_names: Callable[[str], str]
) -> None:
    """The grants an older release documented keep working, minus every direct write."""
    from jevqueue.approvals import PostgresConsumedApprovals
    from jevqueue.audit import PostgresAuditLog, verify_audit_log

    url, schema = postgres_server.url, "m_upgrade_grants"
    worker, pruner, middle = role_names("old_worker"), role_names("old_pruner"), role_names("m")
    _migrate_as_release(url, schema, 3)
    with psycopg.connect(url, autocommit=True) as admin:  # as docs/deployment.md said then
        admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {worker}, {pruner}, {middle}")
        admin.execute(f"GRANT SELECT, INSERT ON {schema}.audit_log TO {worker}")
        admin.execute(
            f"GRANT SELECT, INSERT, UPDATE ON {schema}.audit_head, {schema}.audit_flush, "
            f"{schema}.consumed_approvals, {schema}.schema_version TO {worker}"
        )
        admin.execute(f"GRANT DELETE ON {schema}.consumed_approvals TO {pruner}")
        admin.execute(f"GRANT SELECT ON {schema}.schema_version TO {pruner}")
        # a write passed on by a grantee, and one on a single column
        admin.execute(f"GRANT UPDATE ON {schema}.audit_head TO {middle} WITH GRANT OPTION")
        admin.execute(f"GRANT INSERT (seq) ON {schema}.audit_log TO {pruner}")
    with psycopg.connect(_as(url, middle), autocommit=True) as passing_on:
        passing_on.execute(f"GRANT UPDATE ON {schema}.audit_head TO {pruner}")

    report = migrate(url, schema=schema)

    assert [step.split(":")[0] for step in report.applied] == ["4", "5"]
    s = f'"{schema}"'
    for note in (
        f"granted EXECUTE on {s}.append_records, {s}.flush_appends to {worker} "
        "(it held INSERT on audit_log)",
        f"granted EXECUTE on {s}.consume_approval to {worker} (it held INSERT on "
        "consumed_approvals)",
        f"granted EXECUTE on {s}.prune_consumed_approvals to {pruner} (it held DELETE on "
        "consumed_approvals)",
        f"revoked INSERT on {s}.audit_log from {worker}",
        f"revoked UPDATE on {s}.audit_head from {worker}",
        f"revoked UPDATE on {s}.consumed_approvals from {worker}",
        f"revoked INSERT on {s}.schema_version from {worker}",
        f"revoked UPDATE on {s}.audit_head from {middle}",
    ):
        assert note in report.notes, (note, report.notes)
        assert f"  {note}" in report.summary()
    with psycopg.connect(url, autocommit=True) as admin:
        assert _direct_writers(admin, schema) == []

    log = PostgresAuditLog(_as(url, worker), schema=schema)
    store = PostgresConsumedApprovals(_as(url, worker), schema=schema)
    try:
        for n in range(2):
            log.append({"result": "ALLOW", "reasons": [str(n)]})
        assert store.consume("approval-1", "sha256:0") and not store.consume("approval-1", "x")
        assert "approval-1" in store
    finally:
        log.close()
        store.close()
    pruning = PostgresConsumedApprovals(_as(url, pruner), schema=schema)
    try:
        assert pruning.prune() == 0
    finally:
        pruning.close()
    for role, statement in (
        (worker, f"INSERT INTO {schema}.audit_log SELECT * FROM {schema}.audit_log"),
        (worker, f"UPDATE {schema}.audit_head SET count = count + 1"),
        (worker, f"UPDATE {schema}.consumed_approvals SET approval_id = 'renamed'"),
        (worker, f"UPDATE {schema}.schema_version SET version = 99"),
        (pruner, f"DELETE FROM {schema}.consumed_approvals"),
        (pruner, f"UPDATE {schema}.audit_head SET count = 0"),
        (pruner, f"INSERT INTO {schema}.audit_log (seq) VALUES (2)"),
        (middle, f"UPDATE {schema}.audit_head SET count = 0"),
    ):
        with (
            psycopg.connect(_as(url, role), autocommit=True) as connection,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            connection.execute(statement)
    report = verify_audit_log(url, schema=schema)
    assert report.ok and report.count == 2, report.summary()
    with psycopg.connect(url, autocommit=True) as admin:
        assert admin.execute(f"SELECT approval_id FROM {schema}.consumed_approvals").fetchall() == [
            ("approval-1",)
        ]
        admin.execute(f"DROP SCHEMA {schema} CASCADE")
