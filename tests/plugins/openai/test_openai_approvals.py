"""PolicyToolRunner's approvals and runs: approver=, the pause, and each call run once.

Every test here would fail on the runner before the guard (``d37f3e0^``): it took no
approver, ran again on a second run of the same response every call that had already run,
spent an approval on a tool it had no function for, and accepted functions it could never
call correctly.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("httpx", reason='the openai plugin needs pip install "jevqueue[openai]"')

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue.approvals import ApprovalAuthority, MemoryConsumedApprovals, SignedApprovalVerifier
from jevqueue.errors import ApprovalDeclinedError, ConfigurationError
from jevqueue.plugins.openai import PolicyToolRunner, tool_call_completion, tool_calls_completion
from jevqueue.policy import (
    ApprovalRequest,
    AuthorityApprover,
    ExecutionContext,
    PolicyEnforcementPoint,
    ToolSpec,
    Verdict,
)
from jevqueue.testing.recording_audit import RecordingAuditSink

SPECS = [
    ToolSpec("lookup", side_effects={"network"}),
    ToolSpec("shell", side_effects={"shell_command"}),
    ToolSpec("save", side_effects={"file_write"}, path_fields=("path",)),
]


class ShellNeedsApproval:
    """``shell`` needs an explicit approval; everything else is allowed."""

    revision = "test-approvals-1"

    def evaluate(self, action: Any) -> Verdict:
        if action.tool == "shell":
            return Verdict.allow_with_obligations(
                ("explicit_approval",), "shell commands need an explicit approval"
            )
        return Verdict.allow("allowed")


class Kit:
    """A PEP with a trusted authority, a workspace, and tools that record each run."""

    def __init__(self, workspace: str) -> None:
        key = Ed25519PrivateKey.generate()
        self.authority = ApprovalAuthority(key, "approver-1")
        self.audit = RecordingAuditSink()
        self.pep = PolicyEnforcementPoint(
            ShellNeedsApproval(),
            audit_logger=self.audit,
            approval_verifier=SignedApprovalVerifier({"approver-1": key.public_key()}),
            consumed_approvals=MemoryConsumedApprovals(),
        )
        self.context = ExecutionContext(
            task_id="t-1", actor_id="agent-1", workspace=workspace, git_sha="a1b2c3d"
        )
        self.ran: list[tuple[str, dict[str, Any]]] = []

    def function(self, name: str) -> Any:
        def run(**arguments: Any) -> str:
            self.ran.append((name, arguments))
            return f"{name} ran"

        return run

    def runner(self, names: tuple[str, ...] = ("lookup", "shell", "save"), **kw: Any) -> Any:
        return PolicyToolRunner(
            {name: self.function(name) for name in names},
            pep=self.pep,
            specs=SPECS,
            context=self.context,
            **kw,
        )


@pytest.fixture
def kit(tmp_path: Any) -> Kit:
    return Kit(str(tmp_path))


def _batch() -> dict[str, Any]:
    response = tool_calls_completion(
        [("lookup", {"q": "x"}), ("shell", {"command": "ls"}), ("save", {"path": "a.txt"})]
    )
    for index, call in enumerate(response["choices"][0]["message"]["tool_calls"]):
        call["id"] = f"call-{index}"
    return response


def test_running_the_response_again_with_the_records_runs_only_what_had_not_run(
    kit: Kit, tmp_path: Any
) -> None:
    runner = kit.runner()
    response = _batch()

    first = runner.run(response)
    digest = first[1].approval_requested
    assert [r.executed for r in first] == [True, False, True]
    assert digest is not None and not first[1].executed

    again = runner.run(response, approval_records=[kit.authority.issue(digest)])

    assert kit.ran == [
        ("lookup", {"q": "x"}),
        ("save", {"path": str(tmp_path / "a.txt")}),
        ("shell", {"command": "ls"}),
    ], "a call that had run ran again when the same response was run again"
    assert [r.is_error for r in again] == [False, False, False]
    assert [r.content for r in again] == ["lookup ran", "shell ran", "save ran"]
    assert [r.message()["tool_call_id"] for r in again] == ["call-0", "call-1", "call-2"]


def test_a_paused_call_carries_the_core_approval_request(kit: Kit) -> None:
    (result,) = kit.runner().run(tool_call_completion("shell", {"command": "ls"}))

    assert result.pending and result.is_error and not result.executed
    request = result.judgement.request
    assert type(request) is ApprovalRequest
    assert (request.tool, dict(request.arguments)) == ("shell", {"command": "ls"})
    assert request.action_digest == result.approval_requested
    assert "approval_records" in result.content
    assert kit.ran == []


def test_the_approver_is_asked_inline_and_its_record_lets_the_call_run(kit: Kit) -> None:
    approver = AuthorityApprover(kit.authority)
    runner = kit.runner(approver=approver)

    results = runner.run(_batch())

    assert [r.is_error for r in results] == [False, False, False]
    assert [request.tool for request in approver.requests] == ["shell"]
    assert results[1].approval_requested == approver.requests[0].action_digest
    assert [name for name, _ in kit.ran] == ["lookup", "shell", "save"]
    assert runner.run(_batch()) and len(kit.ran) == 3, "a second run ran the batch again"


def test_an_approver_that_declines_gives_the_model_its_reason(kit: Kit) -> None:
    def approver(request: ApprovalRequest) -> Any:
        raise ApprovalDeclinedError("no shell before the release")

    (result,) = kit.runner(approver=approver).run(tool_call_completion("shell", {"command": "ls"}))

    assert kit.ran == [] and result.is_error and not result.executed
    assert "the approver declined: no shell before the release" in result.content


@pytest.mark.parametrize(
    ("answer", "says"),
    [(True, "the approver returned True (bool)"), ("yes", "the approver returned 'yes' (str)")],
)
def test_an_approver_that_answers_the_wrong_thing_is_reported(
    kit: Kit, answer: Any, says: str
) -> None:
    runner = kit.runner(approver=lambda request: answer)

    (result,) = runner.run(tool_call_completion("shell", {"command": "ls"}))

    assert kit.ran == [] and result.is_error
    assert "the approver failed (ApproverAnswerError" in result.content
    assert says in result.content


def test_a_declared_tool_without_a_function_spends_no_approval(kit: Kit) -> None:
    digest_holder = kit.runner().run(tool_call_completion("shell", {"command": "ls"}))[0]
    record = kit.authority.issue(digest_holder.approval_requested)
    without = kit.runner(names=("lookup",))

    (refused,) = without.run(
        tool_call_completion("shell", {"command": "ls"}), approval_records=[record]
    )

    assert refused.is_error and not refused.executed
    assert "no function implements 'shell'" in refused.content
    (ran,) = kit.runner().run(
        tool_call_completion("shell", {"command": "ls"}), approval_records=[record]
    )
    assert ran.executed and not ran.is_error, ran.content
    assert kit.ran == [("shell", {"command": "ls"})]


@pytest.mark.parametrize(
    ("functions", "says"),
    [
        ({"lookup": "not a function"}, "not a callable"),
        ({("lookup",): print}, "keyed by the tool's declared name"),
        ({"Lookup": print}, "no policy declaration"),
    ],
)
def test_a_function_the_runner_could_not_dispatch_is_refused_when_it_is_built(
    kit: Kit, functions: dict[Any, Any], says: str
) -> None:
    with pytest.raises(ConfigurationError, match=says):
        PolicyToolRunner(functions, pep=kit.pep, specs=SPECS, context=kit.context)


def test_an_async_function_is_refused_by_run_and_awaited_by_arun(kit: Kit) -> None:
    awaited: list[dict[str, Any]] = []

    async def lookup(**arguments: Any) -> str:
        awaited.append(arguments)
        return "looked up"

    runner = PolicyToolRunner({"lookup": lookup}, pep=kit.pep, specs=SPECS, context=kit.context)
    response = tool_call_completion("lookup", {"q": "x"})

    (refused,) = runner.run(response)
    assert refused.is_error and not refused.executed and awaited == []
    assert "await runner.arun(response)" in refused.content

    (result,) = asyncio.run(runner.arun(response))
    assert (result.content, result.is_error, awaited) == ("looked up", False, [{"q": "x"}])


def test_arun_awaits_an_async_approver(kit: Kit) -> None:
    shown: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Any:
        shown.append(request)
        return kit.authority.issue(request.action_digest)

    runner = kit.runner(approver=approver)

    results = asyncio.run(runner.arun(_batch()))

    assert [r.is_error for r in results] == [False, False, False]
    assert [request.tool for request in shown] == ["shell"]
    (sync,) = runner.run(tool_call_completion("shell", {"command": "pwd"}))
    assert sync.is_error and "approver is async" in sync.content


def test_a_legacy_function_call_runs_once_under_the_response_id(kit: Kit) -> None:
    runner = kit.runner()
    response = {
        "id": "chatcmpl-legacy-1",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "lookup", "arguments": '{"q": "x"}'},
                },
            }
        ],
    }

    (first,) = runner.run(response)
    (again,) = runner.run(response)

    assert kit.ran == [("lookup", {"q": "x"})]
    assert (first.replayed, again.replayed) == (False, True)
    assert again.content == first.content and again.message()["role"] == "function"
