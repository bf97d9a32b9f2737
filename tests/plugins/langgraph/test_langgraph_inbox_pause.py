"""A LangGraph run that pauses for the approval inbox and resumes from its stored decision.

With ``InboxApprover(pause=True)`` the tool node files the request in a real SQLite inbox
and the graph pauses with ``interrupt()`` (nothing blocks). A reviewer decides through the
inbox; then a *second* compiled graph — another model, another approver over the same
inbox file, the same checkpointer — resumes the thread with
``Command(resume=approver.answer(digest))``, as another process would.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "langgraph", reason='the LangGraph extra is not installed: pip install "jevqueue[langgraph]"'
)
from jevqueue.approvals import InboxApprover, InboxState, SQLiteApprovalInbox
from jevqueue.errors import (
    ApprovalDeclinedError,
    ApprovalExpiredError,
    ApprovalPendingError,
    UsageError,
)
from jevqueue.plugins.langgraph import create_governed_agent
from jevqueue.plugins.langgraph.testing import ScriptedChatModel, scripted_tool_call
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from langgraph_support import Policy, Toolbox, fixed_governor

COMMAND = {"command": "make deploy", "cwd": "."}


class Paused:
    """One thread of a graph paused for the inbox, and what it takes to resume it."""

    def __init__(
        self, toolbox: Toolbox, policy: Policy, tmp_path: Path, expires_in: float = 240
    ) -> None:
        self.toolbox, self.policy = toolbox, policy
        self.store = tmp_path / "inbox.sqlite3"
        self.expires_in = expires_in
        self.checkpointer = InMemorySaver()
        self.config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        self.first_model = ScriptedChatModel(steps=[scripted_tool_call("run_command", COMMAND)])
        first = self.graph(self.first_model)
        self.paused = first.invoke({"messages": [HumanMessage("deploy it")]}, self.config)
        self.inbox = SQLiteApprovalInbox(self.store)

    def graph(self, model: ScriptedChatModel) -> Any:
        approver = InboxApprover(
            self.store, expires_in=self.expires_in, framework="langgraph", pause=True
        )
        return create_governed_agent(
            model,
            self.toolbox.tools,
            pep=self.policy.pep,
            specs=self.toolbox.specs,
            context=self.policy.context,
            approver=approver,
            governor=fixed_governor(read_file=0.1, write_file=0.1, run_command=0.95),
            checkpointer=self.checkpointer,
        )

    @property
    def digest(self) -> str:
        (paused,) = self.paused["__interrupt__"]
        (action,) = paused.value["actions"]
        return str(action["action_digest"])

    def resume(self, *steps: Any) -> tuple[dict[str, Any], ScriptedChatModel]:
        """Resume with a second compiled graph, answered from the inbox in one line."""
        model = ScriptedChatModel(steps=list(steps))
        second = self.graph(model)
        approver = InboxApprover(self.store, pause=True)
        done = second.invoke(Command(resume=approver.answer(self.digest)), self.config)
        return done, model


def _tool_reply(result: dict[str, Any]) -> ToolMessage:
    (message,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    return message


def _read_by_model(model: ScriptedChatModel) -> str:
    """The tool result the model was shown on its one request."""
    (request,) = model.requests
    (reply,) = [m for m in request.messages if isinstance(m, ToolMessage)]
    return str(reply.content)


@pytest.fixture
def paused(toolbox: Toolbox, policy: Policy, tmp_path: Path) -> Paused:
    return Paused(toolbox, policy, tmp_path)


def test_the_run_pauses_with_one_request_filed_and_nothing_run(paused: Paused) -> None:
    assert "__interrupt__" in paused.paused
    (request,) = paused.inbox.requests()
    assert request.state is InboxState.PENDING
    assert request.action_digest == paused.digest
    assert request.requester.framework == "langgraph"
    assert request.request["arguments"]["command"] == "make deploy"
    assert paused.toolbox.runs == []
    paused.first_model.assert_complete()


def test_an_approval_in_the_inbox_resumes_a_second_graph_and_runs_the_call_once(
    paused: Paused,
) -> None:
    (request,) = paused.inbox.requests()
    record = paused.policy.authority.issue(request.action_digest)
    assert paused.inbox.approve(request.request_id, record).state is InboxState.APPROVED
    done, model = paused.resume("Deployed.")
    assert _tool_reply(done).status == "success"
    assert done["messages"][-1].content == "Deployed."
    # the judged arguments: the working directory as the policy resolved it
    assert paused.toolbox.runs == [
        ("run_command", {"command": "make deploy", "cwd": paused.toolbox.workspace})
    ]
    # resuming judged the call again and filed nothing more
    assert len(paused.inbox.requests(None)) == 1
    assert paused.policy.audit.results[-1] == "ALLOW_WITH_OBLIGATIONS"
    assert paused.policy.audit.events[-1]["allowed"] is True
    model.assert_complete()


def test_a_denial_in_the_inbox_reaches_the_model_and_nothing_runs(paused: Paused) -> None:
    (request,) = paused.inbox.requests()
    paused.inbox.deny(request.request_id, "alice", "deploys wait for Monday")
    answer = InboxApprover(paused.store).answer(paused.digest)
    assert type(answer) is ApprovalDeclinedError
    done, model = paused.resume("Not deployed.")
    reply = _tool_reply(done)
    assert reply.status == "error"
    read = _read_by_model(model)
    assert "the approver declined: alice denied it" in read
    assert "deploys wait for Monday" in read and "expired" not in read
    assert paused.toolbox.runs == []
    assert len(paused.inbox.requests(None)) == 1
    assert not any("jevqueue.approval.expired" in e["rule_ids"] for e in paused.policy.audit.events)
    model.assert_complete()


def test_nobody_deciding_in_time_resumes_as_expired_not_denied(
    toolbox: Toolbox, policy: Policy, tmp_path: Path
) -> None:
    paused = Paused(toolbox, policy, tmp_path, expires_in=0.5)
    (request,) = paused.inbox.requests()
    deadline = time.monotonic() + 30
    while paused.inbox.get(request.request_id).state is InboxState.PENDING:
        assert time.monotonic() < deadline, "the request never expired"
        time.sleep(0.05)
    assert isinstance(InboxApprover(paused.store).answer(paused.digest), ApprovalExpiredError)
    done, model = paused.resume("Nobody answered.")
    assert _tool_reply(done).status == "error"
    read = _read_by_model(model)
    assert "the approval expired: nobody decided within 0.5 s" in read
    assert "declined" not in read
    assert toolbox.runs == []
    expired = [e for e in policy.audit.events if "jevqueue.approval.expired" in e["rule_ids"]]
    assert len(expired) == 1 and expired[0]["action_digest"] == paused.digest
    assert expired[0]["allowed"] is False
    # still the one request: the resumed graph judged the call again and filed nothing
    assert len(paused.inbox.requests(None)) == 1
    model.assert_complete()


def test_resuming_while_the_request_is_pending_is_a_typed_error(paused: Paused) -> None:
    approver = InboxApprover(paused.store, pause=True)
    with pytest.raises(UsageError, match="still pending") as pending:
        approver.answer(paused.digest)
    assert isinstance(pending.value, ApprovalPendingError)
    assert pending.value.request_id == paused.inbox.requests()[0].request_id
    assert "jevqueue approvals approve" in str(pending.value)
    # the thread is still paused, and a later decision still resumes it
    (request,) = paused.inbox.requests()
    paused.inbox.approve(request.request_id, paused.policy.authority.issue(paused.digest))
    done, _ = paused.resume("Deployed.")
    assert _tool_reply(done).status == "success"
    assert len(paused.toolbox.ran("run_command")) == 1


def test_an_async_resume_runs_the_approved_call_once(paused: Paused) -> None:
    import asyncio

    (request,) = paused.inbox.requests()
    paused.inbox.approve(request.request_id, paused.policy.authority.issue(paused.digest))
    model = ScriptedChatModel(steps=["Deployed."])
    second = paused.graph(model)
    answer = InboxApprover(paused.store).answer(paused.digest)
    done = asyncio.run(second.ainvoke(Command(resume=answer), paused.config))
    assert _tool_reply(done).status == "success"
    assert len(paused.toolbox.ran("run_command")) == 1
    assert len(paused.inbox.requests(None)) == 1


def test_an_unknown_digest_is_a_typed_error(paused: Paused) -> None:
    from jevqueue.errors import UnknownRequestError

    with pytest.raises(UnknownRequestError, match="holds no request"):
        InboxApprover(paused.store).answer("sha256:" + "0" * 64)
    with pytest.raises(UnknownRequestError, match="not an action digest"):
        InboxApprover(paused.store).answer("not-a-digest")


class _UnreachableInbox:
    """An approver that asks to pause and whose inbox cannot be written."""

    pause = True

    def __call__(self, request: Any) -> None:
        raise AssertionError("a pausing approver is not asked inline")

    def file(self, request: Any) -> None:
        from jevqueue.errors import InboxError

        raise InboxError("the approval inbox /nowhere/inbox.sqlite3 cannot be written")


class _PausesWithoutFiling:
    """An approver that asks to pause but cannot file anything."""

    pause = True

    def __call__(self, request: Any) -> None:
        raise AssertionError("a pausing approver is not asked inline")


@pytest.mark.parametrize(
    ("approver", "said"),
    [
        (_UnreachableInbox(), "InboxError: the approval inbox /nowhere/inbox.sqlite3 cannot be"),
        (_PausesWithoutFiling(), "has no file(request) method"),
    ],
)
def test_a_request_that_cannot_be_filed_refuses_the_call_instead_of_pausing(
    toolbox: Toolbox, policy: Policy, approver: Any, said: str
) -> None:
    model = ScriptedChatModel(steps=[scripted_tool_call("run_command", COMMAND), "Not run."])
    app = create_governed_agent(
        model,
        toolbox.tools,
        pep=policy.pep,
        specs=toolbox.specs,
        context=policy.context,
        approver=approver,
        governor=fixed_governor(read_file=0.1, write_file=0.1, run_command=0.95),
        checkpointer=InMemorySaver(),
    )
    done = app.invoke(
        {"messages": [HumanMessage("deploy it")]},
        {"configurable": {"thread_id": uuid.uuid4().hex}},
    )
    assert "__interrupt__" not in done  # never a silent pause with nothing filed
    reply = _tool_reply(done)
    assert reply.status == "error"
    assert "its approval request could not be filed" in reply.content and said in reply.content
    assert toolbox.runs == []
    model.assert_complete()
