"""What was judged is what runs: the file judged is the file opened, each call at most once.

Real plugins, real tools with effects: a tool that opens a relative path against the
process's working directory, a batch whose ids collide, a response with two choices.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from attack_harness import Sandbox
from jevqueue.errors import ConfigurationError, ProviderHTTPError
from jevqueue.policy import (
    PolicyEnforcementPoint,
    ToolRegistry,
    ToolSpec,
    create_default_policy_decision_point,
)
from jevqueue.testing.recording_audit import RecordingAuditSink

READ = ToolSpec("read_file", side_effects={"file_read"}, path_fields=("path",))
WRITE = ToolSpec("write_file", side_effects={"file_write"}, path_fields=("path",))


@pytest.fixture
def two_hostnames(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    """``etc/hostname`` inside the workspace, and another where the process runs."""
    (sandbox.workspace / "etc").mkdir()
    (sandbox.workspace / "etc" / "hostname").write_text("judged\n", "utf-8")
    (sandbox.outside / "etc").mkdir()
    (sandbox.outside / "etc" / "hostname").write_text("NOT JUDGED\n", "utf-8")
    monkeypatch.chdir(sandbox.outside)
    return sandbox


def _pep() -> tuple[PolicyEnforcementPoint, RecordingAuditSink]:
    audit = RecordingAuditSink()
    return PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=audit), audit


# --- the OpenAI runner ----------------------------------------------------------------------


def test_openai_runner_opens_the_judged_file(two_hostnames: Sandbox) -> None:
    openai = pytest.importorskip("jevqueue.plugins.openai")
    pep, audit = _pep()
    runner = openai.PolicyToolRunner(
        {"read_file": lambda path: Path(path).read_text("utf-8")},
        pep=pep,
        registry=ToolRegistry([READ]),
        context=two_hostnames.context(),
    )
    (result,) = runner.run(openai.tool_call_completion("read_file", {"path": "etc/hostname"}))
    assert result.executed and result.content == "judged\n"
    assert audit.events[-1]["allowed"] is True


def test_openai_runner_refuses_a_response_with_two_choices(sandbox: Sandbox) -> None:
    openai = pytest.importorskip("jevqueue.plugins.openai")
    pep, audit = _pep()
    written: list[str] = []
    runner = openai.PolicyToolRunner(
        {"write_file": lambda path: written.append(path) or "ok"},
        pep=pep,
        registry=ToolRegistry([WRITE]),
        context=sandbox.context(),
    )
    first = openai.tool_call_completion("write_file", {"path": "a.txt"})
    second = openai.tool_call_completion("write_file", {"path": ".git/hooks/pre-commit"})
    body = {**first, "choices": [first["choices"][0], {**second["choices"][0], "index": 1}]}
    results = runner.run(body)
    assert written == []
    assert [r.executed for r in results] == [False, False]
    assert all("2 choices" in r.content for r in results)
    assert [e["allowed"] for e in audit.events] == [False, False]


def test_the_openai_host_refuses_a_body_with_two_choices() -> None:
    pytest.importorskip("jevqueue.plugins.openai")
    import json

    from jevqueue.plugins.openai._chat_request import checked_completion

    choice = {"index": 0, "message": {"role": "assistant", "content": "x"}}
    body = json.dumps({"choices": [choice, {**choice, "index": 1}]})
    with pytest.raises(ProviderHTTPError, match="2 choices"):
        checked_completion(200, body, "http://127.0.0.1/v1/chat/completions", secret=None)


# --- LangGraph --------------------------------------------------------------------------------


def _langgraph_node(tools: list[Any], specs: list[ToolSpec], sandbox: Sandbox) -> Any:
    langgraph = pytest.importorskip("jevqueue.plugins.langgraph")
    pep, audit = _pep()
    node = langgraph.policy_tool_node(tools, pep=pep, specs=specs, context=sandbox.context())
    return node, audit


def test_langgraph_tool_opens_the_judged_file(two_hostnames: Sandbox) -> None:
    pytest.importorskip("langgraph")
    from langchain_core.messages import AIMessage
    from langchain_core.tools import StructuredTool

    def read_file(path: str) -> str:
        """Read a file."""
        return Path(path).read_text("utf-8")

    tool = StructuredTool.from_function(read_file)
    from langgraph.graph import START, MessagesState, StateGraph

    node, audit = _langgraph_node([tool], [READ], two_hostnames)
    graph = StateGraph(MessagesState)
    graph.add_node("tools", node)
    graph.add_edge(START, "tools")
    call = {"name": "read_file", "args": {"path": "etc/hostname"}, "id": "c1"}
    out = graph.compile().invoke({"messages": [AIMessage("", tool_calls=[call])]})
    out = {"messages": out["messages"][1:]}
    (message,) = out["messages"]
    assert message.content == "judged\n"
    assert audit.events[-1]["allowed"] is True


@pytest.mark.parametrize("ids", [("same", "same"), (None, None), ("c1", None)])
def test_langgraph_refuses_a_batch_with_missing_or_repeated_ids(
    sandbox: Sandbox, ids: tuple[Any, Any]
) -> None:
    pytest.importorskip("langgraph")
    from langchain_core.messages import AIMessage
    from langchain_core.tools import StructuredTool

    written: list[str] = []

    def write_file(path: str) -> str:
        """Append a line to a file."""
        written.append(path)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("once\n")
        return "ok"

    tool = StructuredTool.from_function(write_file)
    node, audit = _langgraph_node([tool], [WRITE], sandbox)
    calls = [
        {"name": "write_file", "args": {"path": "log.txt"}, "id": ids[0]},
        {"name": "write_file", "args": {"path": "log.txt"}, "id": ids[1]},
    ]
    message = AIMessage("", tool_calls=[])
    message.tool_calls = calls  # as a provider adapter may leave them
    out = node.invoke({"messages": [message]})
    assert written == [] and not (sandbox.workspace / "log.txt").exists()
    assert all(m.status == "error" and "id" in m.content for m in out["messages"])
    assert [e["allowed"] for e in audit.events] == [False, False]


# --- CrewAI -------------------------------------------------------------------------------------


def test_crewai_refuses_an_undeclared_tool_when_it_is_wrapped(sandbox: Sandbox) -> None:
    crewai = pytest.importorskip("jevqueue.plugins.crewai")
    from crewai.tools import tool

    ran: list[str] = []

    @tool("Delete Everything")
    def delete_everything(path: str) -> str:
        """Delete a tree."""
        ran.append(path)
        return "gone"

    pep, _ = _pep()
    guard = crewai.ToolGuard(pep, registry=ToolRegistry([READ]), context=sandbox.context())
    with pytest.raises(ConfigurationError, match="tool_spec"):
        guard.wrap([delete_everything])
    assert ran == []


def test_crewai_tool_opens_the_judged_file(two_hostnames: Sandbox) -> None:
    crewai = pytest.importorskip("jevqueue.plugins.crewai")
    from crewai.tools import tool

    @tool("read_file")
    def read_file(path: str) -> str:
        """Read a file."""
        return Path(path).read_text("utf-8")

    pep, audit = _pep()
    guard = crewai.ToolGuard(
        pep,
        registry=ToolRegistry(
            [crewai.tool_spec(read_file, side_effects={"file_read"}, path_fields=["path"])]
        ),
        context=two_hostnames.context(),
    )
    (governed,) = guard.wrap([read_file])
    assert governed.run(path="etc/hostname") == "judged\n"
    assert os.getcwd() == os.path.realpath(two_hostnames.outside)
    assert audit.events[-1]["allowed"] is True
