"""The database schema, as numbered migrations the library applies itself."""

from __future__ import annotations

from dataclasses import dataclass

from jevqueue.db._connection import database_url, driver, quoted_schema, redacted
from jevqueue.db._failure_cause import failure_cause
from jevqueue.db._inbox_functions import INBOX_FUNCTIONS
from jevqueue.db._write_functions import WRITE_FUNCTIONS
from jevqueue.errors import ConfigurationError

__all__ = [
    "DEFAULT_SCHEMA",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "MigrationReport",
    "check_schema",
    "migrate",
    "schema_version",
]

DEFAULT_SCHEMA = "jevqueue"

# (version, what it does, SQL with {s} for the quoted schema). Never edit a released
# migration: add the next one.
MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "the audit chain and the consumed-approval set",
        """
        CREATE TABLE {s}.audit_log (
            seq             bigint PRIMARY KEY CHECK (seq >= 0),
            decision_id     text NOT NULL,
            timestamp       text NOT NULL,
            action_digest   text NOT NULL,
            tool            text NOT NULL,
            result          text NOT NULL,
            reasons         text NOT NULL,
            obligations     text NOT NULL,
            rule_ids        text NOT NULL,
            policy_revision text NOT NULL,
            task_id         text NOT NULL,
            actor_id        text NOT NULL,
            environment     text NOT NULL,
            workspace       text NOT NULL,
            git_sha         text NOT NULL,
            allowed         boolean NOT NULL,
            prev_hash       text NOT NULL,
            record_hash     text NOT NULL
        );
        CREATE TABLE {s}.audit_head (
            id          integer PRIMARY KEY CHECK (id = 0),
            count       bigint NOT NULL,
            record_hash text NOT NULL
        );
        INSERT INTO {s}.audit_head (id, count, record_hash)
            VALUES (0, 0, 'sha256:' || repeat('0', 64));
        CREATE TABLE {s}.consumed_approvals (
            approval_id   text PRIMARY KEY,
            action_digest text NOT NULL,
            consumed_at   timestamptz NOT NULL DEFAULT now()
        );
        """,
    ),
    (
        2,
        "an index for pruning consumed approvals by age",
        "CREATE INDEX consumed_approvals_consumed_at ON {s}.consumed_approvals (consumed_at);",
    ),
    (
        3,
        "appends chained inside the server, decisions found by id, a row per server "
        "process to flush commits",
        """
        CREATE INDEX audit_log_decision_id ON {s}.audit_log (decision_id);
        CREATE TABLE {s}.audit_flush (
            backend_pid integer PRIMARY KEY,
            flushes     bigint NOT NULL
        ) WITH (fillfactor = 50);
        CREATE FUNCTION {s}.append_records(
            prefixes bytea[], suffixes bytea[], decision_ids text[], timestamps text[],
            action_digests text[], tools text[], results text[], reasons text[],
            obligations text[], rule_ids text[], policy_revisions text[], task_ids text[],
            actor_ids text[], environments text[], workspaces text[], git_shas text[],
            alloweds boolean[]
        ) RETURNS TABLE (out_seq bigint, out_prev text, out_hash text)
        LANGUAGE plpgsql AS $$
        DECLARE
            head_count bigint;
            head_hash text;
            next_hash text;
        BEGIN
            -- The caller makes the commit durable with a synchronous write afterwards, so
            -- the head's lock is not held across a flush.
            PERFORM pg_catalog.set_config('synchronous_commit', 'off', true);
            SELECT h.count, h.record_hash INTO head_count, head_hash
                FROM {s}.audit_head AS h WHERE h.id = 0 FOR UPDATE;
            IF head_hash IS NULL THEN
                RAISE EXCEPTION 'the audit_head row is missing';
            END IF;
            FOR i IN 1 .. pg_catalog.cardinality(prefixes) LOOP
                next_hash := 'sha256:' || pg_catalog.encode(pg_catalog.sha256(
                    prefixes[i] || pg_catalog.convert_to(head_hash, 'UTF8') || suffixes[i]
                ), 'hex');
                INSERT INTO {s}.audit_log (
                    seq, decision_id, timestamp, action_digest, tool, result, reasons,
                    obligations, rule_ids, policy_revision, task_id, actor_id, environment,
                    workspace, git_sha, allowed, prev_hash, record_hash
                ) VALUES (
                    head_count, decision_ids[i], timestamps[i], action_digests[i], tools[i],
                    results[i], reasons[i], obligations[i], rule_ids[i], policy_revisions[i],
                    task_ids[i], actor_ids[i], environments[i], workspaces[i], git_shas[i],
                    alloweds[i], head_hash, next_hash
                );
                out_seq := head_count;
                out_prev := head_hash;
                out_hash := next_hash;
                RETURN NEXT;
                head_count := head_count + 1;
                head_hash := next_hash;
            END LOOP;
            UPDATE {s}.audit_head SET count = head_count, record_hash = head_hash
                WHERE id = 0;
        END
        $$;
        """,
    ),
    (
        4,
        "workers write only through functions that run as the schema's owner; every other "
        "role's direct writes to the tables are revoked",
        WRITE_FUNCTIONS,
    ),
    (
        5,
        "the approval inbox: requests agents file and reviewers decide, written only "
        "through functions that enforce the inbox's rules",
        INBOX_FUNCTIONS,
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]
"""The schema version this release of jevqueue reads and writes."""


@dataclass(frozen=True)
class MigrationReport:
    """What :func:`migrate` did.

    Attributes:
        url: the database, password redacted.
        schema: the schema migrated.
        before: the version found (0: no jevqueue schema yet).
        after: the version now in place (:data:`SCHEMA_VERSION`).
        applied: the descriptions of the migrations applied now, in order.
        notes: what the migrations reported while running, in order — such as the
            privileges they granted or revoked.
    """

    url: str
    schema: str
    before: int
    after: int
    applied: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        """What was done, for the command line: one line, then one per note."""
        if not self.applied:
            return f"schema {self.schema} of {self.url} is at version {self.after}: up to date"
        return "\n".join(
            (
                f"schema {self.schema} of {self.url} migrated from version {self.before} to "
                f"{self.after}: " + "; ".join(self.applied),
                *(f"  {note}" for note in self.notes),
            )
        )


_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS {s}.schema_version (
    version     integer PRIMARY KEY,
    description text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)
"""


def migrate(url: str | None = None, *, schema: str = DEFAULT_SCHEMA) -> MigrationReport:
    """Create or upgrade jevqueue's tables in ``schema`` to :data:`SCHEMA_VERSION`.

    Idempotent: a schema already at the current version is left alone. All pending
    migrations run in one transaction under an advisory lock, so two hosts migrating at
    once apply each step exactly once, and a failed migration leaves the schema as it was.

    The role that migrates owns the tables and the functions through which every other
    role writes them (they run as it), so run each migration as the same role. Version 4
    moves the roles that could write the tables onto those functions and revokes their
    direct writes; :attr:`MigrationReport.notes` lists each grant and revocation.

    Args:
        url: a libpq connection string (default ``$JEVQUEUE_DATABASE_URL``).
        schema: the schema holding jevqueue's tables.

    Raises:
        ConfigurationError: no URL, the database cannot be reached or written, or its
            schema is newer than this release of jevqueue.
    """
    target = database_url(url)
    quoted = quoted_schema(schema)
    psycopg, _ = driver()
    try:
        with psycopg.connect(target, autocommit=False, connect_timeout=10) as connection:
            connection.execute("SET lock_timeout = 60000")
            connection.execute(
                "SELECT pg_advisory_xact_lock(hashtext('jevqueue.migrate.' || %s))", (schema,)
            )
            connection.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted}")
            connection.execute(_VERSION_TABLE.format(s=quoted))
            row = connection.execute(
                f"SELECT coalesce(max(version), 0) FROM {quoted}.schema_version"
            ).fetchone()
            before = int(row[0]) if row else 0
            _refuse_newer(before, target, schema)
            applied: list[str] = []
            notes: list[str] = []
            connection.add_notice_handler(
                lambda notice: notes.append(" ".join(str(notice.message_primary).split()))
            )
            for version, description, sql in MIGRATIONS:
                if version <= before:
                    continue
                connection.execute(sql.format(s=quoted))
                connection.execute(
                    f"INSERT INTO {quoted}.schema_version (version, description) VALUES (%s, %s)",
                    (version, description),
                )
                applied.append(f"{version}: {description}")
            connection.commit()
    except psycopg.Error as error:
        raise ConfigurationError(
            f"cannot migrate the jevqueue schema {schema!r} of {redacted(target)} "
            f"({failure_cause(error, grants=False)}): check the connection string, that "
            "its user may create schemas and tables, and that it is the role that owns the "
            "schema's tables and functions (the one earlier migrations ran as)"
        ) from error
    return MigrationReport(
        redacted(target), schema, before, SCHEMA_VERSION, tuple(applied), tuple(notes)
    )


def schema_version(url: str | None = None, *, schema: str = DEFAULT_SCHEMA) -> int:
    """Return the schema version of the database (0 when jevqueue's tables are absent).

    Raises:
        ConfigurationError: no URL, or the database cannot be reached.
    """
    target = database_url(url)
    psycopg, _ = driver()
    try:
        with psycopg.connect(target, autocommit=True, connect_timeout=10) as connection:
            return read_version(connection, schema)
    except psycopg.Error as error:
        raise ConfigurationError(
            f"cannot read the jevqueue schema of {redacted(target)} ({type(error).__name__}: "
            f"{error}): check the connection string"
        ) from error


def read_version(connection: object, schema: str) -> int:
    """The schema version seen through an open connection (0 when absent)."""
    quoted = quoted_schema(schema)
    execute = connection.execute  # type: ignore[attr-defined]
    found = execute("SELECT to_regclass(%s)", (f"{quoted}.schema_version",)).fetchone()
    if found is None or found[0] is None:
        return 0
    row = execute(f"SELECT coalesce(max(version), 0) FROM {quoted}.schema_version").fetchone()
    return int(row[0]) if row else 0


def check_schema(connection: object, url: str, schema: str) -> None:
    """Raise unless the schema seen through ``connection`` is at :data:`SCHEMA_VERSION`.

    Raises:
        ConfigurationError: the schema is missing, older (run ``jevqueue db migrate``) or
            newer (upgrade jevqueue) than this release.
    """
    version = read_version(connection, schema)
    _refuse_newer(version, url, schema)
    if version < SCHEMA_VERSION:
        raise ConfigurationError(
            f"the jevqueue schema {schema!r} of {redacted(url)} is at version {version}, this "
            f"release needs {SCHEMA_VERSION}: run `jevqueue db migrate` (or "
            "jevqueue.db.migrate(url)) once, then retry"
        )


def _refuse_newer(version: int, url: str, schema: str) -> None:
    if version > SCHEMA_VERSION:
        raise ConfigurationError(
            f"the jevqueue schema {schema!r} of {redacted(url)} is at version {version}, newer "
            f"than this release of jevqueue understands ({SCHEMA_VERSION}): upgrade jevqueue"
        )
