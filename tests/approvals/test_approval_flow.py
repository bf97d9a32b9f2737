"""The adapter guide's approval flow, end to end, with durable stores and a verified log."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue import (
    PolicyEnforcementPoint,
    UnfulfilledObligationError,
    create_default_policy_decision_point,
)
from jevqueue.adapters import GenericAdapter
from jevqueue.approvals import (
    ApprovalAuthority,
    ApprovalRecord,
    SignedApprovalVerifier,
    SQLiteConsumedApprovals,
)
from jevqueue.audit import SQLiteAuditLog, verify_audit_log
from jevqueue.errors import PolicyDeniedError
from jevqueue.testing.recording_audit import RecordingAuditSink

CONTEXT = {
    "task_id": "task-42",
    "actor_id": "coding-agent",
    "workspace": "/workspace/project",
    "git_sha": "0123456789abcdef0123456789abcdef01234567",
    "environment": "local",
}
COMMAND = {"CommandLine": "pytest -q", "Cwd": "/workspace/project"}


def _adapter(tmp_path: Path, verifier: SignedApprovalVerifier) -> GenericAdapter:
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=SQLiteAuditLog(tmp_path / "audit.sqlite3"),
        approval_verifier=verifier,
        consumed_approvals=SQLiteConsumedApprovals(tmp_path / "consumed.sqlite3"),
    )
    return GenericAdapter(pep)


def _digest(adapter: GenericAdapter) -> str:
    with pytest.raises(UnfulfilledObligationError) as caught:
        adapter.intercept_tool_call("run_command", COMMAND, CONTEXT)
    digest: str = caught.value.verdict.action_digest
    return digest


def test_approve_retry_replay_restart(tmp_path: Path) -> None:
    authority = ApprovalAuthority(Ed25519PrivateKey.generate(), "security-lead")
    verifier = SignedApprovalVerifier({"security-lead": authority.public_key})
    adapter = _adapter(tmp_path, verifier)

    digest = _digest(adapter)
    record = authority.issue(digest)
    assert adapter.intercept_tool_call("run_command", COMMAND, CONTEXT, [record]) is True

    with pytest.raises(UnfulfilledObligationError) as replay:
        adapter.intercept_tool_call("run_command", COMMAND, CONTEXT, [record])
    assert any("already used" in reason for reason in replay.value.verdict.reasons)

    restarted = _adapter(tmp_path, verifier)
    with pytest.raises(UnfulfilledObligationError):
        restarted.intercept_tool_call("run_command", COMMAND, CONTEXT, [record])

    with pytest.raises(UnfulfilledObligationError):
        restarted.intercept_tool_call("run_command", COMMAND, CONTEXT, ["explicit_approval"])

    other = {"CommandLine": "pytest -q -x", "Cwd": "/workspace/project"}
    with pytest.raises(UnfulfilledObligationError):
        restarted.intercept_tool_call("run_command", other, CONTEXT, [authority.issue(digest)])

    report = verify_audit_log(tmp_path / "audit.sqlite3")
    assert report.ok, report.summary()
    assert report.count == 6
    with SQLiteAuditLog(tmp_path / "audit.sqlite3") as log:
        records = list(log.records())
    assert [(r.result, r.allowed) for r in records] == [
        ("ALLOW_WITH_OBLIGATIONS", False),
        ("ALLOW_WITH_OBLIGATIONS", True),
        ("ALLOW_WITH_OBLIGATIONS", False),
        ("ALLOW_WITH_OBLIGATIONS", False),
        ("ALLOW_WITH_OBLIGATIONS", False),
        ("ALLOW_WITH_OBLIGATIONS", False),
    ]
    assert records[1].action_digest == digest
    assert (records[1].workspace, records[1].git_sha) == (CONTEXT["workspace"], CONTEXT["git_sha"])
    assert len({r.decision_id for r in records}) == 6


_REPLAY_IN_CHILD = textwrap.dedent(
    """
    import json, sys
    from jevqueue import PolicyEnforcementPoint, create_default_policy_decision_point
    from jevqueue.adapters import GenericAdapter
    from jevqueue.approvals import (
        ApprovalRecord, SignedApprovalVerifier, SQLiteConsumedApprovals, load_public_key,
    )
    from jevqueue.audit import SQLiteAuditLog
    from jevqueue.errors import UnfulfilledObligationError
    folder, public_key, record_json = sys.argv[1], sys.argv[2], sys.argv[3]
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=SQLiteAuditLog(folder + "/audit.sqlite3"),
        approval_verifier=SignedApprovalVerifier({"security-lead": load_public_key(public_key)}),
        consumed_approvals=SQLiteConsumedApprovals(folder + "/consumed.sqlite3"),
    )
    record = ApprovalRecord.from_dict(json.loads(record_json))
    try:
        allowed = GenericAdapter(pep).intercept_tool_call(
            "run_command", json.loads(sys.argv[4]), json.loads(sys.argv[5]), [record]
        )
    except UnfulfilledObligationError:
        allowed = False
    print(json.dumps(allowed))
    """
)


def _in_child(tmp_path: Path, public_key: Path, record: ApprovalRecord) -> Any:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _REPLAY_IN_CHILD,
            str(tmp_path),
            str(public_key),
            json.dumps(record.to_dict()),
            json.dumps(COMMAND),
            json.dumps(CONTEXT),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_replay_in_a_new_process_is_refused(tmp_path: Path) -> None:
    from jevqueue.approvals import generate_key_pair, load_private_key, load_public_key

    private_key, public_key = generate_key_pair(tmp_path / "lead.pem")
    authority = ApprovalAuthority(load_private_key(private_key), "security-lead")
    adapter = _adapter(
        tmp_path, SignedApprovalVerifier({"security-lead": load_public_key(public_key)})
    )
    record = authority.issue(_digest(adapter))
    assert _in_child(tmp_path, public_key, record) is True
    assert _in_child(tmp_path, public_key, record) is False
    with pytest.raises(UnfulfilledObligationError):
        adapter.intercept_tool_call("run_command", COMMAND, CONTEXT, [record])
    assert verify_audit_log(tmp_path / "audit.sqlite3").ok


def test_an_audit_failure_denies(tmp_path: Path) -> None:
    sink = RecordingAuditSink()
    adapter = GenericAdapter(
        PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=sink)
    )
    write = {"TargetFile": "src/feature.py", "CodeContent": "value = 1\n"}
    assert adapter.intercept_tool_call("write_to_file", write, CONTEXT) is True
    sink.fail_with(OSError("disk full"))
    with pytest.raises(PolicyDeniedError):
        adapter.intercept_tool_call("write_to_file", write, CONTEXT)
    assert sink.results == ["ALLOW"]
    assert json.dumps(sink.events)  # plain JSON-ready records
