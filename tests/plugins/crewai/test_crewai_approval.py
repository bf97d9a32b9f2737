"""Approval callbacks: the console asks only a terminal; every record is bound to a digest."""

from __future__ import annotations

import io

import pytest
from crew_kit import Kit
from jevqueue.errors import ApprovalRequiredError, ConfigurationError
from jevqueue.plugins.crewai import ApprovalRequest, AuthorityApproval, ConsoleApproval
from jevqueue.policy import Action, Verdict, VerdictKind


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
    return ApprovalRequest(action=action, verdict=verdict)


def test_console_signs_a_yes_for_exactly_the_shown_digest(kit: Kit) -> None:
    shown = io.StringIO()
    approve = ConsoleApproval(kit.authority, stdin=Terminal("y\n"), stdout=shown)
    request = request_for(kit)
    record = approve(request)
    assert record is not None and not isinstance(record, list)
    assert record.action_digest == request.action_digest  # type: ignore[union-attr]
    assert request.action_digest in shown.getvalue() and '"command": "ls"' in shown.getvalue()


def test_console_treats_anything_but_yes_as_no(kit: Kit) -> None:
    approve = ConsoleApproval(kit.authority, stdin=Terminal("sure\n"), stdout=io.StringIO())
    with pytest.raises(ApprovalRequiredError, match="declined"):
        approve(request_for(kit))


def test_console_never_reads_a_stream_that_is_not_a_terminal(kit: Kit) -> None:
    piped = io.StringIO("y\n")
    approve = ConsoleApproval(kit.authority, stdin=piped, stdout=io.StringIO())
    with pytest.raises(ApprovalRequiredError, match="no terminal is attached"):
        approve(request_for(kit))
    assert piped.tell() == 0, "a piped stdin must not be read"


def test_console_without_an_authority_says_how_to_configure_one(kit: Kit) -> None:
    approve = ConsoleApproval(stdin=Terminal("y\n"), stdout=io.StringIO())
    with pytest.raises(ApprovalRequiredError, match="no approval authority"):
        approve(request_for(kit))


def test_authority_approval_follows_its_rule(kit: Kit) -> None:
    approve = AuthorityApproval(
        kit.authority, approve=lambda request: request.action.arguments["command"] == "ls"
    )
    assert approve(request_for(kit, "ls")) is not None
    with pytest.raises(ApprovalRequiredError, match="declined"):
        approve(request_for(kit, "rm -rf /"))


def test_authority_approval_needs_an_authority() -> None:
    with pytest.raises(ConfigurationError):
        AuthorityApproval(None)  # type: ignore[arg-type]


def test_a_console_yes_lets_a_guarded_call_run_once(kit: Kit) -> None:
    guard = kit.guard(
        approvals=ConsoleApproval(kit.authority, stdin=Terminal("y\ny\n"), stdout=io.StringIO())
    )
    (shell,) = guard.wrap([kit.tools["run_shell"]])
    first = shell.run(command="ls", cwd=str(kit.workspace))
    assert first.startswith("$ ls")
    assert kit.ran.names() == ["run_shell"]
