"""A LlamaIndex run that pauses for the approval inbox and resumes from its stored decision.

With ``InboxApprover(pause=True)`` the governed tool files the request in a real SQLite
inbox and the workflow pauses on its ``ApprovalRequiredEvent``; the run is serialized with
``ctx.to_dict()`` and cancelled. A reviewer decides through the inbox; then a *second*
agent — another model, another approver over the same inbox file — restores the context
and resumes with ``ApprovalResponseEvent.of(digest, approver.answer(digest))``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from jevqueue.approvals import InboxApprover, InboxState, SQLiteApprovalInbox
from jevqueue.errors import ApprovalDeclinedError, ApprovalExpiredError, UsageError
from jevqueue.plugins.llamaindex import (
    ApprovalRequiredEvent,
    ApprovalResponseEvent,
    GovernedFunctionAgent,
)
from jevqueue.plugins.llamaindex.testing import ScriptedFunctionCallingLLM, scripted_tool_calls
from llama_index.core.agent.workflow import ToolCallResult
from llama_index.core.workflow import Context
from llamaindex_kit import DELEGATE, Kit, fixed_governor, run

LS = {"command": "ls", "cwd": "."}


class Paused:
    """One run paused for the inbox: its serialized context and the request's digest."""

    def __init__(self, kit: Kit, tmp_path: Path, expires_in: float = 240) -> None:
        self.kit = kit
        self.store = tmp_path / "inbox.sqlite3"
        self.expires_in = expires_in
        self.first_llm = ScriptedFunctionCallingLLM(
            steps=[scripted_tool_calls(("run_command", LS))]
        )
        agent = self.agent(self.first_llm)

        async def pause() -> tuple[dict[str, Any], ApprovalRequiredEvent]:
            handler = agent.run(user_msg="list the files")
            async for event in handler.stream_events():
                if isinstance(event, ApprovalRequiredEvent):
                    data = json.loads(json.dumps(handler.ctx.to_dict()))
                    await handler.cancel_run()
                    return data, event
            raise AssertionError("the run never paused for an approval")

        self.data, self.event = run(pause)
        self.digest = self.event.action_digest
        self.inbox = SQLiteApprovalInbox(self.store)

    def agent(self, llm: ScriptedFunctionCallingLLM) -> GovernedFunctionAgent:
        return GovernedFunctionAgent(
            name="ops",
            description="Runs commands",
            llm=llm,
            governor=fixed_governor(DELEGATE),
            tools=self.kit.tools,
            pep=self.kit.pep,
            specs=self.kit.specs(),
            context=self.kit.context,
            approver=InboxApprover(
                self.store, expires_in=self.expires_in, framework="llamaindex", pause=True
            ),
            streaming=False,
        )

    def resume(self, *steps: Any) -> tuple[str, list[ToolCallResult], ScriptedFunctionCallingLLM]:
        """Restore the run in a second agent and answer it from the inbox in one line."""
        llm = ScriptedFunctionCallingLLM(steps=list(steps))
        agent = self.agent(llm)
        approver = InboxApprover(self.store, pause=True)

        async def go() -> tuple[str, list[ToolCallResult]]:
            handler = agent.run(ctx=Context.from_dict(agent, self.data))
            digest = self.digest
            handler.ctx.send_event(ApprovalResponseEvent.of(digest, approver.answer(digest)))
            results = [e async for e in handler.stream_events() if isinstance(e, ToolCallResult)]
            return str(await handler), results

        result, results = run(go)
        return result, results, llm


def _read_by_model(llm: ScriptedFunctionCallingLLM) -> str:
    """Everything the model was shown on its one request after the resume."""
    (request,) = llm.requests
    return "\n".join(str(message.content) for message in request.messages)


@pytest.fixture
def paused(kit: Kit, tmp_path: Path) -> Paused:
    return Paused(kit, tmp_path)


def test_the_run_pauses_with_one_request_filed_and_nothing_run(paused: Paused) -> None:
    (request,) = paused.inbox.requests()
    assert request.state is InboxState.PENDING
    assert request.action_digest == paused.digest
    assert request.requester.framework == "llamaindex"
    assert request.requester.call_id == paused.event.call_id is not None
    assert request.request["arguments"] == {"command": "ls", "cwd": "."}
    assert paused.kit.runs == []
    paused.first_llm.assert_complete()


def test_an_approval_in_the_inbox_resumes_the_restored_run_and_runs_the_call_once(
    paused: Paused,
) -> None:
    (request,) = paused.inbox.requests()
    paused.inbox.approve(request.request_id, paused.kit.authority.issue(paused.digest))
    result, results, llm = paused.resume("Listed.")
    assert result == "Listed."
    assert [r.tool_output.is_error for r in results] == [False]
    # the judged arguments: the working directory as the policy resolved it
    assert paused.kit.runs == [("run_command", {"command": "ls", "cwd": str(paused.kit.workspace)})]
    assert len(paused.inbox.requests(None)) == 1
    last = paused.kit.audit.events[-1]
    assert last["action_digest"] == paused.digest and last["allowed"] is True
    llm.assert_complete()


def test_a_denial_in_the_inbox_reaches_the_model_and_nothing_runs(paused: Paused) -> None:
    (request,) = paused.inbox.requests()
    paused.inbox.deny(request.request_id, "alice", "no shell before the release")
    assert type(InboxApprover(paused.store).answer(paused.digest)) is ApprovalDeclinedError
    result, results, llm = paused.resume("Understood.")
    assert result == "Understood."
    (output,) = [r.tool_output for r in results]
    assert output.is_error
    read = _read_by_model(llm)
    assert "the approver declined: alice denied it" in read
    assert "no shell before the release" in read and "expired" not in read
    assert paused.kit.runs == []
    # the restored run judged the call again to settle the decline, and filed nothing more
    assert len(paused.inbox.requests(None)) == 1
    assert not any("jevqueue.approval.expired" in e["rule_ids"] for e in paused.kit.audit.events)
    llm.assert_complete()


def test_nobody_deciding_in_time_resumes_as_expired_not_denied(kit: Kit, tmp_path: Path) -> None:
    paused = Paused(kit, tmp_path, expires_in=0.5)
    (request,) = paused.inbox.requests()
    deadline = time.monotonic() + 30
    while paused.inbox.get(request.request_id).state is InboxState.PENDING:
        assert time.monotonic() < deadline, "the request never expired"
        time.sleep(0.05)
    assert isinstance(InboxApprover(paused.store).answer(paused.digest), ApprovalExpiredError)
    result, results, llm = paused.resume("Nobody answered.")
    assert result == "Nobody answered."
    (output,) = [r.tool_output for r in results]
    assert output.is_error
    read = _read_by_model(llm)
    assert "the approval expired: nobody decided within 0.5 s" in read
    assert "declined" not in read
    assert kit.runs == []
    expired = [e for e in kit.audit.events if "jevqueue.approval.expired" in e["rule_ids"]]
    assert len(expired) == 1 and expired[0]["action_digest"] == paused.digest
    assert len(paused.inbox.requests(None)) == 1
    llm.assert_complete()


def test_resuming_while_the_request_is_pending_is_a_typed_error(paused: Paused) -> None:
    with pytest.raises(UsageError, match="still pending"):
        InboxApprover(paused.store, pause=True).answer(paused.digest)
    assert paused.kit.runs == []
    (request,) = paused.inbox.requests()
    assert request.state is InboxState.PENDING


def test_where_the_call_cannot_pause_the_approver_waits_for_the_one_request_filed(
    kit: Kit, tmp_path: Path
) -> None:
    """A synchronous call outside a workflow cannot pause: ``pause=True`` changes nothing,
    the approver waits as usual — for the request the guard filed, never a second one."""
    import threading

    from jevqueue.plugins.llamaindex import governed_tools

    store = tmp_path / "inbox.sqlite3"
    approver = InboxApprover(store, expires_in=240, poll_interval=0.05, pause=True)
    tools = governed_tools(
        kit.tools, pep=kit.pep, specs=kit.specs(), context=kit.context, approver=approver
    )
    (run_command,) = [tool for tool in tools if tool.metadata.name == "run_command"]
    outputs: list[Any] = []
    thread = threading.Thread(target=lambda: outputs.append(run_command.call(**LS)))
    thread.start()
    inbox = SQLiteApprovalInbox(store)
    deadline = time.monotonic() + 30
    while not inbox.requests():
        assert time.monotonic() < deadline, "the call never filed its request"
        time.sleep(0.02)
    (request,) = inbox.requests()
    assert kit.runs == []
    inbox.approve(request.request_id, kit.authority.issue(request.action_digest))
    thread.join(timeout=60)
    assert not thread.is_alive(), "the call never returned"
    (output,) = outputs
    assert not output.is_error and kit.names_run() == ["run_command"]
    assert len(inbox.requests(None)) == 1 and approver.filed == [request.request_id]
