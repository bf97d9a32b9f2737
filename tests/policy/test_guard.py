"""The guard every plugin adapts: judge once, ask the approver, run what was judged once."""

from __future__ import annotations

import asyncio
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue import (
    ApprovalDeclinedError,
    ApprovalRequest,
    AuthorityApprover,
    Guard,
    PolicyEnforcementPoint,
    ToolSpec,
    create_default_policy_decision_point,
)
from jevqueue.approvals import ApprovalAuthority, MemoryConsumedApprovals, SignedApprovalVerifier
from jevqueue.errors import ApprovalRequiredError, ConfigurationError, PolicyDeniedError
from jevqueue.policy import JudgementKind
from jevqueue.policy._approval_request import deprecated_approver
from jevqueue.testing.recording_audit import RecordingAuditSink

GIT_SHA = "0123456789abcdef0123456789abcdef01234567"

SPECS = [
    ToolSpec.declare("write_note", side_effects={"file_write"}, path_fields=["path"]),
    ToolSpec.declare(
        "terminal", side_effects={"shell_command"}, cwd_field="workdir", required_path_fields=()
    ),
]


@pytest.fixture
def authority() -> ApprovalAuthority:
    return ApprovalAuthority(Ed25519PrivateKey.generate(), "alice")


@pytest.fixture
def audit() -> RecordingAuditSink:
    return RecordingAuditSink()


@pytest.fixture
def guard(tmp_path: Path, authority: ApprovalAuthority, audit: RecordingAuditSink) -> Guard:
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=audit,
        approval_verifier=SignedApprovalVerifier({"alice": authority.public_key}),
        consumed_approvals=MemoryConsumedApprovals(),
    )
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    context = {
        "task_id": "task-1",
        "actor_id": "agent",
        "workspace": str(workspace),
        "git_sha": GIT_SHA,
    }
    return Guard(pep, specs=SPECS, context=context, owner="TestGuard")


def test_an_allowed_call_runs_with_the_resolved_path_it_was_judged_with(
    guard: Guard, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a tool that opened the path as written would write here
    root = os.path.realpath(guard.context.workspace)
    for written in ("notes/today.txt", ".bashrc"):
        judgement = guard.check("write_note", {"path": written, "text": "hi"}, "call-1")
        assert judgement.allowed, judgement.message
        assert judgement.run_arguments() == {"path": f"{root}/{written}", "text": "hi"}


def test_what_runs_is_a_private_copy_of_what_was_judged(guard: Guard) -> None:
    arguments: dict[str, Any] = {"path": "a.txt", "text": "x", "tags": ["one"]}
    judgement = guard.check("write_note", arguments, "call-1")
    arguments["tags"].append("changed after the check")
    first = judgement.run_arguments()
    first["tags"].append("changed by the tool")
    assert judgement.run_arguments()["tags"] == ["one"]
    with pytest.raises(TypeError):
        judgement.arguments["path"] = "/etc/passwd"  # type: ignore[index]


def test_an_optional_working_directory_left_out_runs_in_the_workspace(
    guard: Guard, authority: ApprovalAuthority
) -> None:
    guard.approver = AuthorityApprover(authority)
    judgement = guard.check("terminal", {"command": "ls"}, "call-1")
    assert judgement.allowed, judgement.message
    assert judgement.run_arguments()["workdir"] == os.path.realpath(guard.context.workspace)


def test_a_denied_call_is_refused_with_the_policy_reason_and_audited(
    guard: Guard, audit: RecordingAuditSink
) -> None:
    judgement = guard.check("write_note", {"path": "/etc/passwd", "text": "x"}, "call-1")
    assert judgement.kind is JudgementKind.REFUSED
    assert judgement.message.startswith("jevqueue denied the call to 'write_note': ")
    assert judgement.message.endswith("; the call was not run")
    assert [event["result"] for event in audit.events] == ["DENY"]


def test_an_undeclared_tool_is_refused_before_evaluation_and_audited(
    guard: Guard, audit: RecordingAuditSink
) -> None:
    judgement = guard.check("rm_rf", {"path": "."}, "call-1")
    assert judgement.refused and "refused before evaluation" in judgement.message
    assert [event["rule_ids"] for event in audit.events] == [["jevqueue.pep.input"]]
    with pytest.raises(ConfigurationError, match=r"\['rm_rf'\]"):
        guard.require_declared(["write_note", "rm_rf"])


def test_without_an_approver_check_refuses_and_judge_pauses(guard: Guard) -> None:
    refused = guard.check("terminal", {"command": "ls"}, "call-1")
    assert refused.refused and "no approver is configured: pass approver=" in refused.message
    pending = guard.judge("terminal", {"command": "ls"}, "call-1")
    assert pending.pending and pending.request is not None
    request = pending.request
    assert type(request) is ApprovalRequest
    assert (request.tool, dict(request.arguments), request.call_id) == (
        "terminal",
        {"command": "ls"},
        "call-1",
    )
    assert request.action_digest == pending.action_digest and request.reasons
    assert request.context == guard.context
    assert request.to_dict()["action_digest"] == request.action_digest


def test_a_paused_call_resumes_with_the_record_a_person_gave(
    guard: Guard, authority: ApprovalAuthority
) -> None:
    pending = guard.judge("terminal", {"command": "ls"}, "call-1")
    assert pending.request is not None
    resumed = guard.resume(pending, authority.issue(pending.request.action_digest))
    assert resumed.allowed, resumed.message
    declined = guard.resume(
        guard.judge("terminal", {"command": "pwd"}, "call-2"), ApprovalDeclinedError("not now")
    )
    assert declined.refused and "the approver declined: not now" in declined.message


def test_a_replayed_record_is_refused_and_said_to_be_already_used_first(
    guard: Guard, authority: ApprovalAuthority
) -> None:
    digest = guard.judge("terminal", {"command": "ls"}).action_digest
    assert digest is not None
    record = authority.issue(digest)
    assert guard.judge("terminal", {"command": "ls"}, records=[record]).allowed
    again = guard.judge("terminal", {"command": "ls"}, records=[record])
    assert again.refused
    assert "the approval given was refused: approval record #0" in again.message
    assert "already used" in again.message.split(";")[0]


def test_the_dict_jevqueue_approve_prints_is_read_as_the_record(
    guard: Guard, authority: ApprovalAuthority
) -> None:
    digest = guard.judge("terminal", {"command": "ls"}).action_digest
    assert digest is not None
    printed = authority.issue(digest).to_dict()
    assert guard.judge("terminal", {"command": "ls"}, records=[printed]).allowed
    forged = {**authority.issue(digest).to_dict(), "approver_id": "mallory"}
    assert guard.judge("terminal", {"command": "ls"}, records=[forged]).refused


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (True, "the approver returned True (bool); expected ApprovalRecord(s)"),
        ("yes", "the approver returned 'yes' (str)"),
        ([42], "a collection holding 42 (int)"),
        ({"approval_id": "x"}, "not an approval record"),
    ],
)
def test_an_approver_that_returns_the_wrong_thing_says_what_it_returned(
    guard: Guard, answer: Any, expected: str
) -> None:
    guard.approver = lambda request: answer
    judgement = guard.check("terminal", {"command": "ls"}, "call-1")
    assert judgement.refused and expected in judgement.message, judgement.message


def _nested(depth: int) -> list[object]:
    answer: list[object] = []
    for _ in range(depth):
        answer = [answer]
    return answer


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ([_nested(100_000)], "a collection holding [[[[...]]]] (list)"),
        (["x" * 100_000], "a collection holding 'xxxx"),
        ([_Unprintable()], "a collection holding <_Unprintable instance at"),
    ],
    ids=["nested-deeply", "very-long", "repr-raises"],
)
def test_an_answer_too_deep_long_or_unprintable_to_show_is_still_refused_with_its_type(
    guard: Guard, answer: Any, expected: str
) -> None:
    guard.approver = lambda request: answer
    judgement = guard.check("terminal", {"command": "ls"}, "call-1")
    assert judgement.refused and expected in judgement.message, judgement.message
    assert len(judgement.message) < 1_000


def test_an_approver_that_raises_is_reported_with_its_own_error(guard: Guard) -> None:
    def approver(request: ApprovalRequest) -> None:
        raise RuntimeError("the pager service is unreachable")

    guard.approver = approver
    judgement = guard.check("terminal", {"command": "ls"}, "call-1")
    assert judgement.refused
    assert "the approver failed (RuntimeError: the pager service is unreachable)" in (
        judgement.message
    )


@pytest.mark.parametrize("error", [ApprovalDeclinedError, ApprovalRequiredError])
def test_a_decline_with_a_reason_reaches_the_model(guard: Guard, error: type) -> None:
    def approver(request: ApprovalRequest) -> None:
        raise error("no shell before the release")

    guard.approver = approver
    judgement = guard.check("terminal", {"command": "ls"}, "call-1")
    assert judgement.message == (
        "jevqueue denied the call to 'terminal': the approver declined: no shell before the "
        "release; the call was not run"
    )


def test_an_async_approver_is_awaited_by_acheck_and_refused_by_check(
    guard: Guard, authority: ApprovalAuthority
) -> None:
    async def approver(request: ApprovalRequest) -> Any:
        return authority.issue(request.action_digest)

    guard.approver = approver
    assert asyncio.run(guard.acheck("terminal", {"command": "ls"}, "call-1")).allowed
    synchronous = guard.check("terminal", {"command": "pwd"}, "call-2")
    assert synchronous.refused and "the approver is async" in synchronous.message


def test_a_call_id_runs_once_even_when_a_batch_is_run_again(guard: Guard) -> None:
    effects: list[dict[str, Any]] = []

    def execute(arguments: dict[str, Any]) -> str:
        effects.append(arguments)
        return f"wrote {arguments['path']}"

    first = guard.check("write_note", {"path": "a.txt", "text": "x"}, "call-1")
    again = guard.check("write_note", {"path": "a.txt", "text": "x"}, "call-1")
    assert guard.run(first, execute) == guard.run(again, execute)
    assert len(effects) == 1
    other = guard.check("write_note", {"path": "a.txt", "text": "x"}, "call-2")
    guard.run(other, execute)
    assert len(effects) == 2
    assert [(o.call_id, o.returned) for o in guard.outcomes] == [("call-1", True), ("call-2", True)]


def test_a_failed_run_is_not_run_again_under_the_same_id(guard: Guard) -> None:
    attempts: list[int] = []

    def execute(arguments: dict[str, Any]) -> None:
        attempts.append(1)
        raise OSError("disk full")

    judgement = guard.check("write_note", {"path": "a.txt", "text": "x"}, "call-1")
    for _ in range(2):
        with pytest.raises(OSError, match="disk full"):
            guard.run(judgement, execute)
    assert attempts == [1]
    assert [(o.returned, o.error) for o in guard.outcomes] == [(False, "OSError('disk full')")]


def test_a_refused_judgement_cannot_run(guard: Guard) -> None:
    refused = guard.check("write_note", {"path": "/etc/passwd", "text": "x"}, "call-1")
    with pytest.raises(PolicyDeniedError, match="only an allowed judgement may run"):
        guard.run(refused, lambda arguments: None)


def test_a_check_that_fails_is_a_refusal_not_a_crash(guard: Guard) -> None:
    judgement = guard.check("write_note", ["not", "a", "mapping"], "call-1")
    assert judgement.refused and "the policy check could not complete" in judgement.message


def test_an_old_approver_keyword_works_with_a_deprecation_warning() -> None:
    def approver(request: ApprovalRequest) -> None:
        return None

    with pytest.warns(DeprecationWarning, match=r"Plugin\(approvals=...\) is deprecated"):
        assert deprecated_approver(None, "Plugin", approvals=approver) is approver
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert deprecated_approver(approver, "Plugin", approvals=None) is approver
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(ConfigurationError, match="more than one keyword"),
    ):
        deprecated_approver(approver, "Plugin", approvals=approver)
    with pytest.raises(ConfigurationError, match="approver= must be a callable"):
        deprecated_approver("yes", "Plugin")


def test_an_approval_required_error_takes_a_reason_alone() -> None:
    assert str(ApprovalRequiredError("why")) == "why"
    assert ApprovalDeclinedError("why").verdict is None


def test_declare_side_effect_and_shipped_policy_path_are_top_level_names() -> None:
    import jevqueue

    assert callable(jevqueue.declare_side_effect)
    assert jevqueue.shipped_policy_path("personal-assistant").is_file()


def test_an_unknown_side_effect_names_the_public_declaration() -> None:
    with pytest.raises(ConfigurationError) as raised:
        ToolSpec.declare("t", side_effects={"teleport"})
    assert "jevqueue.declare_side_effect(name, description)" in str(raised.value)
    assert "_registry" not in str(raised.value)


def test_a_call_the_plugin_cannot_read_is_refused_and_audited(
    guard: Guard, audit: RecordingAuditSink
) -> None:
    judgement = guard.refuse("write_note", ValueError("the arguments are not JSON"), "call-9")
    assert judgement.refused and judgement.call_id == "call-9"
    assert "the arguments are not JSON" in judgement.message
    assert [event["rule_ids"] for event in audit.events] == [["jevqueue.pep.input"]]


def test_has_run_tells_whether_run_would_replay(guard: Guard) -> None:
    judgement = guard.check("write_note", {"path": "a.txt", "text": "x"}, "call-1")
    assert not guard.has_run(judgement)
    guard.run(judgement, lambda arguments: None)
    assert guard.has_run(judgement)


def test_a_gated_call_that_ran_is_not_asked_about_again_when_its_batch_reruns(
    guard: Guard, authority: ApprovalAuthority, audit: RecordingAuditSink
) -> None:
    approver = AuthorityApprover(authority)
    guard.approver = approver
    effects: list[str] = []
    first = guard.check("terminal", {"command": "ls"}, "call-1")
    guard.run(first, lambda arguments: effects.append(arguments["command"]))
    audited = len(audit.events)
    # The framework resumes and runs the whole batch again: no second approval, no effect.
    again = guard.check("terminal", {"command": "ls"}, "call-1")
    assert again.allowed and again.verdict is None
    guard.run(again, lambda arguments: effects.append(arguments["command"]))
    assert effects == ["ls"] and len(approver.requests) == 1 and len(audit.events) == audited
    # The same command under a new call id is a new call: judged and approved again.
    assert guard.check("terminal", {"command": "ls"}, "call-2").allowed
    assert len(approver.requests) == 2


def test_a_guard_without_a_context_judges_each_call_in_the_context_it_is_given(
    guard: Guard,
) -> None:
    bare = Guard(guard.pep, specs=SPECS, context=None)
    refused = bare.check("write_note", {"path": "a.txt", "text": "x"}, "call-1")
    assert refused.refused and "no execution context for this call" in refused.message
    allowed = bare.check(
        "write_note", {"path": "a.txt", "text": "x"}, "call-2", context=guard.context
    )
    assert allowed.allowed, allowed.message


def test_a_run_cancelled_midway_is_not_run_again_and_says_why(guard: Guard) -> None:
    from jevqueue.errors import ToolInterruptedError

    started: list[int] = []

    async def slow(arguments: dict[str, Any]) -> str:
        started.append(1)
        await asyncio.sleep(10)
        return "done"

    judgement = guard.check("write_note", {"path": "a.txt", "text": "x"}, "call-1")

    async def cancel_midway() -> None:
        task = asyncio.ensure_future(guard.arun(judgement, slow))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_midway())
    with pytest.raises(ToolInterruptedError, match="may have had its effect"):
        asyncio.run(guard.arun(judgement, slow))
    assert started == [1]
