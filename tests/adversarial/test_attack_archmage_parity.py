"""Contracts archmage-ai users rely on, held as attacks: where jevqueue was looser, it is not."""

from __future__ import annotations

import dataclasses
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from attack_harness import APPROVER, Sandbox
from jevqueue.adapters import GenericAdapter
from jevqueue.approvals import ApprovalAuthority, SignedApprovalVerifier, SQLiteConsumedApprovals
from jevqueue.audit import SQLiteAuditLog, default_audit_log_path, verify_audit_log
from jevqueue.errors import (
    ConfigurationError,
    InvalidToolArgumentsError,
    PolicyDeniedError,
    PolicyFileError,
    UnfulfilledObligationError,
    UnsupportedTypeError,
)
from jevqueue.policy import (
    Action,
    PolicyEnforcementPoint,
    ToolRegistry,
    ToolSpec,
    antigravity_registry,
    create_default_policy_decision_point,
)
from jevqueue.testing.recording_audit import RecordingAuditSink


def shell_action(sandbox: Sandbox, line: str) -> Action:
    return Action.build(
        antigravity_registry(),
        "run_command",
        {"CommandLine": line, "Cwd": str(sandbox.workspace)},
        sandbox.context(),
    )


def run_if_allowed(pep: PolicyEnforcementPoint, action: Action, records: Any = ()) -> bool:
    """The guarded tool: runs the command the action carries only if the PEP allows it."""
    if pep.enforce(action, records).allowed:
        subprocess.run(action.arguments["CommandLine"], shell=True, cwd=action.cwd, check=False)
        return True
    return False


def test_an_approval_does_not_fulfil_a_copy_with_replaced_arguments(
    pep: PolicyEnforcementPoint,
    audit: RecordingAuditSink,
    authority: ApprovalAuthority,
    sandbox: Sandbox,
) -> None:
    approved = shell_action(sandbox, "echo ok > ok.txt")
    record = authority.issue(approved.digest)
    forged = dataclasses.replace(
        approved, arguments={"CommandLine": "rm -rf src", "Cwd": str(sandbox.workspace)}
    )
    assert forged.digest == approved.digest  # the stored digest was copied along
    with pytest.raises(PolicyDeniedError) as raised:
        run_if_allowed(pep, forged, [record])
    assert (sandbox.workspace / "src" / "app.py").exists(), "the forged command ran"
    assert "jevqueue.policy._pep.digest" in raised.value.verdict.rule_ids
    assert audit.events[-1]["allowed"] is False
    assert audit.events[-1]["rule_ids"] == ["jevqueue.policy._pep.digest"]
    # the genuine action still runs with its approval
    assert run_if_allowed(pep, approved, [record])
    assert (sandbox.workspace / "ok.txt").exists()


def test_a_copy_with_forged_targets_is_judged_on_its_real_contents(
    pep: PolicyEnforcementPoint, audit: RecordingAuditSink, sandbox: Sandbox
) -> None:
    action = Action.build(
        antigravity_registry(),
        "write_to_file",
        {"TargetFile": ".git/hooks/pre-commit", "CodeContent": "x"},
        sandbox.context(),
    )
    hidden = dataclasses.replace(action, folded_targets=(), relative_targets=(("a.py",),))
    with pytest.raises(PolicyDeniedError) as raised:
        pep.enforce(hidden)
    assert "jevqueue.paths.git" in raised.value.verdict.rule_ids
    assert audit.events[-1]["allowed"] is False


def test_a_hand_built_action_is_validated_as_build_does(sandbox: Sandbox) -> None:
    spec = antigravity_registry().get("write_to_file")
    with pytest.raises(UnsupportedTypeError) as raised:
        Action(
            tool="write_to_file",
            arguments={"TargetFile": "a.py", "CodeContent": b"\x7fELF"},
            targets=(),
            side_effects=spec.side_effects,
            context=sandbox.context(),  # type: ignore[arg-type]
            digest="sha256:" + "0" * 64,
            spec=spec,
        )
    assert isinstance(raised.value, TypeError) and isinstance(raised.value, ValueError)
    with pytest.raises(InvalidToolArgumentsError, match=r"Action\.build"):
        Action(
            tool="write_to_file",
            arguments={"TargetFile": "a.py"},
            targets=(),
            side_effects=frozenset(),
            context=sandbox.context(),  # type: ignore[arg-type]
            digest="sha256:" + "0" * 64,
        )


class _LooksLikeAPep:
    def enforce(self, action: Any, records: Any = ()) -> Any:
        return True


def test_the_generic_adapter_refuses_a_look_alike_pep() -> None:
    with pytest.raises(ConfigurationError, match="PolicyEnforcementPoint"):
        GenericAdapter(_LooksLikeAPep())  # type: ignore[arg-type]


def test_without_an_audit_logger_every_decision_goes_to_the_default_log(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JEVQUEUE_STATE_DIR", str(sandbox.state / "default"))
    pep = PolicyEnforcementPoint(create_default_policy_decision_point())
    adapter = GenericAdapter(pep, registry=antigravity_registry())
    ran: list[str] = []
    with pytest.raises(UnfulfilledObligationError):
        if adapter.intercept_tool_call(
            "run_command",
            {"CommandLine": "rm -rf src", "Cwd": str(sandbox.workspace)},
            sandbox.context(),
        ):
            ran.append("run_command")
    with pytest.raises(InvalidToolArgumentsError):
        adapter.intercept_tool_call("write_to_file", {"CodeContent": "x"}, sandbox.context())
    assert ran == []
    path = default_audit_log_path()
    assert path == sandbox.state / "default" / "audit.sqlite3"
    report = verify_audit_log(path)
    assert report.ok and report.count == 2
    with SQLiteAuditLog(path) as log:
        results = [(record.tool, record.allowed) for record in log.records()]
    assert results == [("run_command", False), ("write_to_file", False)]


def test_without_an_audit_logger_a_decision_that_cannot_be_recorded_is_denied(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = sandbox.state / "not-a-directory"
    blocker.write_text("", "utf-8")
    monkeypatch.setenv("JEVQUEUE_STATE_DIR", str(blocker))
    pep = PolicyEnforcementPoint(create_default_policy_decision_point())
    action = Action.build(
        antigravity_registry(),
        "write_to_file",
        {"TargetFile": "src/new.py", "CodeContent": "x"},
        sandbox.context(),
    )
    with pytest.raises(PolicyDeniedError, match="audit"):
        pep.enforce(action)
    assert not (sandbox.workspace / "src" / "new.py").exists()


def test_a_file_tool_called_without_its_optional_target_is_denied(
    pep: PolicyEnforcementPoint, audit: RecordingAuditSink, sandbox: Sandbox
) -> None:
    spec = ToolSpec(
        "save", side_effects={"file_write"}, path_fields=("path",), required_path_fields=()
    )
    adapter = GenericAdapter(pep, registry=ToolRegistry([spec]))
    written: list[str] = []
    with pytest.raises(PolicyDeniedError) as raised:
        if adapter.intercept_tool_call("save", {"text": "x"}, sandbox.context()):
            written.append("save")  # the tool would write to its default, unjudged
    assert written == []
    assert "jevqueue.paths.missing" in raised.value.verdict.rule_ids
    assert audit.events[-1]["allowed"] is False


DELETE = ToolSpec("delete_file", side_effects={"file_delete"}, path_fields=("path",))


def test_deleting_a_file_needs_an_approval_by_default(
    pep: PolicyEnforcementPoint, audit: RecordingAuditSink, sandbox: Sandbox
) -> None:
    adapter = GenericAdapter(pep, registry=ToolRegistry([DELETE]))
    with pytest.raises(UnfulfilledObligationError) as raised:
        if adapter.intercept_tool_call("delete_file", {"path": "src/app.py"}, sandbox.context()):
            (sandbox.workspace / "src" / "app.py").unlink()
    assert (sandbox.workspace / "src" / "app.py").exists()
    assert "jevqueue.delete.approval" in raised.value.verdict.rule_ids
    assert audit.events[-1]["allowed"] is False


def test_a_policy_file_may_relax_the_delete_approval(sandbox: Sandbox, tmp_path: Path) -> None:
    policy = tmp_path / "relaxed.toml"
    policy.write_text('[policy]\nname = "relaxed"\nrelax = ["jevqueue.delete.approval"]\n', "utf-8")
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(policy_files=[policy]),
        audit_logger=RecordingAuditSink(),
    )
    adapter = GenericAdapter(pep, registry=ToolRegistry([DELETE]))
    assert adapter.intercept_tool_call("delete_file", {"path": "src/app.py"}, sandbox.context())
    typo = tmp_path / "typo.toml"
    typo.write_text('[policy]\nrelax = ["jevqueue.paths.git"]\n', "utf-8")
    with pytest.raises(PolicyFileError, match=r"only jevqueue\.delete\.approval can be relaxed"):
        create_default_policy_decision_point(policy_files=[typo])


@pytest.mark.parametrize(
    ("window", "age", "fresh"),
    [
        (None, 299, True),
        (None, 301, False),
        (60, 59, True),
        (60, 61, False),
        (timedelta(minutes=20), 900, True),
    ],
)
def test_the_approval_freshness_window_is_a_setting(
    sandbox: Sandbox,
    authority: ApprovalAuthority,
    window: Any,
    age: int,
    fresh: bool,
) -> None:
    audit = RecordingAuditSink()
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=audit,
        approval_verifier=SignedApprovalVerifier({APPROVER: authority.public_key}),
        consumed_approvals=SQLiteConsumedApprovals(sandbox.state / f"consumed-{age}.sqlite3"),
        approval_freshness=window,
    )
    action = shell_action(sandbox, "echo ran > ran.txt")
    issued = datetime.now(timezone.utc) - timedelta(seconds=age)
    record = authority.issue(action.digest, now=issued, ttl=timedelta(hours=1))
    if fresh:
        assert run_if_allowed(pep, action, [record])
        assert (sandbox.workspace / "ran.txt").exists()
    else:
        with pytest.raises(UnfulfilledObligationError) as raised:
            run_if_allowed(pep, action, [record])
        assert any("stale" in reason for reason in raised.value.verdict.reasons)
        assert not (sandbox.workspace / "ran.txt").exists()
        assert audit.events[-1]["allowed"] is False


def test_bad_freshness_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        PolicyEnforcementPoint(create_default_policy_decision_point(), approval_freshness="5m")  # type: ignore[arg-type]


def test_archmage_style_handlers_catch_denials_and_bad_input(
    pep: PolicyEnforcementPoint, sandbox: Sandbox
) -> None:
    adapter = GenericAdapter(pep, registry=antigravity_registry())
    with pytest.raises(PermissionError):
        adapter.intercept_tool_call(
            "write_to_file", {"TargetFile": "../outside/x", "CodeContent": "x"}, sandbox.context()
        )
    with pytest.raises(PermissionError):  # an unmet approval is a refusal too
        adapter.intercept_tool_call(
            "run_command", {"CommandLine": "ls", "Cwd": str(sandbox.workspace)}, sandbox.context()
        )
    with pytest.raises(ValueError):
        adapter.intercept_tool_call("no_such_tool", {}, sandbox.context())
    with pytest.raises(TypeError):
        adapter.intercept_tool_call(
            "write_to_file", {"TargetFile": "a.py", "CodeContent": b"x"}, sandbox.context()
        )
