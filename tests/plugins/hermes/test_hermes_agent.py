"""A real Hermes ``AIAgent`` loop, its own OpenAI client, a recording server on 127.0.0.1.

Only the model's answers are scripted: the agent loop, its middleware and hook dispatch,
its streaming client and its tool dispatcher are Hermes' own. What the server recorded is
what a provider would receive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "run_agent",
    reason="Hermes Agent is not installed here: it runs in its own venv (make test builds it; "
    'pip install "jevqueue[hermes]")',
)

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hermes_kit import hermes_agent, register_tools
from jevqueue import (
    ConfigurationError,
    ExecutionContext,
    Governor,
    PolicyEnforcementPoint,
    Thresholds,
)
from jevqueue import (
    Path as DecisionPath,
)
from jevqueue.approvals import (
    ApprovalAuthority,
    MemoryConsumedApprovals,
    SignedApprovalVerifier,
)
from jevqueue.plugins.hermes import HermesGovernance
from jevqueue.plugins.hermes.testing import RecordingChatServer, text_reply, tool_reply
from jevqueue.testing.conformance import ConformancePolicy, conformance_tools
from jevqueue.testing.recording_audit import RecordingAuditSink

pytestmark = pytest.mark.network_allowed


class WeatherBallot:
    """Routes a weather question to ``get_weather``; anything else is left to the model."""

    def __init__(self, during: Any = None) -> None:
        self.during = during

    def score(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, float]:
        if self.during is not None:
            self.during()
        text = str(messages[-1].get("content", "")).lower()
        weather = 0.95 if "weather" in text else 0.4
        names = [tool["function"]["name"] for tool in tools]
        return {name: weather if name == "get_weather" else 0.05 for name in names}


def governor(ballot: Any = None) -> Governor:
    return Governor(
        ballot or WeatherBallot(), thresholds=Thresholds(confident=0.6, margin=0.25, floor=0.2)
    )


class Setup:
    def __init__(self, root: Path) -> None:
        self.tools = conformance_tools()
        self.specs = register_tools(self.tools)
        key = Ed25519PrivateKey.generate()
        self.authority = ApprovalAuthority(key, "alice")
        self.audit = RecordingAuditSink()
        self.pep = PolicyEnforcementPoint(
            ConformancePolicy(),
            audit_logger=self.audit,
            approval_verifier=SignedApprovalVerifier({"alice": key.public_key()}),
            consumed_approvals=MemoryConsumedApprovals(),
        )
        self.context = ExecutionContext(
            task_id="hermes", actor_id="tester", workspace=str(root), git_sha="0123456"
        )

    def tool(self, name: str) -> Any:
        return next(tool for tool in self.tools if tool.name == name)

    def governance(self, agent: Any, **options: Any) -> HermesGovernance:
        options.setdefault("governor", governor())
        return HermesGovernance(
            agent, pep=self.pep, specs=self.specs, context=self.context, **options
        )


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def test_a_forced_call_names_the_tool_once_and_the_next_call_is_hermes_own(setup: Setup) -> None:
    steps = [tool_reply("get_weather", {"city": "Lisbon"}), text_reply("Sunny in Lisbon.")]
    with RecordingChatServer(steps) as server:
        agent = hermes_agent(server.base_url)
        gov = governor()
        with setup.governance(agent, governor=gov):
            result = agent.run_conversation("What is the weather in Lisbon?")
    server.assert_complete()
    assert result["final_response"] == "Sunny in Lisbon."
    forced, follow_up = server.requests
    assert forced["stream"] is True  # Hermes' own streaming client
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert forced["parallel_tool_calls"] is False
    assert forced["messages"][-1]["role"] == "system"
    assert "get_weather" in forced["messages"][-1]["content"]
    assert sorted(t["function"]["name"] for t in forced["tools"]) == sorted(
        t.name for t in setup.tools
    )
    # Per call, never for the session: the call after the tool result carries nothing.
    assert "tool_choice" not in follow_up and "parallel_tool_calls" not in follow_up
    assert [m["role"] for m in follow_up["messages"]][-3:] == ["user", "assistant", "tool"]
    assert not any("get_weather" in str(m.get("content")) for m in follow_up["messages"][:1])
    assert gov.last.path is DecisionPath.DELEGATE
    assert setup.tool("get_weather").calls == [{"city": "Lisbon"}]


def test_a_reply_that_calls_another_tool_is_refused_and_nothing_runs(setup: Setup) -> None:
    steps = [tool_reply("run_command", {"command": "echo hi"})]
    with RecordingChatServer(steps) as server:
        agent = hermes_agent(server.base_url)
        governance = setup.governance(agent)
        with governance:
            result = agent.run_conversation("What is the weather in Lisbon?")
    server.assert_complete()
    assert len(server.requests) == 1
    assert "jevqueue blocked the model's reply" in result["final_response"]
    assert all(tool.calls == [] for tool in setup.tools)
    assert setup.audit.events == []  # nothing reached the tool step
    assert governance.middleware is not None
    assert governance.middleware.refusals[-1].error.called == ["run_command"]


def test_a_delegated_call_is_sent_exactly_as_hermes_built_it(setup: Setup) -> None:
    seen: list[dict[str, Any]] = []

    def observe(**kwargs: Any) -> Any:
        seen.append(kwargs["request"])
        return None

    with RecordingChatServer([text_reply("I have three tools.")]) as server:
        agent = hermes_agent(server.base_url)
        from hermes_cli.plugins import get_plugin_manager

        hooks = get_plugin_manager()._middleware.setdefault("llm_request", [])
        hooks.append(observe)  # Hermes' final request, as the llm_request pass sees it
        try:
            with setup.governance(agent):
                agent.run_conversation("Tell me about the tools you have.")
        finally:
            hooks.remove(observe)
    (body,) = server.requests
    assert "tool_choice" not in body and "parallel_tool_calls" not in body
    assert body["messages"] == seen[0]["messages"]
    # Hermes' streaming call adds the stream fields and takes the timeout as a client option.
    sent = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    built = {k: v for k, v in seen[0].items() if k != "timeout"}
    assert sent == built


def test_an_interrupt_during_the_decision_stops_the_call(setup: Setup) -> None:
    with RecordingChatServer([]) as server:
        agent = hermes_agent(server.base_url)
        gov = governor(WeatherBallot(during=agent.interrupt))
        with setup.governance(agent, governor=gov):
            agent.run_conversation("What is the weather in Lisbon?")
    assert server.requests == []
    assert gov.last.path is DecisionPath.INTERRUPTED
    assert all(tool.calls == [] for tool in setup.tools)


def test_a_denied_call_never_runs_and_the_model_reads_the_denial(setup: Setup) -> None:
    steps = [tool_reply("delete_file", {"path": "notes.txt"}), text_reply("I could not.")]
    with RecordingChatServer(steps) as server:
        agent = hermes_agent(server.base_url)
        with setup.governance(agent, governor=None):
            result = agent.run_conversation("Delete notes.txt")
    server.assert_complete()
    assert result["final_response"] == "I could not."
    assert setup.tool("delete_file").calls == []
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "jevqueue denied" in tool_message["content"]
    assert setup.audit.results == ["DENY"]


def test_an_approved_command_runs_once_with_a_record_for_its_digest(setup: Setup) -> None:
    asked: list[str] = []

    def approve(request: Any) -> Any:
        asked.append(request.action_digest)
        return setup.authority.issue(request.action_digest)

    steps = [tool_reply("run_command", {"command": "ls"}), text_reply("Listed.")]
    with RecordingChatServer(steps) as server:
        agent = hermes_agent(server.base_url)
        with setup.governance(agent, governor=None, approver=approve):
            agent.run_conversation("List the files")
    assert setup.tool("run_command").calls == [{"command": "ls"}]
    assert len(asked) == 1 and asked[0].startswith("sha256:")


def test_a_command_without_an_approver_is_refused_naming_its_digest(setup: Setup) -> None:
    steps = [tool_reply("run_command", {"command": "ls"}), text_reply("Not run.")]
    with RecordingChatServer(steps) as server:
        agent = hermes_agent(server.base_url)
        with setup.governance(agent, governor=None):
            agent.run_conversation("List the files")
    assert setup.tool("run_command").calls == []
    assert "sha256:" in server.requests[1]["messages"][-1]["content"]


def test_another_agent_in_the_process_is_left_alone(setup: Setup) -> None:
    steps = [text_reply("Sunny."), text_reply("Sunny.")]
    with RecordingChatServer(steps) as server:
        governed = hermes_agent(server.base_url)
        other = hermes_agent(server.base_url)
        with setup.governance(governed):
            other.run_conversation("What is the weather in Lisbon?")
    assert "tool_choice" not in server.requests[0]


def test_an_undeclared_tool_is_refused_when_governance_is_built(setup: Setup) -> None:
    with RecordingChatServer([]) as server:
        agent = hermes_agent(server.base_url)
        with pytest.raises(ConfigurationError, match="tool_spec"):
            HermesGovernance(agent, pep=setup.pep, specs=setup.specs[:1], context=setup.context)
        with pytest.raises(ConfigurationError, match="governor, a pep, or both"):
            HermesGovernance(agent)
        with pytest.raises(ConfigurationError, match="session_id"):
            HermesGovernance(object(), governor=governor())


def test_registered_from_a_hermes_plugin_context_it_governs_the_same_way(setup: Setup) -> None:
    from hermes_cli.plugins import PluginContext, PluginManifest, get_plugin_manager

    manager = get_plugin_manager()
    steps = [tool_reply("get_weather", {"city": "Lisbon"}), text_reply("Sunny.")]
    with RecordingChatServer(steps) as server:
        agent = hermes_agent(server.base_url)
        governance = setup.governance(agent)
        governance.register(PluginContext(PluginManifest(name="jevqueue"), manager))
        try:
            agent.run_conversation("What is the weather in Lisbon?")
        finally:
            governance.uninstall()
    assert server.requests[0]["tool_choice"]["function"]["name"] == "get_weather"
    assert setup.tool("get_weather").calls == [{"city": "Lisbon"}]
    assert setup.audit.results == ["ALLOW"]
    assert governance.guard is not None
    assert governance.guard.pre_tool_call not in manager._hooks.get("pre_tool_call", [])


def test_a_tool_call_of_another_session_is_judged_too(setup: Setup) -> None:
    steps = [tool_reply("delete_file", {"path": "notes.txt"}), text_reply("Could not.")]
    with RecordingChatServer(steps) as server:
        governed = hermes_agent(server.base_url)
        other = hermes_agent(server.base_url)  # a subagent, say: another session
        with setup.governance(governed):
            other.run_conversation("Delete notes.txt")
    assert "tool_choice" not in server.requests[0]  # its model calls are not governed
    assert setup.tool("delete_file").calls == []  # but its tool calls are judged
    assert setup.audit.results == ["DENY"]
