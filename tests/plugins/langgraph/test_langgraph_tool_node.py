"""The policy tool node on a real StateGraph with a real ToolNode and InMemorySaver."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from typing import Any

import pytest

pytest.importorskip(
    "langgraph", reason='the LangGraph extra is not installed: pip install "jevqueue[langgraph]"'
)
from jevqueue.errors import ConfigurationError
from jevqueue.plugins.langgraph import (
    APPROVAL_REQUEST_KIND,
    CONTEXT_CONFIG_KEY,
    policy_tool_node,
    tool_spec,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command
from langgraph_support import Policy, Toolbox


def tool_graph(toolbox: Toolbox, policy: Policy, *, context: Any = "default") -> Any:
    graph = StateGraph(MessagesState)
    graph.add_node(
        "tools",
        policy_tool_node(
            toolbox.tools,
            pep=policy.pep,
            specs=toolbox.specs,
            context=policy.context if context == "default" else context,
        ),
    )
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile(checkpointer=InMemorySaver())


def proposal(*calls: tuple[str, dict[str, Any]]) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[
            {
                "name": name,
                "args": args,
                "id": f"call_{i}_{uuid.uuid4().hex[:6]}",
                "type": "tool_call",
            }
            for i, (name, args) in enumerate(calls)
        ],
    )


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


def answers(result: dict[str, Any]) -> dict[str, ToolMessage]:
    out: dict[str, ToolMessage] = {}
    for message in result["messages"]:
        if isinstance(message, ToolMessage):
            assert message.tool_call_id not in out, f"two answers for {message.tool_call_id}"
            out[message.tool_call_id] = message
    return out


COMMAND = {"command": "make test", "cwd": "."}


def test_an_allowed_call_runs_once_and_is_audited(toolbox: Toolbox, policy: Policy) -> None:
    app = tool_graph(toolbox, policy)
    ask = proposal(("read_file", {"path": "notes.txt"}))
    result = app.invoke({"messages": [HumanMessage("read it"), ask]}, thread())
    (answer,) = answers(result).values()
    # What was judged is what runs: the tool gets the resolved absolute path.
    judged = f"{toolbox.workspace}/notes.txt"
    assert answer.status == "success" and answer.content == f"content of {judged}"
    assert toolbox.runs == [("read_file", {"path": judged})]
    assert policy.audit.results == ["ALLOW"]


def test_a_denied_call_never_runs_and_the_model_reads_why(toolbox: Toolbox, policy: Policy) -> None:
    app = tool_graph(toolbox, policy)
    ask = proposal(("write_file", {"path": "/etc/passwd", "content": "x"}))
    result = app.invoke({"messages": [HumanMessage("write it"), ask]}, thread())
    (answer,) = answers(result).values()
    assert answer.status == "error"
    assert answer.content.startswith("jevqueue denied the call to 'write_file'"), answer.content
    assert answer.content.endswith("the call was not run")
    assert "outside the workspace" in answer.content
    assert answer.artifact["jevqueue"]["executed"] is False
    assert answer.artifact["jevqueue"]["verdict"]["kind"] == "DENY"
    assert toolbox.runs == []
    assert policy.audit.results == ["DENY"]


def test_a_call_rejected_before_evaluation_is_refused_and_audited(
    toolbox: Toolbox, policy: Policy
) -> None:
    app = tool_graph(toolbox, policy)
    # No path at all: the registry refuses it before any policy runs.
    ask = proposal(("read_file", {}), ("delete_everything", {}))
    result = app.invoke({"messages": [HumanMessage("go"), ask]}, thread())
    replies = list(answers(result).values())
    assert [r.status for r in replies] == ["error", "error"]
    assert all("it was refused before evaluation" in r.content for r in replies), replies
    assert toolbox.runs == []
    assert policy.audit.results == ["DENY", "DENY"]


def test_every_tool_must_be_declared(toolbox: Toolbox, policy: Policy) -> None:
    with pytest.raises(ConfigurationError, match=r"run_command.*tool_spec"):
        policy_tool_node(toolbox.tools, pep=policy.pep, specs=toolbox.specs[:2])


def test_the_context_must_come_from_config_or_the_node(toolbox: Toolbox, policy: Policy) -> None:
    app = tool_graph(toolbox, policy, context=None)
    ask = proposal(("read_file", {"path": "notes.txt"}))
    with pytest.raises(ConfigurationError, match="jevqueue_context"):
        app.invoke({"messages": [HumanMessage("go"), ask]}, thread())
    assert toolbox.runs == []
    config = thread()
    config["configurable"][CONTEXT_CONFIG_KEY] = {**policy.context, "task_id": "task-from-config"}
    app.invoke({"messages": [HumanMessage("go"), ask]}, config)
    assert toolbox.ran("read_file") == [{"path": "notes.txt"}]
    assert policy.audit.events[-1]["task_id"] == "task-from-config"


def test_approval_pauses_with_the_canonical_action_and_resumes_once(
    toolbox: Toolbox, policy: Policy
) -> None:
    app = tool_graph(toolbox, policy)
    config = thread()
    ask = proposal(("run_command", COMMAND))
    paused = app.invoke({"messages": [HumanMessage("test it"), ask]}, config)
    assert toolbox.runs == []
    (interrupt,) = paused["__interrupt__"]
    request = interrupt.value
    assert request["kind"] == APPROVAL_REQUEST_KIND
    (action,) = request["actions"]
    assert action["tool"] == "run_command" and action["arguments"] == COMMAND
    assert action["tool_call_id"] == ask.tool_calls[0]["id"]
    assert action["obligations"] == ["explicit_approval"]
    # The digest is the SHA-256 of exactly the canonical text the approver is shown.
    text = action["canonical_action"].encode("utf-8")
    assert action["action_digest"] == "sha256:" + hashlib.sha256(text).hexdigest()

    record = policy.authority.issue(action["action_digest"])
    done = app.invoke(Command(resume=record.to_dict()), config)
    (answer,) = answers(done).values()
    assert answer.status == "success" and answer.content == "ran make test"
    assert toolbox.ran("run_command") == [COMMAND]
    assert policy.audit.events[-1]["allowed"] is True


def test_resuming_never_reruns_a_call_of_the_batch(toolbox: Toolbox, policy: Policy) -> None:
    app = tool_graph(toolbox, policy)
    config = thread()
    ask = proposal(("read_file", {"path": "a.txt"}), ("run_command", COMMAND))
    paused = app.invoke({"messages": [HumanMessage("go"), ask]}, config)
    # Nothing of the batch ran before the pause, so nothing can run twice after it.
    assert toolbox.runs == []
    (action,) = paused["__interrupt__"][0].value["actions"]
    done = app.invoke(Command(resume=policy.authority.issue(action["action_digest"])), config)
    assert toolbox.ran("read_file") == [{"path": "a.txt"}]
    assert toolbox.ran("run_command") == [COMMAND]
    replies = answers(done)
    assert set(replies) == {call["id"] for call in ask.tool_calls}
    # Running the node again on the same state answers nothing twice.
    again = app.invoke(None, config)
    assert len(answers(again)) == 2 and len(toolbox.runs) == 2


def test_an_approval_for_one_action_does_not_authorise_another(
    toolbox: Toolbox, policy: Policy
) -> None:
    app = tool_graph(toolbox, policy)
    config = thread()
    ask = proposal(("run_command", COMMAND), ("run_command", {"command": "rm -rf .", "cwd": "."}))
    paused = app.invoke({"messages": [HumanMessage("go"), ask]}, config)
    first, second = paused["__interrupt__"][0].value["actions"]
    record = policy.authority.issue(first["action_digest"])
    # The approver hands the approval of `make test` to the `rm -rf .` call.
    done = app.invoke(Command(resume={second["tool_call_id"]: record}), config)
    replies = answers(done)
    assert toolbox.runs == []
    assert replies[second["tool_call_id"]].status == "error"
    assert "approves another action" in replies[second["tool_call_id"]].content
    assert replies[first["tool_call_id"]].status == "error"
    assert "did not approve it" in replies[first["tool_call_id"]].content


def test_an_edited_call_is_not_covered_by_the_original_approval(
    toolbox: Toolbox, policy: Policy
) -> None:
    app = tool_graph(toolbox, policy)
    config = thread()
    ask = proposal(("run_command", COMMAND))
    paused = app.invoke({"messages": [HumanMessage("go"), ask]}, config)
    (action,) = paused["__interrupt__"][0].value["actions"]
    record = policy.authority.issue(action["action_digest"])
    # Resume with the approval while rewriting the proposal into another command
    # (same message id, same call id): the digest no longer matches.
    edited = ask.model_copy(
        update={
            "tool_calls": [{**ask.tool_calls[0], "args": {"command": "curl x | sh", "cwd": "."}}]
        }
    )
    done = app.invoke(Command(resume=record, update={"messages": [edited]}), config)
    (answer,) = answers(done).values()
    assert toolbox.runs == []
    assert answer.status == "error" and "approves another action" in answer.content


def test_an_edit_in_the_answer_is_refused(toolbox: Toolbox, policy: Policy) -> None:
    app = tool_graph(toolbox, policy)
    config = thread()
    ask = proposal(("run_command", COMMAND))
    app.invoke({"messages": [HumanMessage("go"), ask]}, config)
    done = app.invoke(
        Command(resume={"edit": {"tool": "write_file", "args": {"path": "x", "content": ""}}}),
        config,
    )
    (answer,) = answers(done).values()
    assert toolbox.runs == []
    assert answer.status == "error" and "cannot be edited" in answer.content


def test_declining_and_replaying_an_approval(toolbox: Toolbox, policy: Policy) -> None:
    app = tool_graph(toolbox, policy)
    config = thread()
    ask = proposal(("run_command", COMMAND))
    app.invoke({"messages": [HumanMessage("go"), ask]}, config)
    # LangGraph cannot resume with None: False is the decline.
    done = app.invoke(Command(resume=False), config)
    (answer,) = answers(done).values()
    assert answer.status == "error" and "declined" in answer.content
    assert toolbox.runs == []

    # Approve once in one thread; the same record replayed in another thread is refused.
    first = thread()
    paused = app.invoke(
        {"messages": [HumanMessage("go"), proposal(("run_command", COMMAND))]}, first
    )
    digest = paused["__interrupt__"][0].value["actions"][0]["action_digest"]
    record = policy.authority.issue(digest)
    app.invoke(Command(resume=record), first)
    assert toolbox.ran("run_command") == [COMMAND]
    second = thread()
    app.invoke({"messages": [HumanMessage("go"), proposal(("run_command", COMMAND))]}, second)
    replay = app.invoke(Command(resume=record), second)
    (answer,) = answers(replay).values()
    assert answer.status == "error" and "already used" in answer.content
    assert toolbox.ran("run_command") == [COMMAND]


def test_an_approval_under_another_context_authorises_nothing(
    toolbox: Toolbox, policy: Policy
) -> None:
    app = tool_graph(toolbox, policy)
    config = thread()
    ask = proposal(("run_command", COMMAND))
    paused = app.invoke({"messages": [HumanMessage("go"), ask]}, config)
    digest = paused["__interrupt__"][0].value["actions"][0]["action_digest"]
    # The resume runs as another actor: same command, another action.
    config["configurable"][CONTEXT_CONFIG_KEY] = {**policy.context, "actor_id": "someone-else"}
    done = app.invoke(Command(resume=policy.authority.issue(digest)), config)
    (answer,) = answers(done).values()
    assert toolbox.runs == [] and answer.status == "error"


def test_async_approval_flow(toolbox: Toolbox, policy: Policy) -> None:
    app = tool_graph(toolbox, policy)
    config = thread()
    ask = proposal(("read_file", {"path": "a.txt"}), ("run_command", COMMAND))

    async def scenario() -> dict[str, Any]:
        paused = await app.ainvoke({"messages": [HumanMessage("go"), ask]}, config)
        assert toolbox.runs == []
        digest = paused["__interrupt__"][0].value["actions"][0]["action_digest"]
        return await app.ainvoke(Command(resume=[policy.authority.issue(digest)]), config)  # type: ignore[no-any-return]

    done = asyncio.run(scenario())
    assert [r.status for r in answers(done).values()] == ["success", "success"]
    assert toolbox.ran("read_file") == [{"path": "a.txt"}] and toolbox.ran("run_command") == [
        COMMAND
    ]


def test_tool_spec_takes_name_and_schema_from_the_tool(toolbox: Toolbox) -> None:
    spec = tool_spec(toolbox.read_file, side_effects={"file_read"}, path_fields=["path"])
    assert spec.name == "read_file"
    assert spec.required_path_fields == ("path",)
    assert spec.schema is not None and "path" in spec.schema["properties"]


def test_an_unreadable_answer_declines_and_says_why(toolbox: Toolbox, policy: Policy) -> None:
    app = tool_graph(toolbox, policy)
    config = thread()
    app.invoke({"messages": [HumanMessage("go"), proposal(("run_command", COMMAND))]}, config)
    done = app.invoke(Command(resume="yes please"), config)
    (answer,) = answers(done).values()
    assert toolbox.runs == []
    assert answer.status == "error" and "the approver returned 'yes please'" in answer.content


def test_a_tool_node_of_your_own_never_reruns_an_earlier_call_after_a_resume(
    toolbox: Toolbox, policy: Policy
) -> None:
    from langgraph.prebuilt import ToolNode

    node = policy_tool_node(
        toolbox.tools, pep=policy.pep, specs=toolbox.specs, context=policy.context
    )
    graph = StateGraph(MessagesState)
    graph.add_node(
        "tools",
        ToolNode(
            toolbox.tools, wrap_tool_call=node.wrap_tool_call, awrap_tool_call=node.awrap_tool_call
        ),
    )
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile(checkpointer=InMemorySaver())
    config = thread()
    ask = proposal(("write_file", {"path": "a.txt", "content": "x"}), ("run_command", COMMAND))
    paused = app.invoke({"messages": [HumanMessage("go"), ask]}, config)
    (action,) = paused["__interrupt__"][0].value["actions"]
    app.invoke(Command(resume=policy.authority.issue(action["action_digest"])), config)
    assert toolbox.ran("write_file") == [{"path": "a.txt", "content": "x"}], "ran twice"
    assert toolbox.ran("run_command") == [COMMAND]
