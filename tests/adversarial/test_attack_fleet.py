"""Attacks on a fleet that shares one PostgreSQL database: replays across hosts, races, edits.

Each "host" is its own process with its own enforcement point, consumed-approval store and
audit log, all on the session's real server. A replayed approval must never let a second
command run anywhere; a record edited in the shared log must be named by `audit verify`.
A worker logged in with exactly the grants docs/deployment.md lists does all its work, and
every write it tries around the schema's functions is refused by the server.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from jevqueue.adapters import GenericAdapter
from jevqueue.approvals import ApprovalAuthority, SignedApprovalVerifier
from jevqueue.cli import main
from jevqueue.errors import UnfulfilledObligationError
from jevqueue.policy import (
    Action,
    ApprovalQuorum,
    PolicyEnforcementPoint,
    create_default_policy_decision_point,
    generic_registry,
)

pytest.importorskip("psycopg")

pytestmark = pytest.mark.network_allowed  # the session's server listens on 127.0.0.1

CONTEXT = {
    "task_id": "task-42",
    "actor_id": "coding-agent",
    "workspace": "/workspace/project",
    "git_sha": "0123456789abcdef0123456789abcdef01234567",
}
COMMAND = {"CommandLine": "make deploy", "Cwd": "/workspace/project"}

# One host: judge the command with the approval; only if allowed, "run" it (a marker file).
_HOST = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from jevqueue.adapters import GenericAdapter
    from jevqueue.approvals import ApprovalRecord, PostgresConsumedApprovals
    from jevqueue.approvals import SignedApprovalVerifier
    from jevqueue.audit import PostgresAuditLog
    from jevqueue.errors import UnfulfilledObligationError
    from jevqueue.policy import create_default_policy_decision_point
    from jevqueue.policy import PolicyEnforcementPoint

    url, schema, key, record, ran, name = sys.argv[1:7]
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=PostgresAuditLog(url, schema=schema),
        approval_verifier=SignedApprovalVerifier(
            {"alice": Ed25519PublicKey.from_public_bytes(bytes.fromhex(key))}
        ),
        consumed_approvals=PostgresConsumedApprovals(url, schema=schema),
    )
    context = json.loads(sys.argv[7])
    command = json.loads(sys.argv[8])
    sys.stdin.readline()  # every host starts at once
    try:
        allowed = GenericAdapter(pep).intercept_tool_call(
            "run_command", command, context,
            approval_records=[ApprovalRecord.from_dict(json.loads(record))],
        )
    except UnfulfilledObligationError:
        allowed = False
    if allowed:
        (Path(ran) / name).write_text("ran")
    print(json.dumps(allowed))
    """
)


def _hosts(
    count: int, url: str, schema: str, authority: ApprovalAuthority, record: Any, ran: Path
) -> list[bool]:
    public = authority.public_key.public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _HOST,
                url,
                schema,
                public,
                json.dumps(record.to_dict()),
                str(ran),
                f"host-{n}",
                json.dumps(CONTEXT),
                json.dumps(COMMAND),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(count)
    ]
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    outcomes = [json.loads(child.communicate(timeout=120)[0]) for child in children]
    assert all(child.returncode == 0 for child in children)
    return outcomes


@pytest.fixture
def authority() -> ApprovalAuthority:
    return ApprovalAuthority(Ed25519PrivateKey.generate(), "alice")


def _digest() -> str:
    return Action.build(generic_registry(), "run_command", COMMAND, CONTEXT).digest


def test_an_approval_used_on_one_host_is_refused_on_every_other(
    postgres_schema: tuple[str, str], authority: ApprovalAuthority, tmp_path: Path
) -> None:
    from jevqueue.approvals import PostgresConsumedApprovals
    from jevqueue.audit import PostgresAuditLog, verify_audit_log

    url, schema = postgres_schema
    record = authority.issue(_digest())
    assert _hosts(1, url, schema, authority, record, tmp_path) == [True]
    # a second host, in this process, with a store and a log of its own
    log = PostgresAuditLog(url, schema=schema)
    store = PostgresConsumedApprovals(url, schema=schema)
    adapter = GenericAdapter(
        PolicyEnforcementPoint(
            create_default_policy_decision_point(),
            audit_logger=log,
            approval_verifier=SignedApprovalVerifier({"alice": authority.public_key}),
            consumed_approvals=store,
        )
    )
    with pytest.raises(UnfulfilledObligationError) as refused:
        adapter.intercept_tool_call("run_command", COMMAND, CONTEXT, approval_records=[record])
    assert any("already used" in reason for reason in refused.value.verdict.reasons)
    log.close()
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["host-0"]
    report = verify_audit_log(url, schema=schema)
    assert report.ok and report.count == 2, report.summary()


def test_eight_hosts_racing_with_one_approval_run_the_command_once(
    postgres_schema: tuple[str, str], authority: ApprovalAuthority, tmp_path: Path
) -> None:
    from jevqueue.audit import verify_audit_log

    url, schema = postgres_schema
    outcomes = _hosts(8, url, schema, authority, authority.issue(_digest()), tmp_path)
    assert sorted(outcomes) == [False] * 7 + [True]
    assert len(list(tmp_path.iterdir())) == 1
    report = verify_audit_log(url, schema=schema)
    assert report.ok and report.count == 8, report.summary()


def _shared_log(postgres_schema: tuple[str, str]) -> list[Any]:
    from jevqueue.audit import PostgresAuditLog

    url, schema = postgres_schema
    log = PostgresAuditLog(url, schema=schema)
    records = [
        log.append({"result": result, "tool": "run_command", "reasons": [reason]})
        for result, reason in [
            ("ALLOW", "fine"),
            ("DENY", "touches production"),
            ("ALLOW", "fine"),
        ]
    ]
    log.close()
    return records


def _sql(postgres_schema: tuple[str, str], statement: str) -> None:
    import psycopg

    url, schema = postgres_schema
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(statement.format(t=f'"{schema}".'))


def test_a_denial_rewritten_as_an_allow_in_the_database_is_named(
    postgres_schema: tuple[str, str],
) -> None:
    records = _shared_log(postgres_schema)
    _sql(postgres_schema, "UPDATE {t}audit_log SET result = 'ALLOW', allowed = true WHERE seq = 1")
    url, schema = postgres_schema
    result = CliRunner().invoke(main, ["audit", "verify", url, "--schema", schema, "--json"])
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert [(p["kind"], p["index"], p["decision_id"]) for p in report["problems"]] == [
        ("edited", 1, records[1].decision_id)
    ]


def test_a_forged_row_slipped_in_beyond_the_head_is_named(
    postgres_schema: tuple[str, str],
) -> None:
    records = _shared_log(postgres_schema)
    last = records[-1]
    _sql(
        postgres_schema,
        "INSERT INTO {t}audit_log SELECT 3, 'forged', timestamp, action_digest, tool, result, "
        "reasons, obligations, rule_ids, policy_revision, task_id, actor_id, environment, "
        f"workspace, git_sha, allowed, '{last.record_hash}', record_hash "
        "FROM {t}audit_log WHERE seq = 2",
    )
    url, schema = postgres_schema
    result = CliRunner().invoke(main, ["audit", "verify", url, "--schema", schema])
    assert result.exit_code == 1
    assert "inserted" in result.output and "edited: index 3 (decision forged)" in result.output


# --- workers with exactly the grants docs/deployment.md lists -----------------------------
# A worker may append to the chain and consume approvals, through the schema owner's
# functions, and read; it may write no table. Each attack below is a statement that a
# compromised worker (or pruning job) sends with its own credentials: the server must
# refuse it, nothing may change, and the fleet must go on deciding and auditing.

_DEPLOYMENT = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"


def _documented_grants() -> list[str]:
    """The statements of the grants block in docs/deployment.md, comments dropped."""
    text = _DEPLOYMENT.read_text("utf-8")
    found = re.search(r"```sql\n(-- every worker.*?)```", text, re.DOTALL)
    assert found, "docs/deployment.md lost its grants block"
    lines = [line for line in found.group(1).splitlines() if not line.startswith("--")]
    return [statement.strip() for statement in "\n".join(lines).split(";") if statement.strip()]


@dataclass(frozen=True)
class Fleet:
    """The admin's URL, the schema, and one URL per documented role."""

    url: str
    schema: str
    worker: str
    pruner: str
    auditor: str
    reviewer: str


@pytest.fixture
def fleet(postgres_schema: tuple[str, str]) -> Iterator[Fleet]:
    import psycopg

    url, schema = postgres_schema
    suffix = uuid.uuid4().hex[:8]
    roles = {
        stem: f"{stem}_{suffix}"
        for stem in ("fleet_worker", "approvals_pruner", "auditor", "approvals_reviewer")
    }
    with psycopg.connect(url, autocommit=True) as admin:
        for role in roles.values():
            admin.execute(f"CREATE ROLE {role} LOGIN")
        for statement in _documented_grants():
            statement = statement.replace("SCHEMA jevqueue ", f'SCHEMA "{schema}" ')
            statement = statement.replace("jevqueue.", f'"{schema}".')
            for stem, role in roles.items():
                statement = re.sub(rf"\b{stem}\b", role, statement)
            admin.execute(statement)

    def login(role: str) -> str:
        return url.replace("//postgres@", f"//{role}@", 1)

    yield Fleet(
        url,
        schema,
        login(roles["fleet_worker"]),
        login(roles["approvals_pruner"]),
        login(roles["auditor"]),
        login(roles["approvals_reviewer"]),
    )
    with psycopg.connect(url, autocommit=True) as admin:
        for role in roles.values():
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            admin.execute(f"DROP OWNED BY {role} CASCADE")
            admin.execute(f"DROP ROLE {role}")


def _worker_pep(fleet: Fleet, authority: ApprovalAuthority) -> tuple[Any, Any, Any]:
    """A PEP of a worker host, on the worker's credentials: (adapter, log, store)."""
    from jevqueue.approvals import PostgresConsumedApprovals
    from jevqueue.audit import PostgresAuditLog

    log = PostgresAuditLog(fleet.worker, schema=fleet.schema)
    store = PostgresConsumedApprovals(fleet.worker, schema=fleet.schema)
    adapter = GenericAdapter(
        PolicyEnforcementPoint(
            create_default_policy_decision_point(),
            audit_logger=log,
            approval_verifier=SignedApprovalVerifier({"alice": authority.public_key}),
            consumed_approvals=store,
        )
    )
    return adapter, log, store


WRITE = {"TargetFile": "/workspace/project/src/app.py", "CodeContent": "x = 1\n"}


def _state(fleet: Fleet) -> tuple[list[Any], ...]:
    """Everything a worker could damage, as the owner sees it."""
    import psycopg

    t = f'"{fleet.schema}".'
    with psycopg.connect(fleet.url, autocommit=True) as admin:
        return tuple(
            admin.execute(f"SELECT * FROM {t}{table} ORDER BY 1").fetchall()
            for table in ("audit_log", "audit_head", "consumed_approvals", "schema_version")
        )


def _fleet_keeps_deciding(fleet: Fleet, authority: ApprovalAuthority, records: int) -> None:
    """A worker's next decision is allowed and audited, and the chain verifies."""
    from jevqueue.audit import verify_audit_log

    adapter, log, store = _worker_pep(fleet, authority)
    try:
        assert adapter.intercept_tool_call("write_to_file", WRITE, CONTEXT) is True
    finally:
        log.close()
        store.close()
    report = verify_audit_log(fleet.auditor, schema=fleet.schema)
    assert report.ok and report.count == records + 1, report.summary()


def test_a_worker_with_the_documented_grants_does_all_its_work(
    fleet: Fleet, authority: ApprovalAuthority, tmp_path: Path
) -> None:
    """Decide, append, consume, look up, reconnect, verify, export, prune: nothing more."""
    import psycopg
    from jevqueue.approvals import ConsumedApprovalsError, PostgresConsumedApprovals
    from jevqueue.audit import export_audit_log, verify_audit_log

    record = authority.issue(_digest())
    # two hosts in processes of their own race for one approval: one runs the command
    assert sorted(_hosts(2, fleet.worker, fleet.schema, authority, record, tmp_path)) == [
        False,
        True,
    ]
    assert len(list(tmp_path.iterdir())) == 1
    adapter, log, store = _worker_pep(fleet, authority)
    try:
        assert adapter.intercept_tool_call("write_to_file", WRITE, CONTEXT) is True
        assert record.approval_id in store and "never-used" not in store
        # the server drops the worker's idle connections: the retry looks its batch up
        with psycopg.connect(fleet.url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (fleet.worker.split("//")[1].split("@")[0],),
            )
        log.append({"result": "ALLOW", "reasons": ["after a reconnect"]})
        assert len(log) == 4 and len(list(log.records())) == 4
        with pytest.raises(ConsumedApprovalsError, match="lacks a grant"):
            store.prune()  # a worker is not the pruning job
    finally:
        log.close()
        store.close()
    pruning = PostgresConsumedApprovals(fleet.pruner, schema=fleet.schema)
    try:
        assert pruning.prune() == 0
    finally:
        pruning.close()
    for reader in (fleet.worker, fleet.auditor):
        report = verify_audit_log(reader, schema=fleet.schema)
        assert report.ok and report.count == 4, report.summary()
    export_audit_log(fleet.auditor, tmp_path / "copy.jsonl", schema=fleet.schema)
    assert verify_audit_log(tmp_path / "copy.jsonl").count == 4


_ROW_AT_THE_HEAD = (
    "INSERT INTO {t}audit_log SELECT h.count, 'stray', l.timestamp, l.action_digest, l.tool, "
    "l.result, l.reasons, l.obligations, l.rule_ids, l.policy_revision, l.task_id, "
    "l.actor_id, l.environment, l.workspace, l.git_sha, l.allowed, h.record_hash, "
    "l.record_hash FROM {t}audit_log AS l JOIN {t}audit_head AS h ON l.seq = h.count - 1"
)

_WORKER_WRITES = {
    "a stray row at seq = count": _ROW_AT_THE_HEAD,
    "a stray row far ahead": "INSERT INTO {t}audit_log (seq) VALUES (1000000)",
    "the head moved on": "UPDATE {t}audit_head SET count = count + 1",
    "the head moved back": "UPDATE {t}audit_head SET count = 0, record_hash = 'sha256:0'",
    "a denial rewritten": "UPDATE {t}audit_log SET result = 'ALLOW', allowed = true",
    "records deleted": "DELETE FROM {t}audit_log",
    "the log emptied": "TRUNCATE {t}audit_log",
    "a flush row planted": "INSERT INTO {t}audit_flush VALUES (pg_backend_pid() + 1, 0)",
    "a newer schema announced": "INSERT INTO {t}schema_version VALUES (99, 'from the future')",
    "the schema version rewound": "UPDATE {t}schema_version SET version = version - 10",
    "a used approval renamed": "UPDATE {t}consumed_approvals SET approval_id = 'renamed'",
    "a used approval deleted": "DELETE FROM {t}consumed_approvals",
    "a used approval back-dated": "UPDATE {t}consumed_approvals SET consumed_at = 'epoch'",
    "an approval consumed back-dated": (
        "INSERT INTO {t}consumed_approvals VALUES ('planted', 'sha256:0', 'epoch')"
    ),
    "approvals pruned at once": "SELECT {t}prune_consumed_approvals('0 seconds')",
    "the head locked by hand": "SELECT * FROM {t}audit_head FOR UPDATE",
    "the head's table locked": "LOCK TABLE {t}audit_head IN EXCLUSIVE MODE",
    "a trigger on the log": (
        "CREATE TRIGGER t BEFORE UPDATE ON {t}audit_log "
        "FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()"
    ),
}


@pytest.mark.parametrize("attack", sorted(_WORKER_WRITES))
def test_the_server_refuses_every_direct_write_of_a_worker(
    fleet: Fleet, authority: ApprovalAuthority, attack: str
) -> None:
    import psycopg

    adapter, log, store = _worker_pep(fleet, authority)
    try:
        assert adapter.intercept_tool_call("write_to_file", WRITE, CONTEXT) is True
        assert adapter.intercept_tool_call("write_to_file", WRITE, CONTEXT) is True
        assert store.consume("used-approval", "sha256:" + "ab" * 32) is True
    finally:
        log.close()
        store.close()
    before = _state(fleet)
    with (
        psycopg.connect(fleet.worker) as worker,  # in a transaction, as a lock would be held
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        worker.execute(_WORKER_WRITES[attack].format(t=f'"{fleet.schema}".'))
    assert _state(fleet) == before
    _fleet_keeps_deciding(fleet, authority, records=2)


def test_a_used_approval_cannot_be_brought_back_into_use_by_a_worker_or_the_pruner(
    fleet: Fleet, authority: ApprovalAuthority, tmp_path: Path
) -> None:
    import psycopg
    from jevqueue.approvals import PostgresConsumedApprovals
    from jevqueue.audit import verify_audit_log
    from jevqueue.errors import ConfigurationError

    record = authority.issue(_digest())
    assert _hosts(1, fleet.worker, fleet.schema, authority, record, tmp_path) == [True]
    t = f'"{fleet.schema}".'
    with psycopg.connect(fleet.worker, autocommit=True) as worker:
        for statement in (
            f"UPDATE {t}consumed_approvals SET approval_id = approval_id || '-old'",
            f"DELETE FROM {t}consumed_approvals WHERE approval_id = %s",
            f"UPDATE {t}consumed_approvals SET consumed_at = 'epoch' WHERE approval_id = %s",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                worker.execute(statement, (record.approval_id,) if "%s" in statement else None)
    with psycopg.connect(fleet.pruner, autocommit=True) as pruner:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="may still be fresh"):
            pruner.execute(f"SELECT {t}prune_consumed_approvals('1 second')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            pruner.execute(f"DELETE FROM {t}consumed_approvals")
    pruning = PostgresConsumedApprovals(fleet.pruner, schema=fleet.schema)
    try:
        with pytest.raises(ConfigurationError, match="may still be fresh"):
            pruning.prune(timedelta(seconds=1))
        assert pruning.prune() == 0
    finally:
        pruning.close()
    # the replay, on another host: refused, not run, and the refusal is in the log
    assert _hosts(1, fleet.worker, fleet.schema, authority, record, tmp_path) == [False]
    assert [path.name for path in tmp_path.iterdir()] == ["host-0"]
    report = verify_audit_log(fleet.auditor, schema=fleet.schema)
    assert report.ok and report.count == 2, report.summary()
    from jevqueue.audit import PostgresAuditLog

    log = PostgresAuditLog(fleet.auditor, schema=fleet.schema)
    first, replay = list(log.records())
    log.close()
    assert first.allowed and first.action_digest == _digest()
    assert not replay.allowed and replay.action_digest == _digest()
    assert any("already used" in reason for reason in replay.reasons), replay.reasons


def test_the_write_functions_refuse_malformed_batches_whole(
    fleet: Fleet, authority: ApprovalAuthority
) -> None:
    """A worker calling append_records by hand cannot leave a half batch or break the head."""
    import psycopg

    adapter, log, store = _worker_pep(fleet, authority)
    try:
        assert adapter.intercept_tool_call("write_to_file", WRITE, CONTEXT) is True
    finally:
        log.close()
        store.close()
    before = _state(fleet)
    text = ["x", "x"]
    call = (
        f'SELECT * FROM "{fleet.schema}".append_records('
        + ", ".join(["%s::bytea[]"] * 2 + ["%s::text[]"] * 14 + ["%s::boolean[]"])
        + ")"
    )
    batches = {
        "arrays of unequal length": [[b"{", b"{"], [b"}", b"}"], *([text] * 13), ["x"], [True]],
        "a null prefix": [[None], [b"}"], *([["x"]] * 14), [True]],
        "null arrays": [None] * 17,
        "a null decision id": [[b"{"], [b"}"], [None], *([["x"]] * 13), [True]],
    }
    with psycopg.connect(fleet.worker, autocommit=True) as worker:
        for name, arguments in batches.items():
            with pytest.raises(psycopg.Error):
                worker.execute(call, arguments)
            assert _state(fleet) == before, name
    _fleet_keeps_deciding(fleet, authority, records=1)


def test_a_role_without_the_worker_grants_cannot_append_or_consume(fleet: Fleet) -> None:
    """EXECUTE is not PUBLIC's: an auditor reads the log and can write nothing."""
    import psycopg

    t = f'"{fleet.schema}".'
    before = _state(fleet)
    with psycopg.connect(fleet.auditor, autocommit=True) as auditor:
        for statement in (
            f"SELECT {t}consume_approval('a', 'sha256:0')",
            f"SELECT {t}flush_appends()",
            f"SELECT {t}prune_consumed_approvals('1 day')",
            f"SELECT * FROM {t}append_records('{{}}', '{{}}', "
            + ", ".join(["'{}'"] * 14)
            + ", '{}')",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                auditor.execute(statement)
    assert _state(fleet) == before


def test_objects_a_worker_creates_do_not_divert_the_functions(fleet: Fleet) -> None:
    """The functions' search_path is fixed: look-alike temp tables catch nothing."""
    import psycopg

    t = f'"{fleet.schema}".'
    with psycopg.connect(fleet.worker, autocommit=True) as worker:
        worker.execute(
            "CREATE TEMP TABLE consumed_approvals (approval_id text PRIMARY KEY, "
            "action_digest text, consumed_at timestamptz DEFAULT now())"
        )
        worker.execute(
            "CREATE TEMP TABLE audit_flush (backend_pid integer PRIMARY KEY, flushes bigint)"
        )
        worker.execute("SET search_path = pg_temp, public")
        assert worker.execute(f"SELECT {t}consume_approval('a-1', 'sha256:0')").fetchone() == (
            True,
        )
        worker.execute(f"SELECT {t}flush_appends()")
        assert worker.execute("SELECT count(*) FROM pg_temp.consumed_approvals").fetchone() == (0,)
        assert worker.execute("SELECT count(*) FROM pg_temp.audit_flush").fetchone() == (0,)
    assert [row[0] for row in _state(fleet)[2]] == ["a-1"]


# --- the approval inbox: workers file, reviewers decide, nobody writes the tables -------


def _inbox_request(quorum: Any = None) -> Any:
    from jevqueue.policy import ApprovalRequest, Verdict

    action = Action.build(generic_registry(), "run_command", COMMAND, CONTEXT)
    verdict = Verdict.allow_with_obligations(
        ["explicit_approval"], "a deploy needs a person", quorum=quorum
    )
    return ApprovalRequest.of(action, verdict.bound(action.digest, ""), "call-1")


def test_a_worker_files_and_a_reviewer_decides_each_only_through_its_functions(
    fleet: Fleet,
) -> None:
    import psycopg
    from jevqueue.approvals import InboxState, PostgresApprovalInbox
    from jevqueue.errors import InboxError

    reviewer_key = ApprovalAuthority(Ed25519PrivateKey.generate(), "alice")
    worker = PostgresApprovalInbox(fleet.worker, schema=fleet.schema)
    reviewer = PostgresApprovalInbox(fleet.reviewer, schema=fleet.schema)
    try:
        filed = worker.file(_inbox_request())
        with pytest.raises(InboxError, match="lacks a grant"):  # an agent never decides
            worker.approve(filed.request_id, reviewer_key.issue(filed.action_digest))
        with pytest.raises(InboxError, match="lacks a grant"):  # a reviewer never files
            reviewer.file(_inbox_request())
        assert reviewer.get(filed.request_id).state is InboxState.PENDING
        approved = reviewer.approve(filed.request_id, reviewer_key.issue(filed.action_digest))
        assert approved.state is InboxState.APPROVED
        assert worker.get(filed.request_id).records == approved.records
        second = worker.file(_inbox_request())
    finally:
        worker.close()
        reviewer.close()
    t = f'"{fleet.schema}".'
    for login, statement in (
        (fleet.worker, f"UPDATE {t}approval_requests SET state = 'approved'"),
        (fleet.worker, f"SELECT request FROM {t}approval_requests"),  # others' arguments
        (fleet.worker, f"SELECT {t}prune_approval_requests('0 seconds')"),
        (fleet.worker, f"INSERT INTO {t}approval_decisions SELECT * FROM {t}approval_decisions"),
        (
            fleet.worker,
            f"SELECT {t}decide_approval_request('{second.request_id}', 'x', false, 'no', NULL)",
        ),
        (fleet.reviewer, f"UPDATE {t}approval_requests SET expires_at = now() + interval '1 day'"),
        (fleet.reviewer, f"DELETE FROM {t}approval_decisions"),
        (fleet.reviewer, f"SELECT {t}cancel_approval_request('{second.request_id}')"),
        (fleet.auditor, f"SELECT request_id FROM {t}approval_requests"),
    ):
        with (
            psycopg.connect(login, autocommit=True) as connection,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            connection.execute(statement)
    with psycopg.connect(fleet.url, autocommit=True) as admin:
        states = admin.execute(
            f"SELECT request_id, state FROM {t}approval_requests ORDER BY created_at"
        ).fetchall()
    assert states == [(filed.request_id, "approved"), (second.request_id, "pending")]


def test_a_worker_filing_directly_cannot_name_another_actor_or_a_mismatched_request(
    fleet: Fleet,
) -> None:
    """The requester's actor comes from the request's context, never from what the filer
    claims beside it; a request whose document and columns disagree is not filed."""
    import psycopg
    from jevqueue.approvals import PostgresApprovalInbox, Requester
    from jevqueue.errors import SelfApprovalError

    asked = _inbox_request()
    document = json.loads(
        json.dumps({**asked.to_dict(), "digest_document": asked.action.digest_document()})
    )
    requester = Requester.of(asked).to_dict()
    file = (
        f'SELECT "{fleet.schema}".file_approval_request('
        "%s, %s, %s, %s::jsonb, %s::jsonb, interval '5 minutes')"
    )
    request_id = "ab" * 16
    with psycopg.connect(fleet.worker, autocommit=True) as connection:
        for digest, tool, asker in (
            (asked.action_digest, asked.tool, {**requester, "actor_id": "nobody"}),
            ("sha256:" + "00" * 32, asked.tool, requester),
            (asked.action_digest, "read_file", requester),
        ):
            with pytest.raises(psycopg.errors.CheckViolation, match="does not agree"):
                connection.execute(
                    file, (request_id, digest, tool, json.dumps(document), json.dumps(asker))
                )
        connection.execute(
            file,
            (
                request_id,
                asked.action_digest,
                asked.tool,
                json.dumps(document),
                json.dumps(requester),
            ),
        )
    with psycopg.connect(fleet.url, autocommit=True) as admin:
        assert admin.execute(
            f'SELECT actor_id FROM "{fleet.schema}".approval_requests'
        ).fetchall() == [(CONTEXT["actor_id"],)]
    reviewer = PostgresApprovalInbox(fleet.reviewer, schema=fleet.schema)
    try:
        itself = ApprovalAuthority(Ed25519PrivateKey.generate(), CONTEXT["actor_id"])
        with pytest.raises(SelfApprovalError):
            reviewer.approve(request_id, itself.issue(asked.action_digest))
    finally:
        reviewer.close()


def test_the_decide_function_keeps_the_rules_for_a_reviewer_who_calls_it_directly(
    fleet: Fleet,
) -> None:
    """A reviewer's own SQL cannot approve the wrong digest, in another name, or twice."""
    import psycopg
    from jevqueue.approvals import PostgresApprovalInbox

    worker = PostgresApprovalInbox(fleet.worker, schema=fleet.schema)
    try:
        filed = worker.file(_inbox_request(ApprovalQuorum(2)))
    finally:
        worker.close()
    alice = ApprovalAuthority(Ed25519PrivateKey.generate(), "alice")
    good = alice.issue(filed.action_digest).to_dict()
    wrong = alice.issue("sha256:" + "00" * 32).to_dict()
    decide = f'SELECT "{fleet.schema}".decide_approval_request(%s, %s, %s, %s, %s::jsonb)'
    with psycopg.connect(fleet.reviewer, autocommit=True) as connection:

        def call(who: str, approve: bool, reason: str, record: Any) -> str:
            row = connection.execute(
                decide,
                (
                    filed.request_id,
                    who,
                    approve,
                    reason,
                    None if record is None else json.dumps(record),
                ),
            ).fetchone()
            return str(row[0])

        assert call("alice", True, "", wrong) == "digest"
        assert call("bob", True, "", good) == "approver"
        assert call("coding-agent", True, "", {**good, "approver_id": "coding-agent"}) == "self"
        assert call("bob", False, "  ", None) == "malformed"
        assert call("alice", True, "", good) == "recorded"
        assert call("alice", False, "changed my mind", None) == "twice"
        assert call("carol", False, "no", None) == "recorded"
        assert call("dave", False, "no", None) == "closed"


def test_who_may_approve_is_read_from_the_filed_request_never_from_the_caller(
    fleet: Fleet,
) -> None:
    """A worker cannot file a request that nobody, or anybody, may settle against its
    policy's shape; a reviewer outside the named group cannot approve, and one member's
    approval does not settle two of ops."""
    import psycopg
    from jevqueue.approvals import InboxState, PostgresApprovalInbox, Requester

    ops = ApprovalQuorum.of_group("ops", ["alice", "bob", "carol"], 2)
    asked = _inbox_request(ops)
    document = json.loads(
        json.dumps({**asked.to_dict(), "digest_document": asked.action.digest_document()})
    )
    requester = json.dumps(Requester.of(asked).to_dict())
    file = (
        f'SELECT "{fleet.schema}".file_approval_request('
        "%s, %s, %s, %s::jsonb, %s::jsonb, interval '5 minutes')"
    )
    group = {"count": 2, "group": "ops", "approvers": ["alice", "bob", "carol"]}
    with psycopg.connect(fleet.worker, autocommit=True) as connection:
        for number, quorums in enumerate(
            (
                None,
                [],
                [{**group, "count": 0}],
                [{**group, "count": 4}],
                [{**group, "count": True}],
                [{**group, "count": 2.5}],
                [{**group, "approvers": ["alice", "alice", "bob"]}],
                [{**group, "approvers": []}],
                [{**group, "approvers": ["alice", "bob bob"]}],
                [{**group, "group": None}],
                [{"count": 1, "group": "ops", "approvers": None}],
                [{**group, "extra": 1}],
                [{"count": 1, "group": None, "approvers": None}] * 17,
            )
        ):
            bad = {**document, "quorums": quorums}
            with pytest.raises(psycopg.errors.CheckViolation, match="who may approve"):
                connection.execute(
                    file,
                    (f"{number:032x}", asked.action_digest, asked.tool, json.dumps(bad), requester),
                )
    worker = PostgresApprovalInbox(fleet.worker, schema=fleet.schema)
    try:
        filed = worker.file(asked)
    finally:
        worker.close()
    decide = f'SELECT "{fleet.schema}".decide_approval_request(%s, %s, %s, %s, %s::jsonb)'

    def record(who: str) -> str:
        issued = ApprovalAuthority(Ed25519PrivateKey.generate(), who).issue(filed.action_digest)
        return json.dumps(issued.to_dict())

    with psycopg.connect(fleet.reviewer, autocommit=True) as connection:

        def call(who: str) -> str:
            row = connection.execute(
                decide, (filed.request_id, who, True, "", record(who))
            ).fetchone()
            return str(row[0])

        assert call("dave") == "outsider"
        assert call("alice") == "recorded"
        assert call("mallory") == "outsider"
        reader = PostgresApprovalInbox(fleet.reviewer, schema=fleet.schema)
        try:
            assert reader.get(filed.request_id).state is InboxState.PENDING
            assert call("carol") == "recorded"
            final = reader.get(filed.request_id)
        finally:
            reader.close()
    assert final.state is InboxState.APPROVED
    assert [decision.reviewer for decision in final.decisions] == ["alice", "carol"]


# --- the inbox's grants survive default privileges; each login is held to its own ------


def test_default_privileges_that_hand_a_worker_every_new_function_do_not_let_it_decide(
    postgres_server: Any,
) -> None:
    """ALTER DEFAULT PRIVILEGES ... TO the worker before migrating gives it nothing of the
    inbox: the migration takes each such grant back and says so."""
    import psycopg
    from jevqueue.approvals import InboxState, PostgresApprovalInbox
    from jevqueue.db import migrate
    from jevqueue.errors import InboxError

    url = postgres_server.url
    suffix = uuid.uuid4().hex[:8]
    worker, schema = f"fleet_worker_{suffix}", f"t_defaults_{suffix}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {worker} LOGIN")
        admin.execute(f"ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO {worker}")
        admin.execute(f"ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO {worker}")
    try:
        report = migrate(url, schema=schema)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM {worker}")
            admin.execute(f"ALTER DEFAULT PRIVILEGES REVOKE ALL ON TABLES FROM {worker}")
    s = f'"{schema}"'
    login = url.replace("//postgres@", f"//{worker}@", 1)
    inbox = PostgresApprovalInbox(login, schema=schema)
    try:
        for function in (
            "read_approval_requests",
            "file_approval_request",
            "cancel_approval_request",
            "decide_approval_request",
            "prune_approval_requests",
        ):
            note = f"revoked EXECUTE on {s}.{function} from {worker} (a default privilege "
            note += "granted it)"
            assert note in report.notes, (note, report.notes)
        for table in ("approval_requests", "approval_decisions"):
            for privilege in ("SELECT", "INSERT", "UPDATE", "DELETE"):
                assert f"revoked {privilege} on {s}.{table} from {worker}" in report.notes
        with psycopg.connect(url, autocommit=True) as admin:  # exactly a worker's grants
            admin.execute(f"GRANT USAGE ON SCHEMA {s} TO {worker}")
            admin.execute(
                f"GRANT EXECUTE ON FUNCTION {s}.read_approval_requests, "
                f"{s}.file_approval_request, {s}.cancel_approval_request TO {worker}"
            )
        filed = inbox.file(_inbox_request())
        record = ApprovalAuthority(Ed25519PrivateKey.generate(), "alice").issue(filed.action_digest)
        with pytest.raises(InboxError, match="lacks a grant"):
            inbox.approve(filed.request_id, record)
        with psycopg.connect(login, autocommit=True) as connection:
            for statement in (
                f"SELECT {s}.decide_approval_request(%s, 'alice', false, 'no', NULL)",
                f"UPDATE {s}.approval_requests SET state = 'denied' WHERE request_id = %s",
                f"SELECT request FROM {s}.approval_requests WHERE request_id = %s",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    connection.execute(statement, (filed.request_id,))
        assert inbox.get(filed.request_id).state is InboxState.PENDING
        assert inbox.get(filed.request_id).decisions == ()
    finally:
        inbox.close()
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (worker,),
            )
            admin.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
            admin.execute(f"DROP OWNED BY {worker} CASCADE")
            admin.execute(f"DROP ROLE {worker}")


@pytest.fixture
def second_worker(fleet: Fleet) -> Iterator[str]:
    """Another worker's login: a role of its own, with the worker's grants (a member)."""
    import psycopg

    worker_role = fleet.worker.split("//")[1].split("@")[0]
    name = f"other_worker_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(fleet.url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN IN ROLE {worker_role}")
    yield fleet.url.replace("//postgres@", f"//{name}@", 1)
    with psycopg.connect(fleet.url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,)
        )
        admin.execute(f"DROP ROLE {name}")


def test_a_worker_reads_and_withdraws_only_the_requests_its_own_login_filed(
    fleet: Fleet, second_worker: str
) -> None:
    import psycopg
    from jevqueue.approvals import InboxState, PostgresApprovalInbox
    from jevqueue.errors import UnknownRequestError

    mine = PostgresApprovalInbox(fleet.worker, schema=fleet.schema)
    other = PostgresApprovalInbox(second_worker, schema=fleet.schema)
    reviewer = PostgresApprovalInbox(fleet.reviewer, schema=fleet.schema)
    try:
        filed = mine.file(_inbox_request())
        theirs = other.file(_inbox_request())
        assert [r.request_id for r in other.requests()] == [theirs.request_id]
        assert [r.request_id for r in mine.requests()] == [filed.request_id]
        with pytest.raises(UnknownRequestError, match="no approval request"):
            other.get(filed.request_id)
        with pytest.raises(UnknownRequestError, match="only by the database user that filed"):
            other.cancel(filed.request_id)
        t = f'"{fleet.schema}".'
        with psycopg.connect(second_worker, autocommit=True) as connection:
            cancel = f"SELECT {t}cancel_approval_request(%s)"
            assert connection.execute(cancel, (filed.request_id,)).fetchone() == ("unknown",)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                connection.execute(f"SELECT request FROM {t}approval_requests")
        assert mine.get(filed.request_id).state is InboxState.PENDING
        # reviewers read every request
        assert {r.request_id for r in reviewer.requests()} == {
            filed.request_id,
            theirs.request_id,
        }
        assert mine.cancel(filed.request_id).state is InboxState.CANCELLED
        assert mine.cancel(filed.request_id).state is InboxState.CANCELLED  # stays so
        assert reviewer.get(theirs.request_id).state is InboxState.PENDING
    finally:
        for inbox in (mine, other, reviewer):
            inbox.close()


def test_each_request_and_decision_keeps_the_database_login_that_made_it(fleet: Fleet) -> None:
    """A reviewer may name anyone; the database user that recorded it is kept beside."""
    import psycopg
    from jevqueue.approvals import PostgresApprovalInbox

    worker = PostgresApprovalInbox(fleet.worker, schema=fleet.schema)
    reviewer = PostgresApprovalInbox(fleet.reviewer, schema=fleet.schema)
    try:
        filed = worker.file(_inbox_request(ApprovalQuorum(2)))
        alice = ApprovalAuthority(Ed25519PrivateKey.generate(), "alice")
        reviewer.approve(filed.request_id, alice.issue(filed.action_digest))
    finally:
        worker.close()
        reviewer.close()
    t = f'"{fleet.schema}".'
    with psycopg.connect(fleet.reviewer, autocommit=True) as connection:
        assert connection.execute(
            f"SELECT {t}decide_approval_request(%s, 'carol', false, 'in her name', NULL)",
            (filed.request_id,),
        ).fetchone() == ("recorded",)
    worker_role = fleet.worker.split("//")[1].split("@")[0]
    reviewer_role = fleet.reviewer.split("//")[1].split("@")[0]
    with psycopg.connect(fleet.url, autocommit=True) as admin:
        assert admin.execute(
            f"SELECT filed_by FROM {t}approval_requests WHERE request_id = %s",
            (filed.request_id,),
        ).fetchall() == [(worker_role,)]
        assert admin.execute(
            f"SELECT reviewer, approve, decided_by FROM {t}approval_decisions "
            "WHERE request_id = %s ORDER BY decided_at, reviewer",
            (filed.request_id,),
        ).fetchall() == [("alice", True, reviewer_role), ("carol", False, reviewer_role)]


def test_filing_again_after_a_lost_answer_returns_the_request_filed(
    fleet: Fleet, second_worker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The id is the client's: a second send of the same filing stores nothing more and
    answers the stored request; the same id with anything else is refused."""
    import jevqueue.approvals._inbox as inbox_module
    import psycopg
    from jevqueue.approvals import PostgresApprovalInbox
    from jevqueue.errors import InboxError

    request_id = uuid.uuid4().hex
    monkeypatch.setattr(inbox_module.secrets, "token_hex", lambda _: request_id)
    worker = PostgresApprovalInbox(fleet.worker, schema=fleet.schema)
    other = PostgresApprovalInbox(second_worker, schema=fleet.schema)
    sent: list[str] = []
    run = worker._statements.run

    def answer_lost(what: str, sql: str, parameters: tuple[Any, ...]) -> list[Any]:
        sent.append(what)
        if what == "file the request":
            run(what, sql, parameters)  # committed; its answer never arrived
        return run(what, sql, parameters)

    monkeypatch.setattr(worker._statements, "run", answer_lost)
    try:
        asked = _inbox_request()
        filed = worker.file(asked)
        assert sent == ["file the request"]
        assert filed.request_id == request_id and filed.decisions == ()
        assert worker.file(asked).to_dict() == filed.to_dict()
        with pytest.raises(InboxError, match="already filed under the id"):
            worker.file(_inbox_request(ApprovalQuorum(2)))  # another request, the same id
        with pytest.raises(InboxError, match="already filed under the id"):
            other.file(asked)  # another login, the same id
    finally:
        worker.close()
        other.close()
    with psycopg.connect(fleet.url, autocommit=True) as admin:
        rows = admin.execute(
            f'SELECT request_id, quorums FROM "{fleet.schema}".approval_requests, '
            "LATERAL (SELECT request -> 'quorums' AS quorums) AS q"
        ).fetchall()
    assert rows == [(request_id, [{"count": 1, "group": None, "approvers": None}])]


def test_the_pruning_job_deletes_only_old_requests_that_can_no_longer_change(
    fleet: Fleet,
) -> None:
    import psycopg
    from jevqueue.approvals import InboxState, PostgresApprovalInbox
    from jevqueue.errors import InboxError

    worker = PostgresApprovalInbox(fleet.worker, schema=fleet.schema)
    reviewer = PostgresApprovalInbox(fleet.reviewer, schema=fleet.schema)
    pruner = PostgresApprovalInbox(fleet.pruner, schema=fleet.schema)
    alice = ApprovalAuthority(Ed25519PrivateKey.generate(), "alice")
    try:
        filed = {
            name: worker.file(_inbox_request())
            for name in ("approved", "denied", "cancelled", "expired", "pending", "recent")
        }
        for name in ("approved", "recent"):
            reviewer.approve(filed[name].request_id, alice.issue(filed[name].action_digest))
        reviewer.deny(filed["denied"].request_id, "bob", "not today")
        worker.cancel(filed["cancelled"].request_id)
        t = f'"{fleet.schema}".'
        with psycopg.connect(fleet.url, autocommit=True) as admin:  # filed two days ago
            admin.execute(
                f"UPDATE {t}approval_requests SET created_at = created_at - interval '2 days' "
                "WHERE request_id = ANY (%s)",
                ([filed[name].request_id for name in filed if name != "recent"],),
            )
            admin.execute(
                f"UPDATE {t}approval_requests SET expires_at = created_at + interval '1 hour' "
                "WHERE request_id = %s",
                (filed["expired"].request_id,),
            )
        assert reviewer.get(filed["expired"].request_id).state is InboxState.EXPIRED
        with pytest.raises(InboxError, match="lacks a grant"):
            worker.prune(timedelta(days=1))  # a worker is not the pruning job
        with (
            psycopg.connect(fleet.pruner, autocommit=True) as connection,
            pytest.raises(psycopg.errors.InvalidParameterValue),
        ):
            connection.execute(f"SELECT {t}prune_approval_requests('-1 second')")
        assert pruner.prune(timedelta(days=1)) == 4
        assert pruner.prune(timedelta(days=1)) == 0
        left = {r.request_id for r in reviewer.requests(None)}
        assert left == {filed["pending"].request_id, filed["recent"].request_id}
        with psycopg.connect(fleet.url, autocommit=True) as admin:
            decided = admin.execute(f"SELECT request_id FROM {t}approval_decisions").fetchall()
        assert decided == [(filed["recent"].request_id,)]
        assert worker.get(filed["pending"].request_id).state is InboxState.PENDING
    finally:
        for inbox in (worker, reviewer, pruner):
            inbox.close()
