"""Attacks on a fleet that shares one PostgreSQL database: replays across hosts, races, edits.

Each "host" is its own process with its own enforcement point, consumed-approval store and
audit log, all on the session's real server. A replayed approval must never let a second
command run anywhere; a record edited in the shared log must be named by `audit verify`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
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
