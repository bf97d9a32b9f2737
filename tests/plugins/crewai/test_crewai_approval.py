"""Approvers: the core's one approval API through the CrewAI guard; every record is bound
to a digest, and an approver's failure reaches the agent as its own error."""

from __future__ import annotations

import io

import pytest
from crew_kit import Kit
from jevqueue.errors import ApprovalDeclinedError, ConfigurationError
from jevqueue.plugins.crewai import ApprovalRequest, AuthorityApproval, ConsoleApproval
from jevqueue.policy import Action, AuthorityApprover, ConsoleApprover, Verdict, VerdictKind


class Terminal(io.StringIO):
    """Typed answers on a stream that says it is a TTY."""

    def isatty(self) -> bool:
        return True


def request_for(kit: Kit, command: str = "ls") -> ApprovalRequest:
    action = Action.build(
        kit.registry, "run_shell", {"command": command, "cwd": str(kit.workspace)}, kit.context
    )
    verdict = Verdict(
        VerdictKind.ALLOW_WITH_OBLIGATIONS,
        ("shell commands need an explicit approval",),
        obligations=("explicit_approval",),
    )
    return ApprovalRequest.of(action, verdict)


def test_console_signs_a_yes_for_exactly_the_shown_digest(kit: Kit) -> None:
    shown = io.StringIO()
    approve = ConsoleApprover(kit.authority, stdin=Terminal("y\n"), stdout=shown)
    request = request_for(kit)
    record = approve(request)
    assert record is not None and not isinstance(record, list)
    assert record.action_digest == request.action_digest  # type: ignore[union-attr]
    assert request.action_digest in shown.getvalue() and '"command": "ls"' in shown.getvalue()


def test_console_treats_anything_but_yes_as_no(kit: Kit) -> None:
    approve = ConsoleApprover(kit.authority, stdin=Terminal("sure\n"), stdout=io.StringIO())
    with pytest.raises(ApprovalDeclinedError, match="declined"):
        approve(request_for(kit))


def test_console_never_reads_a_stream_that_is_not_a_terminal(kit: Kit) -> None:
    piped = io.StringIO("y\n")
    approve = ConsoleApprover(kit.authority, stdin=piped, stdout=io.StringIO())
    with pytest.raises(ApprovalDeclinedError, match="no terminal is attached"):
        approve(request_for(kit))
    assert piped.tell() == 0, "a piped stdin must not be read"


def test_console_without_an_authority_says_how_to_configure_one(kit: Kit) -> None:
    approve = ConsoleApprover(stdin=Terminal("y\n"), stdout=io.StringIO())
    with pytest.raises(ApprovalDeclinedError, match="no approval authority"):
        approve(request_for(kit))


def test_authority_approval_follows_its_rule(kit: Kit) -> None:
    approve = AuthorityApprover(
        kit.authority, approve=lambda request: request.arguments["command"] == "ls"
    )
    assert approve(request_for(kit, "ls")) is not None
    with pytest.raises(ApprovalDeclinedError, match="declined"):
        approve(request_for(kit, "rm -rf /"))


def test_authority_approval_needs_an_authority() -> None:
    with pytest.raises(ConfigurationError):
        AuthorityApprover(None)  # type: ignore[arg-type]


def test_a_console_yes_lets_a_guarded_call_run_once(kit: Kit) -> None:
    guard = kit.guard(
        approver=ConsoleApprover(kit.authority, stdin=Terminal("y\ny\n"), stdout=io.StringIO())
    )
    (shell,) = guard.wrap([kit.tools["run_shell"]])
    first = shell.run(command="ls", cwd=str(kit.workspace))
    assert first.startswith("$ ls")
    assert kit.ran.names() == ["run_shell"]


# --- the one approval API -------------------------------------------------------------------


def test_the_old_approval_names_are_deprecated_aliases_of_the_core_ones(kit: Kit) -> None:
    import jevqueue.policy

    assert ApprovalRequest is jevqueue.policy.ApprovalRequest
    with pytest.warns(DeprecationWarning, match="use jevqueue.policy.AuthorityApprover"):
        old = AuthorityApproval(kit.authority)
    assert isinstance(old, AuthorityApprover)
    with pytest.warns(DeprecationWarning, match="use jevqueue.policy.ConsoleApprover"):
        assert isinstance(ConsoleApproval(kit.authority), ConsoleApprover)


def test_approvals_is_the_deprecated_spelling_of_approver(kit: Kit) -> None:
    approver = AuthorityApprover(kit.authority)
    with pytest.warns(DeprecationWarning, match=r"ToolGuard\(approvals=...\) is deprecated"):
        guard = kit.guard(approvals=approver)
    assert guard.approver is approver
    with pytest.raises(ConfigurationError, match="more than one keyword"):
        kit.guard(approver=approver, approvals=approver)


def shell(kit: Kit, approver: object) -> object:
    (tool,) = kit.guard(approver=approver).wrap([kit.tools["run_shell"]])
    return tool.run(command="ls", cwd=str(kit.workspace))


def test_an_approver_that_raises_is_reported_with_its_own_error(kit: Kit) -> None:
    # Before the guard this read "the policy check could not complete", as if the policy
    # had failed, and named no approver.
    def pager(request: ApprovalRequest) -> None:
        raise RuntimeError("the pager service is unreachable")

    result = shell(kit, pager)
    assert kit.ran.calls == []
    assert result.code == "jevqueue_denied"  # type: ignore[attr-defined]
    assert (
        "the approver failed (RuntimeError: the pager service is unreachable)" in result.message  # type: ignore[attr-defined]
    )


def test_an_approver_that_answers_a_plain_yes_is_told_what_to_return(kit: Kit) -> None:
    # Before the guard: "TypeError: 'bool' object is not iterable".
    result = shell(kit, lambda request: True)
    assert kit.ran.calls == []
    message = result.message  # type: ignore[attr-defined]
    assert "the approver returned True (bool)" in message and "ApprovalRecord" in message


def test_a_declining_approver_reason_reaches_the_agent(kit: Kit) -> None:
    def declines(request: ApprovalRequest) -> None:
        raise ApprovalDeclinedError("not during the release freeze")

    result = shell(kit, declines)
    assert kit.ran.calls == []
    assert "the approver declined: not during the release freeze" in result.message  # type: ignore[attr-defined]


def test_the_record_dict_jevqueue_approve_prints_is_read_as_the_record(kit: Kit) -> None:
    # Before the guard a dict was refused: "must return ApprovalRecord(s) or None, not str".
    result = shell(kit, lambda request: kit.authority.issue(request.action_digest).to_dict())
    assert str(result).startswith("$ ls"), result
    assert kit.ran.names() == ["run_shell"]


def test_an_async_approver_is_awaited_on_the_async_path(kit: Kit) -> None:
    import asyncio

    async def approver(request: ApprovalRequest) -> object:
        return kit.authority.issue(request.action_digest)

    (tool,) = kit.guard(approver=approver).wrap([kit.tools["run_shell"]])
    result = asyncio.run(tool.arun(command="ls", cwd=str(kit.workspace)))
    assert str(result).startswith("$ ls"), result
    # The synchronous path cannot await it, and says so instead of running unapproved.
    refused = tool.run(command="ls", cwd=str(kit.workspace))
    assert "approver is async" in refused.message  # type: ignore[attr-defined]
    assert kit.ran.names() == ["run_shell"]
