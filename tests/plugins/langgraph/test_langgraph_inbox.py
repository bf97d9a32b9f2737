"""A real LangGraph agent whose approver is the approval inbox, approved from another thread.

The graph runs in a thread and blocks in its tool node on the inbox; the test, as the
reviewer alice, approves or denies through the store. The scripted model then reads the
tool's result, or the refusal with the reviewer's reason.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "langgraph", reason='the LangGraph extra is not installed: pip install "jevqueue[langgraph]"'
)
from jevqueue.approvals import InboxApprover, InboxState, SQLiteApprovalInbox
from jevqueue.plugins.langgraph import create_governed_agent
from jevqueue.plugins.langgraph.testing import ScriptedChatModel, scripted_tool_call
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_support import Policy, Toolbox, fixed_governor

COMMAND = {"command": "make deploy", "cwd": "."}


def _agent(toolbox: Toolbox, policy: Policy, store: Path) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(steps=[scripted_tool_call("run_command", COMMAND), "Done."])
    app = create_governed_agent(
        model,
        toolbox.tools,
        pep=policy.pep,
        specs=toolbox.specs,
        context=policy.context,
        approver=InboxApprover(store, poll_interval=0.05, framework="langgraph"),
        governor=fixed_governor(read_file=0.1, write_file=0.1, run_command=0.95),
        checkpointer=InMemorySaver(),
    )
    return app, model


def _run_in_thread(app: Any) -> tuple[threading.Thread, list[dict[str, Any]]]:
    results: list[dict[str, Any]] = []
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    thread = threading.Thread(
        target=lambda: results.append(app.invoke({"messages": [HumanMessage("deploy it")]}, config))
    )
    thread.start()
    return thread, results


def _pending(inbox: SQLiteApprovalInbox) -> Any:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = inbox.requests()
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError("the agent never filed its request")


def _tool_reply(result: dict[str, Any]) -> ToolMessage:
    (message,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    return message


def test_the_graph_waits_for_the_inbox_and_runs_the_approved_call_once(
    toolbox: Toolbox, policy: Policy, tmp_path: Path
) -> None:
    store = tmp_path / "inbox.sqlite3"
    app, model = _agent(toolbox, policy, store)
    thread, results = _run_in_thread(app)
    inbox = SQLiteApprovalInbox(store)
    request = _pending(inbox)
    assert request.tool == "run_command" and request.requester.framework == "langgraph"
    assert request.request["arguments"]["command"] == "make deploy"
    assert toolbox.runs == []  # nothing runs while the reviewer reads
    decided = inbox.approve(request.request_id, policy.authority.issue(request.action_digest))
    assert decided.state is InboxState.APPROVED
    thread.join(timeout=30)
    assert not thread.is_alive()
    (result,) = results
    assert _tool_reply(result).status == "success"
    assert result["messages"][-1].content == "Done."
    assert len(toolbox.ran("run_command")) == 1
    model.assert_complete()


def test_a_denial_in_the_inbox_reaches_the_model_and_nothing_runs(
    toolbox: Toolbox, policy: Policy, tmp_path: Path
) -> None:
    store = tmp_path / "inbox.sqlite3"
    app, model = _agent(toolbox, policy, store)
    thread, results = _run_in_thread(app)
    inbox = SQLiteApprovalInbox(store)
    inbox.deny(_pending(inbox).request_id, "alice", "deploys wait for Monday")
    thread.join(timeout=30)
    (result,) = results
    answer = _tool_reply(result)
    assert answer.status == "error" and "deploys wait for Monday" in answer.content
    assert toolbox.runs == []
    model.assert_complete()
